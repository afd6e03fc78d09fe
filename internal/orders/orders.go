// Package orders holds orders and their state machine, and the SQL that
// writes them. Every write here is safe to run twice: an order is unique by
// the event that created it (uq_orders_event) and by its business key per
// source (uq_orders_external), every state change is a conditional update
// from the state it leaves, and, where events carry a position (GitHub
// Marketplace's effective_date), an older event changes nothing.
//
// Refunds are kept by amount, and what an order has had refunded
// (amount_refunded_cents) is derived, never accumulated: every event that
// tells of a refund adds a row to the refunds table, and the order's amount
// is recomputed from all of them (see refunds.go). So refund events
// converge in any arrival order, a copy adds nothing, a refund that fails
// or is cancelled (a Paddle adjustment reversed) takes back what it had
// added, and an order created after its refunds starts with them. An order
// is partially_refunded while that amount is below amount_cents, refunded
// once it reaches it, and paid again when it falls back to nothing: a 1.00
// refund of a 100.00 order leaves it partially_refunded with 100 cents
// refunded.
//
// A dispute lost on an order's payment marks it (dispute_lost), whatever
// its status, and a dispute won clears the mark (see disputes.go); the
// disputes themselves are internal/disputes'.
//
// Writes are queued on the event's transaction (a webhooks.Plan): they are
// sent with the event's claim in one round trip, so nothing here reads a
// result, and each is conditional on receiver_claimed() (a copy of the
// event skips it). What a provider must know of a write's effect, to plan a step,
// it asks in SQL with the conditions below (Changed, RefundRecorded,
// RefundCounted), which look at the rows this very transaction wrote.
package orders

import (
	"strings"
	"time"
)

// Status is an order's state, as orders.status keeps it and its JSON
// carries it.
type Status string

// Statuses of an order.
const (
	StatusPendingPayment Status = "pending_payment"
	StatusPaid           Status = "paid"
	StatusPaymentFailed  Status = "payment_failed"
	// StatusPartiallyRefunded: paid, and refunded less than amount_cents.
	StatusPartiallyRefunded Status = "partially_refunded"
	// StatusRefunded: refunds have reached amount_cents.
	StatusRefunded  Status = "refunded"
	StatusCancelled Status = "cancelled"
)

// texts are statuses as the text[] of a query's argument.
func texts(statuses []Status) []string {
	out := make([]string, len(statuses))
	for i, s := range statuses {
		out[i] = string(s)
	}
	return out
}

// Sold are the statuses of an order whose payment stands, in part at
// least: what a refund may move, and what the paid steps (confirmation,
// fulfillment) of an order whose partial refund arrived first go by. An
// order records when it first stood so (sold_at): its paid steps are
// planned then, once, by the event that made it so (RestoredSale).
var Sold = []Status{StatusPaid, StatusPartiallyRefunded}

// Queue is where writes go: the event's transaction (*webhooks.Plan).
type Queue interface {
	Exec(sql string, args ...any)
}

// Order is one purchase, whatever its source. Its JSON form is the one
// conditions put in a step's payload ("order"), which the email and
// fulfillment steps read.
type Order struct {
	ID              int64  `json:"id"`
	Source          string `json:"source"`            // one of the providers' Spec.OrderSources
	ProviderEventID string `json:"provider_event_id"` // the event that created the order
	ExternalID      string `json:"external_id"`       // Checkout Session id, marketplace account, sponsorship node id, transaction id
	PaymentIntentID string `json:"payment_intent_id,omitempty"`
	Status          Status `json:"status"`
	AmountCents     int64  `json:"amount_cents"`
	Currency        string `json:"currency"`
	CustomerEmail   string `json:"customer_email,omitempty"`
	// Tier is what was bought at the provider (GitHub Marketplace:
	// "<plan id>:<plan name>"), orders.plan.
	Tier string `json:"plan,omitempty"`
	// AccountID is the Stripe connected account (acct_…) whose event made
	// the order; "" for the platform's own.
	AccountID string `json:"account_id,omitempty"`
	// Livemode is the mode of the event that made the order (Stripe's
	// livemode); nil where the provider does not say (GitHub, Paddle,
	// Polar), and in the payload of a step planned before the receiver
	// recorded it.
	Livemode *bool `json:"livemode,omitempty"`
	// AmountRefundedCents is what has been refunded of AmountCents: read
	// back from the database, never set by an event.
	AmountRefundedCents int64 `json:"amount_refunded_cents,omitempty"`
	// CustomerKey is the customer's provider-keyed subject (stripe:cus_…),
	// AppUserID the app's user id the event carried (a claim) and Items
	// what the order is for (JSON; nil: not known, such as a Checkout
	// Session's before its line items are read): see internal/entitlements.
	// Written with the order; not in a step's payload.
	CustomerKey string `json:"-"`
	AppUserID   string `json:"-"`
	Items       []byte `json:"-"`
}

