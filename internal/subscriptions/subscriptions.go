// Package subscriptions holds the subscriptions of every provider (Stripe,
// Paddle, and any later one) and the SQL that writes them: one row per
// subscription, unique by source and the provider's id, in the provider's
// own words (Stripe's incomplete, trialing, active, past_due, canceled, …;
// Paddle's trialing, active, past_due, paused, canceled).
//
// # Converging whatever order events arrive in
//
// A subscription event carries the whole subscription as it was when the
// event happened, and providers deliver such events late, out of order and
// more than once. A row therefore keeps when its state was true: event_at,
// the time of the last event applied (Stripe's signed created, in seconds;
// Paddle's occurred_at; Polar's modified_at), and each event is one
// statement that the database decides alone (no read first), an UPDATE of
// the row where the rules below let the event change it and an INSERT
// where the row is absent:
//
//   - an event older than the last one applied changes nothing;
//   - an event of the same time is applied: within one tick of the
//     provider's clock the later arrival wins. Stripe's created is in whole
//     seconds, and a checkout makes the subscription's created (status
//     incomplete) and updated (active) events in the same second; since a
//     created event only ever inserts (Insert), the pair ends active in
//     either order: created then updated, the updated is of the same
//     second and wins; updated then created, the created finds the row and
//     does nothing;
//   - a final status (Stripe's canceled and incomplete_expired, Paddle's
//     canceled: the provider never moves such a subscription again) is
//     never left, whatever arrives later;
//   - an event that leaves the row as it is (the same state, of a time
//     already recorded; any event of a subscription already ended) neither
//     writes the row nor locks it, so that events of one subscription do
//     not wait for each other's commits for nothing. An event of a later
//     time with the same state writes its time only.
//
// Writes are queued on the event's transaction (a webhooks.Plan), each
// conditional on receiver_claimed() (a copy of the event skips it). The
// customer emails of a subscription (the trial-ending and the ended email)
// are planned on Noticed, so that each is sent once however often its
// event is replayed.
package subscriptions

import (
	"strings"
	"time"
)

// Queue is where writes go: the event's transaction (*webhooks.Plan).
type Queue interface {
	Exec(sql string, args ...any)
}

// Subscription is a subscription's state as one event carries it.
type Subscription struct {
	Source     string // the provider's Spec.Source
	ExternalID string // sub_…, the provider's subscription id
	Status     string // the provider's own word
	CustomerID string // cus_…, ctm_…; "" when the event names none
	// CurrentPeriodEnd is when the period paid for ends; zero: the
	// subscription has none (or the event does not say).
	CurrentPeriodEnd  time.Time
	CancelAtPeriodEnd bool
	AccountID         string // the Stripe connected account; "" for the platform's own
	EventID           string // the event that carries this state
	// At is when the event happened, as the provider signed it: what
	// orders the events of one subscription.
	At time.Time
}

func args(s Subscription) []any {
	var periodEnd any
	if !s.CurrentPeriodEnd.IsZero() {
		periodEnd = s.CurrentPeriodEnd
	}
	return []any{s.Source, s.ExternalID, s.Status, s.CustomerID, periodEnd, s.CancelAtPeriodEnd, s.AccountID,
		s.At, s.EventID}
}

// event is the state an event carries, as a row (e) of the statement, none
// unless this transaction holds the claim.
const event = `
WITH e (source, external_id, status, customer_id, current_period_end, cancel_at_period_end, account_id, event_at,
        provider_event_id) AS (
    SELECT $1::text, $2::text, $3::text, NULLIF($4::text, ''), $5::timestamptz, $6::boolean, NULLIF($7::text, ''),
           $8::timestamptz, $9::text
    WHERE receiver_claimed()
)`

// absent inserts the event's state where the subscription had no row when
// the statement began (its snapshot): a row that is already there is
// neither written nor locked, nor is a value of the id sequence spent.
const absent = `
INSERT INTO subscriptions AS s (source, external_id, status, customer_id, current_period_end,
                                cancel_at_period_end, account_id, event_at, provider_event_id)
SELECT * FROM e
WHERE NOT EXISTS (SELECT FROM subscriptions x WHERE x.source = e.source AND x.external_id = e.external_id)
ON CONFLICT (source, external_id) DO `

// set is the update of a row s to the state of the event (NEW), whole: a
// period end the event does not give (Paddle gives none for a paused or
// canceled subscription) is none, so that the row is the newest event's
// state whichever events came before it. Only the customer and the
// account, which never change, are kept when absent.
const set = `
    SET status = NEW.status,
        customer_id = coalesce(NEW.customer_id, s.customer_id),
        current_period_end = NEW.current_period_end,
        cancel_at_period_end = NEW.cancel_at_period_end,
        account_id = coalesce(s.account_id, NEW.account_id),
        event_at = greatest(s.event_at, NEW.event_at),
        provider_event_id = NEW.provider_event_id,
        updated_at = now()`

