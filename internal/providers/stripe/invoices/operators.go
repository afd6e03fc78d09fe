package invoices

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/ops"
)

// Owner is the invoices' account to operators (ops.Owner): the invoices
// an event's body names, and the events an invoice's id or its customer's
// email finds.
type Owner struct{}

// Row is an invoice as operators see it.
type Row struct {
	StripeInvoiceID string    `json:"stripe_invoice_id"`
	Status          string    `json:"status"`
	AmountDue       int64     `json:"amount_due"`
	AmountPaid      int64     `json:"amount_paid"`
	Currency        string    `json:"currency"`
	CustomerEmail   string    `json:"customer_email,omitempty"`
	AccountID       string    `json:"account_id,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	Wrote           bool      `json:"wrote"`
}

// relatedSQL reads the invoices whose id is among the ids $1 of an
// event's body; $2 is its claim's time.
const relatedSQL = `
SELECT stripe_invoice_id, status, amount_due, amount_paid, currency, coalesce(customer_email, ''),
       coalesce(account_id, ''), created_at, updated_at, created_at = $2 OR updated_at = $2
FROM invoices WHERE stripe_invoice_id = ANY($1)
ORDER BY id LIMIT 50`

// Name is the key of invoices in an event's records.
func (Owner) Name() string { return "invoices" }

// Related looks up the invoices e concerns.
func (Owner) Related(e ops.Concern) ops.Lookup {
	return ops.Lookup{SQL: relatedSQL, Args: []any{e.IDs, e.ReceivedAt},
		Row: func(row pgx.CollectableRow) (ops.Row, error) {
			var i Row
			err := row.Scan(&i.StripeInvoiceID, &i.Status, &i.AmountDue, &i.AmountPaid, &i.Currency, &i.CustomerEmail,
				&i.AccountID, &i.CreatedAt, &i.UpdatedAt, &i.Wrote)
			return i, err
		}}
}

// Search finds the invoices whose id or customer's email is the text, and
// through them the events that created each, last changed it (its
// created_at and updated_at are the claimed_at of the events whose
// transaction wrote it, checked against their bodies) or recorded a
// failed payment of it.
func (Owner) Search(t *ops.Term) ops.Search {
	q := t.Text()
	return ops.Search{
		With: []string{`invoices_found AS MATERIALIZED (
        SELECT stripe_invoice_id, created_at, updated_at FROM invoices
        WHERE stripe_invoice_id = ` + q + ` OR lower(customer_email) = lower(` + q + `)
        LIMIT ` + t.Limit() + `)`},
		IDs: []string{`SELECT provider_event_id FROM invoice_payment_failures
               WHERE stripe_invoice_id IN (SELECT stripe_invoice_id FROM invoices_found) LIMIT ` + t.Limit()},
		Keys: []string{`SELECT e.event_key FROM invoices_found i
    JOIN processed_events e ON e.kind = 'event' AND e.claimed_at IN (i.created_at, i.updated_at)
        AND position(convert_to(i.stripe_invoice_id, 'UTF8') IN e.body) > 0`},
	}
}

// Line is the invoice in the operators' tables: what was paid of what is
// due.
func (i Row) Line() ops.Line {
	return ops.Line{Kind: "invoice", ID: i.StripeInvoiceID, Status: i.Status,
		Amount: ops.Money(i.AmountPaid, i.Currency) + " of " + ops.Money(i.AmountDue, i.Currency), Customer: i.CustomerEmail,
		Notes: ops.Notes(ops.Note{Label: "account", Text: i.AccountID}), Updated: i.UpdatedAt, Wrote: i.Wrote}
}