// Position places an event in the life of an order: its time, then its
// rank among events of the same time (purchased < changed < cancelled).
// An event whose position is older than the last one applied to the order
// changes nothing. The zero Position has no place and is always applied.
type Position struct {
	At   time.Time
	Rank int
}

func (p Position) args() (any, any) {
	if p.At.IsZero() {
		return nil, nil
	}
	return p.At, p.Rank
}

// notOlder is the forward-only condition of a conditional write, on the
// order aliased orders, with the position's placeholders.
func notOlder(at, rank string) string {
	return `(` + at + `::timestamptz IS NULL OR orders.effective_at IS NULL
      OR (orders.effective_at, orders.effective_rank) <= (` + at + `::timestamptz, ` + rank + `::smallint))`
}

// lockSQL serialises, until the transaction ends, the writers of one order
// (its business key) and of the refunds of one payment intent. Under READ
// COMMITTED two transactions could otherwise each miss the other's
// uncommitted row: a refund that finds no order yet while that order is
// being inserted paid, or two copies of one purchase that both insert. The
// locks are taken in key order, so writers never deadlock on them.
const lockSQL = `
SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k WHERE receiver_claimed() ORDER BY k`

func lock(q Queue, keys ...string) {
	ks := make([]string, 0, len(keys))
	for _, k := range keys {
		if !strings.HasSuffix(k, ":") {
			ks = append(ks, k)
		}
	}
	q.Exec(lockSQL, ks)
}

func (o Order) lockKeys() []string {
	return []string{"order:" + o.Source + ":" + o.ExternalID, "payment_intent:" + o.PaymentIntentID}
}

// insertSQL inserts an order from the arguments of orderArgs, unless the
// event already made one (a copy of the event, another hook's, a replay
// past emptied claims). An order paid for a payment intent that was
// already refunded starts with its refunds, partially_refunded or
// refunded, and one whose dispute was already lost starts marked: the
// refund or dispute event may arrive before the order's own event.
var insertSQL = `
INSERT INTO orders (source, provider_event_id, external_id, payment_intent_id, status,
                    amount_cents, currency, customer_email, plan, effective_at, effective_rank,
                    account_id, livemode, amount_refunded_cents, dispute_lost, sold_at,
                    customer_key, app_user_id, items)
SELECT $1, $2, $3, NULLIF($4, ''), s.status,
       $6::bigint, $7, NULLIF($8, ''), NULLIF($9, ''), $10::timestamptz, $11::smallint, NULLIF($12, ''), $13::boolean,
       CASE WHEN $5 = 'paid' THEN r.total ELSE 0 END,
       ` + disputeLostSQL("$1", "NULLIF($4, '')") + `,
       CASE WHEN s.status IN ('paid', 'partially_refunded') THEN now() END,
       NULLIF($14, ''), NULLIF($15, ''), $16::jsonb
FROM (SELECT ` + refundedSQL("NULLIF($4, '')") + ` AS total) AS r,
     LATERAL (SELECT CASE WHEN $5 = 'paid' THEN ` + statusSQL("r.total", "$6::bigint") + ` ELSE $5 END AS status) AS s
WHERE receiver_claimed() AND NOT EXISTS (SELECT 1 FROM orders WHERE provider_event_id = $2)
`

func orderArgs(o Order, pos Position) []any {
	at, rank := pos.args()
	var items any
	if o.Items != nil {
		items = string(o.Items)
	}
	return []any{o.Source, o.ProviderEventID, o.ExternalID, o.PaymentIntentID, string(o.Status),
		o.AmountCents, o.Currency, o.CustomerEmail, o.Tier, at, rank, o.AccountID, o.Livemode,
		o.CustomerKey, o.AppUserID, items}
}

// Create inserts o, with pos as its last event, unless an order already
// exists for its event or its business key. It is also what an event that
// ends an order (a cancellation) leaves when the order's own events have
// not arrived, so that they, older, change nothing when they do.
func Create(q Queue, o Order, pos Position) {
	lock(q, o.lockKeys()...)
	q.Exec(insertSQL+`ON CONFLICT DO NOTHING`, orderArgs(o, pos)...)
}

