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
// statement, INSERT … ON CONFLICT DO UPDATE … WHERE, that the database
// decides alone (no read first):
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
//     never left, whatever arrives later.
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
}

const insertSQL = `
INSERT INTO subscriptions AS s (source, external_id, status, customer_id, current_period_end,
                                cancel_at_period_end, account_id, event_at, provider_event_id)
SELECT $1, $2, $3, NULLIF($4, ''), $5::timestamptz, $6, NULLIF($7, ''), $8, $9
WHERE receiver_claimed()
`

func args(s Subscription) []any {
	var periodEnd any
	if !s.CurrentPeriodEnd.IsZero() {
		periodEnd = s.CurrentPeriodEnd
	}
	return []any{s.Source, s.ExternalID, s.Status, s.CustomerID, periodEnd, s.CancelAtPeriodEnd, s.AccountID,
		s.At, s.EventID}
}

// set is the update of a row to the state of the event being inserted
// (EXCLUDED), whole: a period end the event does not give (Paddle gives
// none for a paused or canceled subscription) is none, so that the row is
// the newest event's state whichever events came before it. Only the
// customer and the account, which never change, are kept when absent.
const set = `
    SET status = EXCLUDED.status,
        customer_id = coalesce(EXCLUDED.customer_id, s.customer_id),
        current_period_end = EXCLUDED.current_period_end,
        cancel_at_period_end = EXCLUDED.cancel_at_period_end,
        account_id = coalesce(s.account_id, EXCLUDED.account_id),
        event_at = greatest(s.event_at, EXCLUDED.event_at),
        provider_event_id = EXCLUDED.provider_event_id,
        updated_at = now()`

// Insert records s if the subscription has no row yet, and otherwise
// changes nothing: Stripe's customer.subscription.created, the first state
// of a subscription, which any other event of it supersedes.
func Insert(q Queue, s Subscription) {
	q.Exec(insertSQL+`ON CONFLICT (source, external_id) DO NOTHING`, args(s)...)
}

// Apply gives the subscription s's state, creating its row if absent,
// unless the last event applied to it is newer than s (an event of the
// same time is applied: the later arrival wins) or its status is one of
// final.
func Apply(q Queue, s Subscription, final []string) {
	q.Exec(insertSQL+`ON CONFLICT (source, external_id) DO UPDATE`+set+`
    WHERE s.status <> ALL ($10) AND EXCLUDED.event_at >= s.event_at`, append(args(s), final)...)
}

// End gives the subscription s's state, which must be one of final,
// whatever the time of the last event applied, unless its status is
// already final: the event that ends a subscription (Stripe's
// customer.subscription.deleted) is its last, even when an event of the
// same second arrives after it.
func End(q Queue, s Subscription, final []string) {
	q.Exec(insertSQL+`ON CONFLICT (source, external_id) DO UPDATE`+set+`
    WHERE s.status <> ALL ($10)`, append(args(s), final)...)
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
