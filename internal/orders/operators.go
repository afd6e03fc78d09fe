package orders

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/ops"
)

// Owner is the orders' account to operators (ops.Owner): the orders an
// event created, or whose business key or payment its body names, and the
// events an order's key, payment or customer's email finds.
type Owner struct{}

// Row is an order as operators see it. Wrote says that the event created
// it or that its transaction was the last to change it.
type Row struct {
	ID              int64     `json:"id"`
	Source          string    `json:"source"`
	ProviderEventID string    `json:"provider_event_id"`
	ExternalID      string    `json:"external_id"`
	PaymentIntentID string    `json:"payment_intent_id,omitempty"`
	Status          Status    `json:"status"`
	AmountCents     int64     `json:"amount_cents"`
	Currency        string    `json:"currency"`
	CustomerEmail   string    `json:"customer_email,omitempty"`
	Tier            string    `json:"plan,omitempty"`
	AmountRefunded  int64     `json:"amount_refunded_cents"`
	AccountID       string    `json:"account_id,omitempty"` // the Stripe connected account
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	Wrote           bool      `json:"wrote"`
}

// relatedSQL reads the orders event $1 (its key and id) created, and
// those of its provider's order sources ($2) whose business key, or whose
// payment intent, is among the ids of its body ($3); $4 is its claim's
// time.
const relatedSQL = `
SELECT id, source, provider_event_id, external_id, coalesce(payment_intent_id, ''), status, amount_cents,
       currency, coalesce(customer_email, ''), coalesce(plan, ''), amount_refunded_cents, coalesce(account_id, ''),
       created_at, updated_at,
       provider_event_id = ANY($1) OR created_at = $4 OR updated_at = $4
FROM orders
WHERE provider_event_id = ANY($1) OR (source = ANY($2) AND external_id = ANY($3)) OR payment_intent_id = ANY($3)
ORDER BY id LIMIT 50`

// Name is the key of orders in an event's records.
func (Owner) Name() string { return "orders" }

// Related looks up the orders e concerns.
func (Owner) Related(e ops.Concern) ops.Lookup {
	return ops.Lookup{SQL: relatedSQL, Args: []any{e.EventIDs, e.Spec.OrderSources, e.IDs, e.ReceivedAt},
		Row: func(row pgx.CollectableRow) (ops.Row, error) {
			var o Row
			err := row.Scan(&o.ID, &o.Source, &o.ProviderEventID, &o.ExternalID, &o.PaymentIntentID, &o.Status,
				&o.AmountCents, &o.Currency, &o.CustomerEmail, &o.Tier, &o.AmountRefunded, &o.AccountID, &o.CreatedAt,
				&o.UpdatedAt, &o.Wrote)
			return o, err
		}}
}

// Search finds the orders whose business key (of one of the providers'
// order sources), payment intent or customer's email is the text, and
// through them the event that created each and the events whose
// transaction changed it since: an order's created_at and updated_at are
// its writer's now(), which is also the claimed_at of the event that
// transaction claimed, of the provider whose order source it is.
func (Owner) Search(t *ops.Term) ops.Search {
	var orderSources, ofProvider []string
	for _, s := range t.Specs() {
		for _, src := range s.OrderSources {
			orderSources = append(orderSources, src)
			ofProvider = append(ofProvider, s.Source)
		}
	}
	q := t.Text()
	osrc := t.Arg(orderSources) + "::text[]"
	ps := t.Arg(ofProvider) + "::text[]"
	return ops.Search{
		With: []string{`orders_found AS MATERIALIZED (
        SELECT o.source, o.provider_event_id, o.created_at, o.updated_at FROM orders o
        WHERE (o.source = ANY(` + osrc + `) AND o.external_id = ` + q + `)
           OR o.payment_intent_id = ` + q + ` OR lower(o.customer_email) = lower(` + q + `)
        LIMIT ` + t.Limit() + `)`},
		IDs: []string{`SELECT provider_event_id FROM orders_found`},
		Keys: []string{`SELECT e.event_key FROM orders_found o
    JOIN unnest(` + osrc + `, ` + ps + `) AS m(order_source, source) ON m.order_source = o.source
    JOIN processed_events e ON e.kind = 'event' AND e.source = m.source
        AND e.claimed_at IN (o.created_at, o.updated_at)`},
	}
}

// Line is the order in the operators' tables.
func (o Row) Line() ops.Line {
	l := ops.Line{Kind: "order #" + strconv.FormatInt(o.ID, 10), Source: o.Source, ID: o.ExternalID, Status: string(o.Status),
		Amount: ops.Money(o.AmountCents, o.Currency), Customer: o.CustomerEmail, Updated: o.UpdatedAt, Wrote: o.Wrote}
	l.Notes = ops.Notes(
		ops.Note{Label: "payment", Text: o.PaymentIntentID},
		ops.Note{Label: "plan", Text: o.Tier},
		ops.Note{Label: "account", Text: o.AccountID})
	if o.AmountRefunded > 0 {
		l.Refunded = ops.Money(o.AmountRefunded, o.Currency)
	}
	return l
}

// RefundsOwner is the refunds' account to operators (ops.Owner): the
// refunds an event recorded, and the events a payment's refunds name.
type RefundsOwner struct{}

// RefundRow is a refund recorded by the event.
type RefundRow struct {
	PaymentIntentID string `json:"payment_intent_id"`
	ChargeID        string `json:"charge_id"`
	AmountRefunded  int64  `json:"amount_refunded"`
	Currency        string `json:"currency"`
}

const relatedRefundsSQL = `
SELECT payment_intent_id, charge_id, amount_refunded, currency FROM refunds WHERE provider_event_id = ANY($1)`

// Name is the key of refunds in an event's records.
func (RefundsOwner) Name() string { return "refunds" }

// Related looks up the refunds e recorded.
func (RefundsOwner) Related(e ops.Concern) ops.Lookup {
	return ops.Lookup{SQL: relatedRefundsSQL, Args: []any{e.EventIDs},
		Row: func(row pgx.CollectableRow) (ops.Row, error) {
			var f RefundRow
			err := row.Scan(&f.PaymentIntentID, &f.ChargeID, &f.AmountRefunded, &f.Currency)
			return f, err
		}}
}

// Search finds the events that recorded a refund of the payment the text
// names.
func (RefundsOwner) Search(t *ops.Term) ops.Search {
	return ops.Search{IDs: []string{`SELECT provider_event_id FROM refunds WHERE payment_intent_id = ` + t.Text() +
		` LIMIT ` + t.Limit()}}
}

// Line is the refund in the operators' tables: its event wrote it.
func (f RefundRow) Line() ops.Line {
	return ops.Line{Kind: "refund", ID: f.ChargeID, Status: "recorded", Amount: ops.Money(f.AmountRefunded, f.Currency),
		Notes: ops.Notes(ops.Note{Label: "payment", Text: f.PaymentIntentID}), Wrote: true}
}