// Upsert moves the order with o's business key from one of the states in
// from to o.Status, taking o's amount, currency and tier, or creates it in
// o.Status when it does not exist yet (an event that arrives before the one
// that normally creates the order, or a purchase after a cancellation).
// With a position, an order whose last event is newer is left alone.
func Upsert(q Queue, o Order, pos Position, from ...Status) {
	sql := insertSQL + `
ON CONFLICT (source, external_id) DO UPDATE
    SET status = EXCLUDED.status,
        amount_refunded_cents = greatest(orders.amount_refunded_cents, EXCLUDED.amount_refunded_cents),
        account_id = coalesce(orders.account_id, EXCLUDED.account_id),
        livemode = coalesce(orders.livemode, EXCLUDED.livemode),
        sold_at = coalesce(orders.sold_at, EXCLUDED.sold_at),
        amount_cents = EXCLUDED.amount_cents,
        currency = EXCLUDED.currency,
        plan = coalesce(EXCLUDED.plan, orders.plan),
        payment_intent_id = coalesce(orders.payment_intent_id, EXCLUDED.payment_intent_id),
        customer_email = coalesce(orders.customer_email, EXCLUDED.customer_email),
        effective_at = coalesce(EXCLUDED.effective_at, orders.effective_at),
        effective_rank = coalesce(EXCLUDED.effective_rank, orders.effective_rank),
        customer_key = coalesce(orders.customer_key, EXCLUDED.customer_key),
        app_user_id = coalesce(EXCLUDED.app_user_id, orders.app_user_id),
        items = coalesce(orders.items, EXCLUDED.items),
        updated_at = now()
    WHERE orders.status = ANY ($17) AND `
	lock(q, o.lockKeys()...)
	q.Exec(sql+notOlder("$10", "$11"), append(orderArgs(o, pos), texts(from))...)
}

// Transition moves the order with the business key from state from to
// state to, unless its last event is newer than pos. An order in any other
// state, or none, is left alone.
func Transition(q Queue, source, externalID string, from, to Status, pos Position) {
	at, rank := pos.args()
	q.Exec(`
UPDATE orders SET status = $4, updated_at = now(),
       effective_at = coalesce($5::timestamptz, effective_at), effective_rank = coalesce($6::smallint, effective_rank)
WHERE receiver_claimed() AND source = $1 AND external_id = $2 AND status = $3 AND `+notOlder("$5", "$6"),
		source, externalID, string(from), string(to), at, rank)
}

// SetTier gives the order with the business key a new tier (orders.plan)
// and price, unless it is cancelled or its last event is newer than pos.
func SetTier(q Queue, source, externalID, tier string, amountCents int64, pos Position) {
	at, rank := pos.args()
	q.Exec(`
UPDATE orders SET plan = $3, amount_cents = $4, updated_at = now(),
       effective_at = coalesce($5::timestamptz, effective_at), effective_rank = coalesce($6::smallint, effective_rank)
WHERE receiver_claimed() AND source = $1 AND external_id = $2 AND status <> 'cancelled'
  AND (plan IS DISTINCT FROM $3 OR amount_cents <> $4) AND `+notOlder("$5", "$6"),
		source, externalID, tier, amountCents, at, rank)
}

// mine is true of a row this transaction wrote (inserted or updated).
const mine = `xmin = pg_current_xact_id()::xid`

// orderJSON is an order's row as the JSON of Order.
const orderJSON = `jsonb_build_object('id', o.id, 'source', o.source, 'provider_event_id', o.provider_event_id,
    'external_id', o.external_id, 'payment_intent_id', coalesce(o.payment_intent_id, ''), 'status', o.status,
    'amount_cents', o.amount_cents, 'currency', o.currency, 'customer_email', coalesce(o.customer_email, ''),
    'plan', coalesce(o.plan, ''), 'account_id', coalesce(o.account_id, ''), 'livemode', o.livemode,
    'amount_refunded_cents', o.amount_refunded_cents)`

// Changed is a step condition (webhooks.Plan.StepIf): it holds when this
// transaction wrote the order with the business key and left it in one of
// statuses, and puts the order, as written, in the step's payload as
// "order".
func Changed(source, externalID string, statuses ...Status) (string, []any) {
	return `SELECT jsonb_build_object('order', ` + orderJSON + `) FROM orders o
WHERE o.source = $1 AND o.external_id = $2 AND o.status = ANY ($3) AND o.` + mine,
		[]any{source, externalID, texts(statuses)}
}
