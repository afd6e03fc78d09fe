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
// Paddle's occurred_at; Polar's modified_at), and each event is decided by
// the database alone (no read first): an INSERT of the row where it is
// absent, then an UPDATE of the row where the rules below let the event
// change it, two statements of the event's one round trip:
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
	// Items are what the subscription is for, as the event carries them
	// (JSON: internal/entitlements' items; nil: the event says nothing).
	Items []byte
	// CustomerKey is the customer's provider-keyed subject (stripe:cus_…)
	// and AppUserID the app's user id the event carried (a claim): see
	// internal/entitlements.
	CustomerKey, AppUserID string
}

func args(s Subscription) []any {
	var periodEnd any
	if !s.CurrentPeriodEnd.IsZero() {
		periodEnd = s.CurrentPeriodEnd
	}
	var items any
	if s.Items != nil {
		items = string(s.Items)
	}
	return []any{s.Source, s.ExternalID, s.Status, s.CustomerID, periodEnd, s.CancelAtPeriodEnd, s.AccountID,
		s.At, s.EventID, items, s.CustomerKey, s.AppUserID}
}

// insertSQL inserts the event's state where the subscription had no row
// when the statement began: a row that is there is neither written nor
// locked, nor is a value of the id sequence spent; where another event
// inserts the row at the same time, it waits for that event's commit and
// does nothing (updateSQL, which follows it, then applies the event to
// that row).
const insertSQL = `
INSERT INTO subscriptions (source, external_id, status, customer_id, current_period_end,
                           cancel_at_period_end, account_id, event_at, provider_event_id, items, customer_key, app_user_id)
SELECT $1, $2, $3, NULLIF($4, ''), $5::timestamptz, $6, NULLIF($7, ''), $8, $9, $10::jsonb, NULLIF($11, ''), NULLIF($12, '')
WHERE receiver_claimed() AND NOT EXISTS (SELECT FROM subscriptions s WHERE s.source = $1 AND s.external_id = $2)
ON CONFLICT (source, external_id) DO NOTHING`

// update is the update of a row s to the state of the event, whole, where
// cond holds: a period end the event does not give (Paddle gives none for a
// paused or canceled subscription) is none, so that the row is the newest
// event's state whichever events came before it. Only the customer and the
// account, which never change, are kept when absent. The row is written,
// and locked until the commit, only where cond holds (an UPDATE locks only
// the rows it changes, where an INSERT … ON CONFLICT DO UPDATE locks the
// row it meets even when its WHERE is false: see internal/webhooks, "What a
// delivery's transaction may lock").
func update(cond string) string {
	return `
UPDATE subscriptions AS s
SET status = $3, customer_id = coalesce(NULLIF($4, ''), s.customer_id), current_period_end = $5::timestamptz,
    cancel_at_period_end = $6, account_id = coalesce(s.account_id, NULLIF($7, '')),
    event_at = greatest(s.event_at, $8), provider_event_id = $9, updated_at = now(),
    items = coalesce($10::jsonb, s.items), customer_key = coalesce(NULLIF($11, ''), s.customer_key),
    app_user_id = NULLIF($12, '')
WHERE s.source = $1 AND s.external_id = $2 AND receiver_claimed() AND s.status <> ALL ($13) AND ` + cond
}

// differs holds when the event's state is not the row's: only then does an
// event of a time already recorded write the row.
const differs = `(s.status, s.customer_id, s.current_period_end, s.cancel_at_period_end, s.account_id,
       s.items, s.customer_key, s.app_user_id)
      IS DISTINCT FROM ($3, coalesce(NULLIF($4, ''), s.customer_id), $5::timestamptz, $6,
                        coalesce(s.account_id, NULLIF($7, '')), coalesce($10::jsonb, s.items),
                        coalesce(NULLIF($11, ''), s.customer_key), NULLIF($12, ''))`

var (
	// An event newer than the last one applied, or of its time with
	// another state, unless the row's status is final. An event of a newer
	// time with the same state writes only its time, so that an older
	// event arriving later is still known as older.
	applySQL = update(`(s.event_at < $8 OR (s.event_at = $8 AND ` + differs + `))`)
	// The final state whatever the time, unless the row's status is
	// already final.
	endSQL = update(`(s.event_at < $8 OR ` + differs + `)`)
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
	q.Exec(insertSQL, args(s)...)
	q.Exec(applySQL, append(args(s), final)...)
}

// End gives the subscription s's state, which must be one of final,
// whatever the time of the last event applied, unless its status is
// already final: the event that ends a subscription (Stripe's
// customer.subscription.deleted) is its last, even when an event of the
// same second arrives after it. A subscription already ended is neither
// written nor locked.
func End(q Queue, s Subscription, final []string) {
	q.Exec(insertSQL, args(s)...)
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
