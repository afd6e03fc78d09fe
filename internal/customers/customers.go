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
//
// # A row every event of the customer names
//
// Every invoice, Checkout Session and customer event of one customer names
// its row, and a customer's burst (a Checkout with a subscription sends
// half a dozen events within a second) would queue on it if each event
// locked it: the lock is held until the event's commit, and commits wait on
// the disk one behind the other. So an event takes the row's lock only when
// it changes the row, which an event of the same address and of a time
// already recorded never does (see internal/webhooks, "What a delivery's
// transaction may lock"). A real change is a different address from an
// event not older than the recorded one, or the first event of a later
// second (its time is recorded, so that an older event's different address
// cannot win over it later): with one address, once per customer and
// second at most, and an event of the customer then waits at most for the
// commit of the one that changed the row. The first events of a new
// customer, which arrive together, wait for the commit of the one that
// inserted the row, and not for each other.
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

// The customer's row is written by one call queued on the event's
// transaction, customers_remember (migrations/000025), which runs two
// statements, each deciding alone. The first inserts the row where the
// customer has none (one that is there, it meets in the primary key and
// leaves: no write, no lock); where another event inserts it at the same
// time, it waits for that event's commit (once: the insert that meets a row
// does nothing, and locks nothing) and leaves the row to the second. The
// second, with a snapshot taken after the first, updates the row where the
// event changes it: an event is applied unless it is older than the last
// one applied, and changes the row when it is newer, or of the same time
// with another address or the first account; it is skipped when the first
// made the row. (One statement cannot do both without a lock: an INSERT …
// ON CONFLICT DO UPDATE locks the row it meets even when its WHERE is
// false, and the events of a new customer, which arrive together, would
// then wait for each other's commits one after the other.) The two are a
// function, not two statements of the batch, so that a transaction-mode
// pooler that prepares nothing (PgBouncer 1.18) has PostgreSQL parse and
// plan one small call per event: the function's statements are planned once
// per connection, by PostgreSQL.
const rememberSQL = `SELECT customers_remember($1, $2, $3, $4, $5, $6)`

// Remember records c's address unless a newer event gave one. A customer
// with no id or no address records nothing; an event that changes nothing
// of the customer's row neither writes nor locks it.
func Remember(q Queue, c Customer) {
	if c.ID == "" || c.Email == "" {
		return
	}
	q.Exec(rememberSQL, c.Source, c.ID, c.Email, c.AccountID, c.At, c.EventID)
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
