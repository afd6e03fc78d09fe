package orders

import "time"

// # How refunds add up
//
// The refunds table holds one row per event that told of a refund, of
// two kinds, and an order's amount_refunded_cents is computed from all the
// rows of its payment (its payment intent; Paddle's transaction, Polar's
// order) whenever one is added, never accumulated, so that the same rows
// give the same amount whatever order they arrived in:
//
//   - a figure (Refund): what the event said had been refunded in all of
//     one charge: Stripe's charge.refunded carries the charge's cumulative
//     amount_refunded, which counts every refund not failed or cancelled
//     and drops again when one fails; Polar's order.refunded its order's.
//     Of a charge's figures the newest event's counts (Stripe's signed
//     created; of one second, the larger); a figure without a time
//     (Polar's) is the largest.
//   - a refund object (RefundObject): what the event said of one refund,
//     Stripe's re_… (refund.created, .updated, .failed,
//     charge.refund.updated) or Paddle's adj_… (adjustment.created,
//     .updated): its amount, its status and that status's Effect. Its
//     state is its newest event's, except that a void state (failed,
//     canceled, rejected, reversed) is final.
//
// A charge has refunded its figure, less the refunds the figure counted
// that are known to be void now, plus the refunds it could not count
// because they were made after it, as long as they stand:
//
//	figure − Σ amount of the refunds made no later than the figure
//	         and not void by then (what the figure counted)
//	       + Σ amount of the refunds that count now
//
// (the first part never below nothing): the function refunded_cents of
// migration 000014, which every order insert and refund write calls. So a
// failed refund takes back what
// its charge.refunded added, whether the failure arrives before or after
// it or the charge's later figure already left it out; a charge known only
// by its figures is its newest figure, as before; a payment known only by
// refund objects (Paddle's adjustments, or Stripe's refund events without
// charge.refunded) is the sum of those that count. The order is
// partially_refunded while the total is below amount_cents, refunded once
// it reaches it, paid once it falls back to nothing; only an order whose
// payment stands (paid, partially_refunded, refunded) is moved.

// Effect is what a refund object's status does to what its payment has
// had refunded.
type Effect string

const (
	// Counts: the refund stands (Stripe's pending, requires_action and
	// succeeded, which its charge's amount_refunded counts; Paddle's
	// approved).
	Counts Effect = "counts"
	// Awaits: not yet, but it may still count (Paddle's pending_approval).
	Awaits Effect = "awaits"
	// Void: it never will (Stripe's failed and canceled, Paddle's rejected
	// and reversed); final, whatever arrives later.
	Void Effect = "void"
)

// Refund is a figure seen for a payment intent (Stripe), order (Polar) or
// transaction: the amount refunded of one charge in all, as one event
// tells it.
type Refund struct {
	ProviderEventID string
	PaymentIntentID string // or Polar's order id
	ChargeID        string // the charge (ch_…), or the order the figure is of
	// AmountRefunded is the charge's cumulative amount refunded as the
	// event tells it (Stripe's amount_refunded).
	AmountRefunded int64
	Currency       string
	// At is when the event happened: of a charge's figures, the newest
	// counts. Zero: the figure is not ordered by time, and the largest of
	// the charge's counts (Polar's, whose refunds never fail).
	At time.Time
}

