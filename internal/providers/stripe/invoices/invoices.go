// Package invoices holds Stripe invoices and the SQL that writes them. An
// invoice is unique by its Stripe id and only ever moves forward: pending to
// paid, never back, whatever order its events arrive in.
//
// Writes are queued on the event's transaction (a webhooks.Plan), each
// conditional on receiver_claimed() (a copy of the event skips it), and
// what a provider must know of their effect it asks in SQL with the
// conditions below, which look at the rows this very transaction wrote.
package invoices

// Statuses of an invoice.
const (
	StatusPending = "pending"
	StatusPaid    = "paid"
)

// Queue is where writes go: the event's transaction (*webhooks.Plan).
type Queue interface {
	Exec(sql string, args ...any)
}

// Invoice is a Stripe invoice as this receiver keeps it.
type Invoice struct {
	StripeInvoiceID string
	Status          string
	AmountDue       int64
	AmountPaid      int64
	Currency        string
	CustomerEmail   string
	AccountID       string // the Stripe connected account; "" for the platform's own
}

const insertSQL = `
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email, account_id)
SELECT $1, $2, $3, $4, $5, NULLIF($6, ''), NULLIF($7, '') WHERE receiver_claimed()
`

func invoiceArgs(inv Invoice, status string) []any {
	return []any{inv.StripeInvoiceID, status, inv.AmountDue, inv.AmountPaid, inv.Currency, inv.CustomerEmail, inv.AccountID}
}

// EnsurePending creates the invoice as pending if it does not exist. An
// invoice that exists, paid or not, is left alone.
func EnsurePending(q Queue, inv Invoice) {
	q.Exec(insertSQL+`ON CONFLICT (stripe_invoice_id) DO NOTHING`, invoiceArgs(inv, StatusPending)...)
}

// MarkPaid moves the invoice from pending to paid, or creates it paid when
// its paid event arrives first.
func MarkPaid(q Queue, inv Invoice) {
	q.Exec(insertSQL+`
ON CONFLICT (stripe_invoice_id) DO UPDATE
    SET status = 'paid', amount_paid = EXCLUDED.amount_paid,
        customer_email = coalesce(invoices.customer_email, EXCLUDED.customer_email),
        updated_at = now()
    WHERE invoices.status = 'pending'`, invoiceArgs(inv, StatusPaid)...)
}

// mine is true of a row this transaction wrote (inserted or updated).
const mine = `xmin = pg_current_xact_id()::xid`

// FailureToDun is a step condition: it holds when this transaction
// recorded the event's attempt (failed, or waiting for the customer) and
// the invoice is not paid (an attempt reported after the invoice was paid
// asks nothing of the customer).
func FailureToDun(eventID, invoiceID string) (string, []any) {
	return `SELECT NULL::jsonb FROM invoice_payment_failures f
WHERE f.provider_event_id = $1 AND f.` + mine + `
  AND NOT EXISTS (SELECT 1 FROM invoices i WHERE i.stripe_invoice_id = $2 AND i.status = 'paid')`,
		[]any{eventID, invoiceID}
}
