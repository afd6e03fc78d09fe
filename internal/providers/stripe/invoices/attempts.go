package invoices

import "strconv"

// Outcomes of a payment attempt Stripe reports (invoice_payment_failures.outcome,
// migration 22).
const (
	AttemptFailed         = "failed"          // invoice.payment_failed
	AttemptActionRequired = "action_required" // invoice.payment_action_required
)

// RecordAttempt records one reported payment attempt and its outcome, once
// per event, creating the invoice as pending if it is not known yet.
func RecordAttempt(q Queue, eventID string, inv Invoice, attempt int, outcome string) {
	EnsurePending(q, inv)
	q.Exec(`
INSERT INTO invoice_payment_failures (provider_event_id, stripe_invoice_id, attempt_count, amount_due, outcome)
SELECT $1, $2, $3, $4, $5 WHERE receiver_claimed() ON CONFLICT DO NOTHING`, eventID, inv.StripeInvoiceID, attempt,
		inv.AmountDue, outcome)
}

// Object is the business object of an invoice's own steps (its receipt):
// webhooks.Step.Object.
func Object(invoiceID string) string { return "invoice:" + invoiceID }

// AttemptObject is the business object of one payment attempt of an
// invoice (its dunning or confirm-your-payment email), by Stripe's
// attempt_count: whichever event or path reports the attempt first plans
// its email, once.
func AttemptObject(invoiceID string, attempt int) string {
	return Object(invoiceID) + ":attempt:" + strconv.Itoa(attempt)
}

// PaidNoting is a step condition (webhooks.Plan.StepIf): it holds when this
// transaction moved the invoice to paid (or created it paid), and its row
// tells the receipt whether the payment went through after a failure: the paid event's attempt_count
// (attempt) counts earlier attempts that did not go through, and an
// attempt recorded failed or waiting for the customer is one, whatever
// order the events arrived in. The step's payload gets
// {"facts": {"AfterFailure": …}} (mail.Email.Facts).
func PaidNoting(invoiceID string, attempt int) (string, []any) {
	return `SELECT jsonb_build_object('facts', jsonb_build_object('AfterFailure',
    $2::int > 1 OR EXISTS (SELECT 1 FROM invoice_payment_failures f WHERE f.stripe_invoice_id = $1)))
FROM invoices i WHERE i.stripe_invoice_id = $1 AND i.status = 'paid' AND i.` + mine,
		[]any{invoiceID, attempt}
}
