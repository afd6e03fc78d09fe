// Package orders holds orders and their state machine, and the SQL that
// writes them. Every write here is safe to run twice: an order is unique by
// the event that created it (uq_orders_event) and by its business key per
// source (uq_orders_external), and every state change is a conditional
// update from the state it leaves.
//
// The functions take a Querier so that the webhook processor can run them
// inside the same transaction as the event's claim.
package orders

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statuses of an order.
const (
	StatusPendingPayment = "pending_payment"
	StatusPaid           = "paid"
	StatusPaymentFailed  = "payment_failed"
	StatusRefunded       = "refunded"
	StatusCancelled      = "cancelled"
)

// ErrNotFound is returned when no order matches.
var ErrNotFound = errors.New("order not found")

// Querier is what the functions here need of a connection or transaction;
// pgx.Tx and *pgxpool.Pool satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Order is one purchase, whatever its source.
type Order struct {
	ID              int64
	Source          string // "stripe", "github_marketplace", "github_sponsors"
	ProviderEventID string // the event that created the order
	ExternalID      string // Checkout Session id, marketplace account, sponsorship node id
	PaymentIntentID string
	Status          string
	AmountCents     int64
	Currency        string
	CustomerEmail   string
	Plan            string
}

const orderColumns = `id, source, provider_event_id, external_id, coalesce(payment_intent_id, ''),
	status, amount_cents, currency, coalesce(customer_email, ''), coalesce(plan, '')`

func scanOrder(row pgx.Row) (Order, error) {
	var o Order
	err := row.Scan(&o.ID, &o.Source, &o.ProviderEventID, &o.ExternalID, &o.PaymentIntentID,
		&o.Status, &o.AmountCents, &o.Currency, &o.CustomerEmail, &o.Plan)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, ErrNotFound
	}
	return o, err
}

// insertSQL inserts an order from the arguments of orderArgs. An order paid
// for a payment intent that was already refunded starts refunded: the refund
// event may arrive before the order's own event.
const insertSQL = `
INSERT INTO orders (source, provider_event_id, external_id, payment_intent_id, status,
                    amount_cents, currency, customer_email, plan)
VALUES ($1, $2, $3, NULLIF($4, ''),
        CASE WHEN $5 = 'paid' AND $4 <> ''
                  AND EXISTS (SELECT 1 FROM refunds WHERE payment_intent_id = $4)
             THEN 'refunded' ELSE $5 END,
        $6, $7, NULLIF($8, ''), NULLIF($9, ''))
`

func orderArgs(o Order) []any {
	return []any{o.Source, o.ProviderEventID, o.ExternalID, o.PaymentIntentID, o.Status,
		o.AmountCents, o.Currency, o.CustomerEmail, o.Plan}
}

// lockKeys serialises, until the transaction ends, the writers of one order
// (its business key) and of the refunds of one payment intent. Under READ
// COMMITTED two transactions could otherwise each miss the other's
// uncommitted row: a refund that finds no order yet while that order is
// being inserted paid, or two copies of one purchase that both insert. The
// locks are taken in key order, so writers never deadlock on them.
func lockKeys(ctx context.Context, q Querier, keys ...string) error {
	var ks []string
	for _, k := range keys {
		if !strings.HasSuffix(k, ":") {
			ks = append(ks, k)
		}
	}
	_, err := q.Exec(ctx, `
SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k ORDER BY k`, ks)
	if err != nil {
		return fmt.Errorf("lock %v: %w", ks, err)
	}
	return nil
}

func (o Order) lockKeys() []string {
	return []string{"order:" + o.Source + ":" + o.ExternalID, "payment_intent:" + o.PaymentIntentID}
}

// Create inserts o unless an order already exists for its event or its
// business key. It reports whether this call created it, and returns the
// order as stored either way.
func Create(ctx context.Context, q Querier, o Order) (Order, bool, error) {
	if err := lockKeys(ctx, q, o.lockKeys()...); err != nil {
		return Order{}, false, err
	}
	created, err := scanOrder(q.QueryRow(ctx, insertSQL+`ON CONFLICT DO NOTHING RETURNING `+orderColumns,
		orderArgs(o)...))
	if err == nil {
		return created, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Order{}, false, fmt.Errorf("insert order %s: %w", o.ExternalID, err)
	}
	existing, err := ByExternalID(ctx, q, o.Source, o.ExternalID)
	if errors.Is(err, ErrNotFound) {
		// The conflict was on uq_orders_event: this event made another order.
		existing, err = ByEvent(ctx, q, o.ProviderEventID)
	}
	return existing, false, err
}