// differs holds when the event's state (NEW) is not the row's (s): only then
// does an event of a time already recorded write the row.
const differs = `(s.status, s.customer_id, s.current_period_end, s.cancel_at_period_end, s.account_id)
        IS DISTINCT FROM (NEW.status, coalesce(NEW.customer_id, s.customer_id), NEW.current_period_end,
                          NEW.cancel_at_period_end, coalesce(s.account_id, NEW.account_id))`

// upsert is the statement that gives a subscription the event's state where
// cond (of the row s and the event NEW) holds, and creates its row if
// absent. The row is written, and locked until the commit, only where cond
// holds: an UPDATE locks only the rows it changes, where an INSERT … ON
// CONFLICT DO UPDATE locks the row it meets even when its WHERE is false
// (see internal/webhooks, "What a delivery's transaction may lock"). The
// insert meets a row only when another event created it after this
// statement began; it then waits for that event's commit if need be and
// applies the same cond to it.
func upsert(cond string) string {
	on := func(name string) string { return strings.ReplaceAll(name, "NEW.", "EXCLUDED.") }
	in := func(name string) string { return strings.ReplaceAll(name, "NEW.", "e.") }
	return event + `, changed AS (
    UPDATE subscriptions AS s` + in(set) + `
    FROM e
    WHERE s.source = e.source AND s.external_id = e.external_id AND ` + in(cond) + `
)` + absent + `UPDATE` + on(set) + `
    WHERE ` + on(cond)
}

var (
	// An event newer than the last one applied, or of its time with
	// another state, unless the row's status is final. An event of a newer
	// time with the same state writes only its time, so that an older
	// event arriving later is still known as older.
	applySQL = upsert(`s.status <> ALL ($10) AND (s.event_at < NEW.event_at OR (s.event_at = NEW.event_at AND ` + differs + `))`)
	// The final state whatever the time, unless the row's status is
	// already final.
	endSQL    = upsert(`s.status <> ALL ($10) AND (s.event_at < NEW.event_at OR ` + differs + `)`)
	insertSQL = event + absent + `NOTHING`
)

// Insert records s if the subscription has no row yet, and otherwise
// changes nothing: Stripe's customer.subscription.created, the first state
// of a subscription, which any other event of it supersedes.
func Insert(q Queue, s Subscription) {
	q.Exec(insertSQL, args(s)...)
}

// Apply gives the subscription s's state, creating its row if absent,
// unless the last event applied to it is newer than s (an event of the
// same time is applied: the later arrival wins) or its status is one of
// final. An event that leaves the row as it is neither writes nor locks it.
func Apply(q Queue, s Subscription, final []string) {
	q.Exec(applySQL, append(args(s), final)...)
}

// End gives the subscription s's state, which must be one of final,
// whatever the time of the last event applied, unless its status is
// already final: the event that ends a subscription (Stripe's
// customer.subscription.deleted) is its last, even when an event of the
// same second arrives after it. A subscription already ended is neither
// written nor locked.
func End(q Queue, s Subscription, final []string) {
	q.Exec(endSQL, append(args(s), final)...)
}

// Notice records that the subscription's customer is to be told notice
// ("ended", "trial_will_end:<trial end>"), once per subscription and
// notice, whichever event says it first.
func Notice(q Queue, source, subscriptionID, notice, eventID string) {
	q.Exec(`
INSERT INTO subscription_notices (source, subscription_id, notice, provider_event_id)
SELECT $1, $2, $3, $4 WHERE receiver_claimed() ON CONFLICT DO NOTHING`, source, subscriptionID, notice, eventID)
}

// Noticed is a step condition (webhooks.Plan.StepIf): it holds when this
// transaction recorded the notice (Notice), and never again for it. With
// unless, it also needs the subscription's row, if it has one, to be in
// none of those statuses: a notice that a late event would give of a
// subscription already ended (a trial ending) is not sent.
func Noticed(source, subscriptionID, notice string, unless ...string) (string, []any) {
	return `SELECT NULL::jsonb FROM subscription_notices n
WHERE n.source = $1 AND n.subscription_id = $2 AND n.notice = $3 AND n.xmin = pg_current_xact_id()::xid
  AND NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.source = $1 AND s.external_id = $2 AND s.status = ANY ($4))`,
		[]any{source, subscriptionID, notice, append([]string{}, unless...)}
}