// RefundObject is one refund (Stripe's re_…, Paddle's adjustment adj_…) in
// the state one event tells of it.
type RefundObject struct {
	ProviderEventID string
	PaymentIntentID string // or Paddle's transaction id
	// ChargeID is the charge the refund is of (Stripe's ch_…), whose
	// figures (Refund) count it too; Paddle's adjustments have none: the
	// adjustment's own id.
	ChargeID      string
	RefundID      string
	Amount        int64
	Currency      string
	Status        string // the provider's word: succeeded, failed, approved, reversed, …
	Effect        Effect
	FailureReason string
	// CreatedAt is when the refund was made (Stripe's created): a figure
	// of its charge no older counts it. Zero: the event's time.
	CreatedAt time.Time
	// At is when the event happened: the refund's state is its newest
	// event's (a void one is final).
	At time.Time
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// refundedSQL is the amount refunded of the payment whose id is the
// expression pi, added up as the comment at the top of this file says, by
// the function refunded_cents of migration 000014 (one definition, which
// operators can call too): 0 when nothing is recorded, or pi is NULL.
func refundedSQL(pi string) string {
	return `coalesce(refunded_cents(` + pi + `), 0)`
}

// statusSQL is the status of an order whose payment stands, by the amount
// refunded of it (the expression total) and its amount.
func statusSQL(total, amount string) string {
	return `CASE WHEN ` + total + ` > 0 AND ` + total + ` >= ` + amount + ` THEN 'refunded'
            WHEN ` + total + ` > 0 THEN 'partially_refunded' ELSE 'paid' END`
}

// refreshSQL gives the orders of the payment intent $1 whose payment stands
// what their refunds now add up to, and the status that goes with it, when
// either changed: up for a new refund, down for one that failed.
var refreshSQL = `
UPDATE orders o
SET amount_refunded_cents = t.total, status = t.status, updated_at = now(),
    sold_at = coalesce(o.sold_at, CASE WHEN t.status IN ('paid', 'partially_refunded') THEN now() END)
FROM orders x,
     LATERAL (SELECT ` + refundedSQL("$1") + ` AS total) AS r,
     LATERAL (SELECT r.total, ` + statusSQL("r.total", "x.amount_cents") + ` AS status) AS t
WHERE receiver_claimed() AND o.id = x.id AND x.payment_intent_id = $1 AND x.status IN ('paid', 'partially_refunded', 'refunded')
  AND (o.amount_refunded_cents <> t.total OR o.status <> t.status)`

// ApplyRefund records the figure, once per event, and gives the orders of
// its payment intent what their refunds now add up to.
func ApplyRefund(q Queue, r Refund) {
	lock(q, "payment_intent:"+r.PaymentIntentID)
	q.Exec(`
INSERT INTO refunds (provider_event_id, payment_intent_id, charge_id, amount_refunded, currency, event_at)
SELECT $1, $2, $3, $4, $5, $6 WHERE receiver_claimed() ON CONFLICT DO NOTHING`,
		r.ProviderEventID, r.PaymentIntentID, r.ChargeID, r.AmountRefunded, r.Currency, nullTime(r.At))
	q.Exec(refreshSQL, r.PaymentIntentID)
}

// ApplyRefundObject records what the event says of one refund, once per
// event, and gives the orders of its payment intent what their refunds now
// add up to: a refund that became void takes back what it had added.
func ApplyRefundObject(q Queue, r RefundObject) {
	lock(q, "payment_intent:"+r.PaymentIntentID)
	q.Exec(`
INSERT INTO refunds (provider_event_id, payment_intent_id, charge_id, amount_refunded, currency,
                     refund_id, status, effect, failure_reason, refund_created_at, event_at)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9, ''), $10::timestamptz, $11
WHERE receiver_claimed() ON CONFLICT DO NOTHING`,
		r.ProviderEventID, r.PaymentIntentID, r.ChargeID, r.Amount, r.Currency,
		r.RefundID, r.Status, string(r.Effect), r.FailureReason, nullTime(r.CreatedAt), r.At)
	q.Exec(refreshSQL, r.PaymentIntentID)
}

// paymentOrder puts the order of the refund row r's payment, when there is
// one, in a step's payload as "order".
const paymentOrder = `(SELECT jsonb_build_object('order', ` + orderJSON + `) FROM orders o
        WHERE o.payment_intent_id = r.payment_intent_id ORDER BY o.id LIMIT 1)`

// RefundRecorded is a step condition: it holds when this transaction
// recorded the event's figure, no other event had recorded the same figure
// of the same charge since a refund of it last became void, and no refund
// the figure counts is known to be void since: one refund email per
// refund, none for another event that carries a figure already known, one
// again for a refund that brings the figure back to where a failed one had
// taken it, and none that would tell the customer of a total part of which
// has failed already (a charge.refunded delivered after its refund's
// failure). It puts the payment's order, when there is one, in the step's
// payload as "order".
func RefundRecorded(providerEventID string) (string, []any) {
	return `SELECT ` + paymentOrder + `
FROM refunds r
WHERE r.provider_event_id = $1 AND r.refund_id IS NULL AND r.` + mine + `
  AND NOT EXISTS (SELECT 1 FROM refunds x WHERE x.payment_intent_id = r.payment_intent_id
      AND x.charge_id = r.charge_id AND x.amount_refunded = r.amount_refunded AND x.provider_event_id <> r.provider_event_id
      AND x.refund_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM refunds v WHERE v.payment_intent_id = r.payment_intent_id AND v.charge_id = r.charge_id
          AND v.effect = 'void' AND v.event_at > least(x.event_at, r.event_at) AND v.event_at <= greatest(x.event_at, r.event_at)))
  AND NOT EXISTS (SELECT 1 FROM refunds v WHERE v.payment_intent_id = r.payment_intent_id AND v.charge_id = r.charge_id
      AND v.effect = 'void' AND v.event_at > r.event_at AND coalesce(v.refund_created_at, v.event_at) <= r.event_at)`,
		[]any{providerEventID}
}

// RestoredSale is a step condition: it holds when this transaction made an
// order of the payment intent stand as a sale (paid or partially_refunded)
// for the first time: an order that started refunded in full, because its
// refund arrived before it, whose refund then failed or was reversed. It
// was never confirmed nor fulfilled: its paid steps are the event's that
// restored it. It puts the order in the step's payload as "order".
func RestoredSale(paymentIntentID string) (string, []any) {
	return `SELECT jsonb_build_object('order', ` + orderJSON + `) FROM orders o
WHERE o.payment_intent_id = $1 AND o.status = ANY ($2) AND o.sold_at = now() AND o.` + mine,
		[]any{paymentIntentID, Sold}
}

// RefundCounted is a step condition: it holds when this transaction
// recorded the event's refund object as counting and no other event had
// recorded it counting or void: one refund email per refund, when it
// first stands, none for a refund already void (reversed before its
// approval arrived). It puts the payment's order, when there is one, in
// the step's payload as "order".
func RefundCounted(providerEventID string) (string, []any) {
	return `SELECT ` + paymentOrder + `
FROM refunds r
WHERE r.provider_event_id = $1 AND r.effect = 'counts' AND r.` + mine + `
  AND NOT EXISTS (SELECT 1 FROM refunds x WHERE x.payment_intent_id = r.payment_intent_id
      AND x.refund_id = r.refund_id AND x.provider_event_id <> r.provider_event_id AND x.effect IN ('counts', 'void'))`,
		[]any{providerEventID}
}