// Upsert moves the order with o's business key from one of the states in
// from to o.Status, taking o's amount, currency and plan, or creates it in
// o.Status when it does not exist yet (an event that arrives before the one
// that normally creates the order, or a purchase after a cancellation).
// It reports whether this call changed anything.
func Upsert(ctx context.Context, q Querier, o Order, from ...string) (Order, bool, error) {
	const sql = insertSQL + `
ON CONFLICT (source, external_id) DO UPDATE
    SET status = EXCLUDED.status,
        amount_cents = EXCLUDED.amount_cents,
        currency = EXCLUDED.currency,
        plan = coalesce(EXCLUDED.plan, orders.plan),
        payment_intent_id = coalesce(orders.payment_intent_id, EXCLUDED.payment_intent_id),
        customer_email = coalesce(orders.customer_email, EXCLUDED.customer_email),
        updated_at = now()
    WHERE orders.status = ANY ($10)
RETURNING ` + orderColumns
	if err := lockKeys(ctx, q, o.lockKeys()...); err != nil {
		return Order{}, false, err
	}
	changed, err := scanOrder(q.QueryRow(ctx, sql, append(orderArgs(o), from)...))
	if err == nil {
		return changed, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Order{}, false, fmt.Errorf("upsert order %s: %w", o.ExternalID, err)
	}
	existing, err := ByExternalID(ctx, q, o.Source, o.ExternalID)
	return existing, false, err
}

// Transition moves the order with the business key from state from to
// state to. It reports whether the order was in state from; an order in any
// other state, or none, is left alone.
func Transition(ctx context.Context, q Querier, source, externalID, from, to string) (Order, bool, error) {
	const sql = `
UPDATE orders SET status = $4, updated_at = now()
WHERE source = $1 AND external_id = $2 AND status = $3
RETURNING ` + orderColumns
	o, err := scanOrder(q.QueryRow(ctx, sql, source, externalID, from, to))
	if errors.Is(err, ErrNotFound) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("order %s %s -> %s: %w", externalID, from, to, err)
	}
	return o, true, nil
}

// SetPlan gives the order with the business key a new plan and price,
// unless it is cancelled. It reports whether an order changed.
func SetPlan(ctx context.Context, q Querier, source, externalID, plan string, amountCents int64) (Order, bool, error) {
	const sql = `
UPDATE orders SET plan = $3, amount_cents = $4, updated_at = now()
WHERE source = $1 AND external_id = $2 AND status <> 'cancelled'
  AND (plan IS DISTINCT FROM $3 OR amount_cents <> $4)
RETURNING ` + orderColumns
	o, err := scanOrder(q.QueryRow(ctx, sql, source, externalID, plan, amountCents))
	if errors.Is(err, ErrNotFound) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("set plan of order %s: %w", externalID, err)
	}
	return o, true, nil
}

// ByExternalID returns the order with the business key, or ErrNotFound.
func ByExternalID(ctx context.Context, q Querier, source, externalID string) (Order, error) {
	return scanOrder(q.QueryRow(ctx,
		`SELECT `+orderColumns+` FROM orders WHERE source = $1 AND external_id = $2`, source, externalID))
}

// ByEvent returns the order created by the event, or ErrNotFound.
func ByEvent(ctx context.Context, q Querier, providerEventID string) (Order, error) {
	return scanOrder(q.QueryRow(ctx,
		`SELECT `+orderColumns+` FROM orders WHERE provider_event_id = $1`, providerEventID))
}

// Refund is a refund seen for a payment intent.
type Refund struct {
	ProviderEventID string
	PaymentIntentID string
	ChargeID        string
	AmountRefunded  int64
	Currency        string
}

// ApplyRefund records the refund once per event and moves the paid orders
// of its payment intent to refunded. It reports whether the refund was new
// and the orders that this call moved.
func ApplyRefund(ctx context.Context, q Querier, r Refund) (bool, []Order, error) {
	if err := lockKeys(ctx, q, "payment_intent:"+r.PaymentIntentID); err != nil {
		return false, nil, err
	}
	tag, err := q.Exec(ctx, `
INSERT INTO refunds (provider_event_id, payment_intent_id, charge_id, amount_refunded, currency)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		r.ProviderEventID, r.PaymentIntentID, r.ChargeID, r.AmountRefunded, r.Currency)
	if err != nil {
		return false, nil, fmt.Errorf("record refund %s: %w", r.ChargeID, err)
	}
	rows, err := q.Query(ctx, `
UPDATE orders SET status = 'refunded', updated_at = now()
WHERE payment_intent_id = $1 AND status = 'paid'
RETURNING `+orderColumns, r.PaymentIntentID)
	if err != nil {
		return false, nil, fmt.Errorf("refund orders of %s: %w", r.PaymentIntentID, err)
	}
	moved, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Order, error) { return scanOrder(row) })
	if err != nil {
		return false, nil, fmt.Errorf("refund orders of %s: %w", r.PaymentIntentID, err)
	}
	return tag.RowsAffected() == 1, moved, nil
}
