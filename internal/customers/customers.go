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
// transaction may lock"): Remember is an UPDATE whose WHERE holds only for
// a real change (PostgreSQL locks only the rows an UPDATE changes, where an
// INSERT … ON CONFLICT DO UPDATE locks the row it conflicts with even when
// its WHERE is false), and the INSERT of a new customer runs only when the
// row was absent. A real change is a different address from an event not
// older than the recorded one, or the first event of a later second (its
// time is recorded, so that an older event's different address cannot win
// over it later): with one address, once per customer and second at most,
// and an event of the customer then waits at most for the commit of the
// one that changed the row.
package customers

import (
	"strconv"
	"strings"
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

// An event (its row named NEW) is applied to the customer's row c unless
// it is older than the last event applied; it changes the row when it is
// newer, or of the same time with another address or the first account.
// changeSet is the SET of both the UPDATE and the insert's ON CONFLICT,
// changes their condition.
const (
	changeSet = `
    SET email = NEW.email, account_id = coalesce(c.account_id, NEW.account_id),
        event_at = NEW.event_at, provider_event_id = NEW.provider_event_id, updated_at = now()`
	changes = `(c.event_at < NEW.event_at
        OR (c.event_at = NEW.event_at
            AND (c.email IS DISTINCT FROM NEW.email OR (c.account_id IS NULL AND NEW.account_id IS NOT NULL))))`
)

// rememberSQL is one statement, decided by the database alone: the event's
// row (e, none unless this transaction holds the claim), the UPDATE of the
// customer's row where the event changes it, and the INSERT of the row
// where it was absent. Both read the statement's snapshot: when another
// event inserts the customer meanwhile, the insert meets its row, waits
// for its commit if need be and applies the same rule to it (the only
// case in which it locks a row it leaves unchanged: two first events of a
// customer at once).
var rememberSQL = `
WITH e (source, customer_id, email, account_id, event_at, provider_event_id) AS (
    SELECT $1::text, $2::text, $3::text, NULLIF($4::text, ''), $5::timestamptz, $6::text WHERE receiver_claimed()
), changed AS (
    UPDATE customers AS c` + strings.ReplaceAll(changeSet, "NEW.", "e.") + `
    FROM e
    WHERE c.source = e.source AND c.customer_id = e.customer_id AND ` + strings.ReplaceAll(changes, "NEW.", "e.") + `
)
INSERT INTO customers AS c (source, customer_id, email, account_id, event_at, provider_event_id)
SELECT * FROM e
WHERE NOT EXISTS (SELECT FROM customers x WHERE x.source = e.source AND x.customer_id = e.customer_id)
ON CONFLICT (source, customer_id) DO UPDATE` + strings.ReplaceAll(changeSet, "NEW.", "EXCLUDED.") + `
    WHERE ` + strings.ReplaceAll(changes, "NEW.", "EXCLUDED.")

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
