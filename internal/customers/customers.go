// Package customers remembers a customer's email address, by the
// provider's customer id, from the events that name both (a Stripe
// Checkout Session's customer and customer_details.email, an invoice's
// customer and customer_email, customer.created and customer.updated), so
// that an event naming only the customer (a subscription's, cus_…) can
// still be answered by email.
//
// The newest event that gave an address wins (an event of the same time
// as the last one applied too: the later arrival); an event without an
// address records nothing. Writes are queued on the event's transaction,
// conditional on receiver_claimed(); WithAddress adds the address to a
// step's payload in the same transaction.
package customers

import (
	"strconv"
	"time"
)

// Queue is where writes go: the event's transaction (*webhooks.Plan).
type Queue interface {
	Exec(sql string, args ...any)
}

// Customer is a customer's address as one event gives it.
type Customer struct {
	Source    string
	ID        string // cus_…
	Email     string
	AccountID string    // the Stripe connected account; "" for the platform's own
	EventID   string    // the event that gave the address
	At        time.Time // when that event happened, as the provider signed it
}

// Remember records c's address unless a newer event gave one. A customer
// with no id or no address records nothing.
func Remember(q Queue, c Customer) {
	if c.ID == "" || c.Email == "" {
		return
	}
	q.Exec(`
INSERT INTO customers AS c (source, customer_id, email, account_id, event_at, provider_event_id)
SELECT $1, $2, $3, NULLIF($4, ''), $5, $6 WHERE receiver_claimed()
ON CONFLICT (source, customer_id) DO UPDATE
    SET email = EXCLUDED.email, account_id = coalesce(c.account_id, EXCLUDED.account_id),
        event_at = EXCLUDED.event_at, provider_event_id = EXCLUDED.provider_event_id, updated_at = now()
    WHERE EXCLUDED.event_at >= c.event_at`,
		c.Source, c.ID, c.Email, c.AccountID, c.At, c.EventID)
}

// WithAddress turns a step condition (webhooks.Plan.StepIf) into one that
// also puts the customer's known address in the step's payload as "to"
// (an email step's recipient): with none known, the payload is the
// condition's own, and the email is recorded skipped for want of a
// recipient.
func WithAddress(cond string, args []any, source, customerID string) (string, []any) {
	n := len(args)
	p := func(i int) string { return "$" + strconv.Itoa(n+i) }
	return `SELECT coalesce(c.patch, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object('to',
    (SELECT a.email FROM customers a WHERE a.source = ` + p(1) + ` AND a.customer_id = ` + p(2) + `)))
FROM (` + cond + `) AS c(patch)`, append(append([]any(nil), args...), source, customerID)
}
