// Package invoices holds Stripe invoices and the SQL that writes them. An
// invoice is unique by its Stripe id and only ever moves forward: pending to
// paid, never back, whatever order its events arrive in.
//
// The functions take a Querier so that the webhook processor can run them
// inside the same transaction as the event's claim.
package invoices

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Statuses of an invoice.
const (
	StatusPending = "pending"
	StatusPaid    = "paid"
)

// Querier is what the functions here need of a connection or transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Invoice is a Stripe invoice as this receiver keeps it.
type Invoice struct {
	StripeInvoiceID string
	Status          string
	AmountDue       int64
	AmountPaid      int64
	Currency        string
	CustomerEmail   string
}

const insertSQL = `
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''))
`

func invoiceArgs(inv Invoice, status string) []any {
	return []any{inv.StripeInvoiceID, status, inv.AmountDue, inv.AmountPaid, inv.Currency, inv.CustomerEmail}
}

// EnsurePending creates the invoice as pending if it does not exist. An
// invoice that exists, paid or not, is left alone. It reports whether this
// call created it.
func EnsurePending(ctx context.Context, q Querier, inv Invoice) (bool, error) {
	tag, err := q.Exec(ctx, insertSQL+`ON CONFLICT (stripe_invoice_id) DO NOTHING`,
		invoiceArgs(inv, StatusPending)...)
	if err != nil {
		return false, fmt.Errorf("insert invoice %s: %w", inv.StripeInvoiceID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// MarkPaid moves the invoice from pending to paid, or creates it paid when
// its paid event arrives first. It reports whether this call changed it.
func MarkPaid(ctx context.Context, q Querier, inv Invoice) (bool, error) {
	tag, err := q.Exec(ctx, insertSQL+`
ON CONFLICT (stripe_invoice_id) DO UPDATE
    SET status = 'paid', amount_paid = EXCLUDED.amount_paid,
        customer_email = coalesce(invoices.customer_email, EXCLUDED.customer_email),
        updated_at = now()
    WHERE invoices.status = 'pending'`, invoiceArgs(inv, StatusPaid)...)
	if err != nil {
		return false, fmt.Errorf("mark invoice %s paid: %w", inv.StripeInvoiceID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RecordPaymentFailure records one failed payment attempt, once per event,
// creating the invoice as pending if it is not known yet. It reports whether
// the attempt was new.
func RecordPaymentFailure(ctx context.Context, q Querier, eventID string, inv Invoice, attempt int) (bool, error) {
	if _, err := EnsurePending(ctx, q, inv); err != nil {
		return false, err
	}
	tag, err := q.Exec(ctx, `
INSERT INTO invoice_payment_failures (provider_event_id, stripe_invoice_id, attempt_count, amount_due)
VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, eventID, inv.StripeInvoiceID, attempt, inv.AmountDue)
	if err != nil {
		return false, fmt.Errorf("record failed payment of invoice %s: %w", inv.StripeInvoiceID, err)
	}
	return tag.RowsAffected() == 1, nil
}
