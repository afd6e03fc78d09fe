package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Records are the business rows an event concerns: the orders, invoices,
// refunds, subscriptions and disputes whose ids its body carries or that
// name it as their event.
type Records struct {
	Orders        []OrderRow        `json:"orders"`
	Invoices      []InvoiceRow      `json:"invoices"`
	Refunds       []RefundRow       `json:"refunds"`
	Subscriptions []SubscriptionRow `json:"subscriptions"`
	Disputes      []DisputeRow      `json:"disputes"`
}

// Empty reports whether there are no records at all.
func (r Records) Empty() bool {
	return len(r.Orders)+len(r.Invoices)+len(r.Refunds)+len(r.Subscriptions)+len(r.Disputes) == 0
}

// OrderRow is an order as operators see it. Wrote says that the event
// created it or that its transaction was the last to change it.
type OrderRow struct {
	ID              int64     `json:"id"`
	Source          string    `json:"source"`
	ProviderEventID string    `json:"provider_event_id"`
	ExternalID      string    `json:"external_id"`
	PaymentIntentID string    `json:"payment_intent_id,omitempty"`
	Status          string    `json:"status"`
	AmountCents     int64     `json:"amount_cents"`
	Currency        string    `json:"currency"`
	CustomerEmail   string    `json:"customer_email,omitempty"`
	Plan            string    `json:"plan,omitempty"`
	AmountRefunded  int64     `json:"amount_refunded_cents"`
	AccountID       string    `json:"account_id,omitempty"` // the Stripe connected account
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	Wrote           bool      `json:"wrote"`
}

// InvoiceRow is an invoice as operators see it.
type InvoiceRow struct {
	StripeInvoiceID string    `json:"stripe_invoice_id"`
	Status          string    `json:"status"`
	AmountDue       int64     `json:"amount_due"`
	AmountPaid      int64     `json:"amount_paid"`
	Currency        string    `json:"currency"`
	CustomerEmail   string    `json:"customer_email,omitempty"`
	AccountID       string    `json:"account_id,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	Wrote           bool      `json:"wrote"`
}

// SubscriptionRow is a subscription as operators see it: its state as
// the newest event applied left it (LastEventID, of EventAt).
type SubscriptionRow struct {
	Source            string     `json:"source"`
	ExternalID        string     `json:"external_id"`
	Status            string     `json:"status"`
	CustomerID        string     `json:"customer_id,omitempty"`
	CurrentPeriodEnd  *time.Time `json:"current_period_end,omitempty"`
	CancelAtPeriodEnd bool       `json:"cancel_at_period_end"`
	AccountID         string     `json:"account_id,omitempty"`
	EventAt           time.Time  `json:"event_at"`
	LastEventID       string     `json:"last_event_id"`
	UpdatedAt         time.Time  `json:"updated_at"`
	Wrote             bool       `json:"wrote"`
}

// DisputeRow is a dispute as operators see it.
type DisputeRow struct {
	Source          string     `json:"source"`
	ExternalID      string     `json:"external_id"`
	PaymentIntentID string     `json:"payment_intent_id,omitempty"`
	ChargeID        string     `json:"charge_id,omitempty"`
	AmountCents     int64      `json:"amount_cents"`
	Currency        string     `json:"currency"`
	Reason          string     `json:"reason,omitempty"`
	Status          string     `json:"status"`
	EvidenceDueBy   *time.Time `json:"evidence_due_by,omitempty"`
	AccountID       string     `json:"account_id,omitempty"`
	LastEventID     string     `json:"last_event_id"`
	UpdatedAt       time.Time  `json:"updated_at"`
	Wrote           bool       `json:"wrote"`
}

// RefundRow is a refund recorded by the event.
type RefundRow struct {
	PaymentIntentID string `json:"payment_intent_id"`
	ChargeID        string `json:"charge_id"`
	AmountRefunded  int64  `json:"amount_refunded"`
	Currency        string `json:"currency"`
}

// maxBodyIDs bounds the ids taken from a body for the look-ups.
const maxBodyIDs = 200

// BodyIDs returns the strings of a JSON body that may be ids of business
// rows (every short string without spaces, and "account:<id>" for a
// marketplace account's numeric id), at most maxBodyIDs of them, in the
// order met.
func BodyIDs(body []byte) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var ids []string
	add := func(s string) {
		if len(ids) < maxBodyIDs && len(s) >= 3 && len(s) <= 255 && !slices.Contains(ids, s) {
			ids = append(ids, s)
		}
	}
	var walk func(v any, parent string, depth int)
	walk = func(v any, parent string, depth int) {
		if depth > 8 || len(ids) >= maxBodyIDs {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "id" && parent == "account" {
					if n, ok := c.(float64); ok {
						add("account:" + strconv.FormatInt(int64(n), 10))
					}
				}
				walk(c, k, depth+1)
			}
		case []any:
			for _, c := range x {
				walk(c, parent, depth+1)
			}
		case string:
			for _, r := range x {
				if r == ' ' || r == '\n' || r == '\t' {
					return
				}
			}
			add(x)
		}
	}
	walk(v, "", 0)
	return ids
}

const (
	relatedOrdersSQL = `
SELECT id, source, provider_event_id, external_id, coalesce(payment_intent_id, ''), status, amount_cents,
       currency, coalesce(customer_email, ''), coalesce(plan, ''), amount_refunded_cents, coalesce(account_id, ''),
       created_at, updated_at,
       provider_event_id = ANY($1) OR created_at = $4 OR updated_at = $4
FROM orders
WHERE provider_event_id = ANY($1) OR (source = ANY($2) AND external_id = ANY($3)) OR payment_intent_id = ANY($3)
ORDER BY id LIMIT 50`
	relatedInvoicesSQL = `
SELECT stripe_invoice_id, status, amount_due, amount_paid, currency, coalesce(customer_email, ''),
       coalesce(account_id, ''), created_at, updated_at, created_at = $2 OR updated_at = $2
FROM invoices WHERE stripe_invoice_id = ANY($1)
ORDER BY id LIMIT 50`
	relatedRefundsSQL = `
SELECT payment_intent_id, charge_id, amount_refunded, currency FROM refunds WHERE provider_event_id = ANY($1)`
	relatedSubscriptionsSQL = `
SELECT source, external_id, status, coalesce(customer_id, ''), current_period_end, cancel_at_period_end,
       coalesce(account_id, ''), event_at, provider_event_id, updated_at, created_at = $3 OR updated_at = $3
FROM subscriptions WHERE source = $1 AND external_id = ANY($2)
ORDER BY id LIMIT 50`
	relatedDisputesSQL = `
SELECT source, external_id, coalesce(payment_intent_id, ''), coalesce(charge_id, ''), amount_cents, currency,
       coalesce(reason, ''), status, evidence_due_by, coalesce(account_id, ''), provider_event_id, updated_at,
       created_at = $3 OR updated_at = $3
FROM disputes WHERE (source = $1 AND external_id = ANY($2)) OR payment_intent_id = ANY($2)
ORDER BY id LIMIT 50`
)

// Related reads the business rows the event d concerns, in one round
// trip, each through a unique or indexed key: orders it created (by its
// id) or whose business key or payment intent its body names, invoices
// its body names, refunds it recorded, the subscriptions of its source and
// the disputes its body names (a dispute also by its payment intent);
// specs are the providers.
func Related(ctx context.Context, q webhooks.Querier, d Detail, specs []webhooks.Spec) (Records, error) {
	var sources []string
	for _, s := range specs {
		if s.Source == d.Source {
			sources = s.OrderSources
		}
	}
	eventIDs := []string{d.Key, d.EventID}
	ids := BodyIDs(d.Body)
	b := &pgx.Batch{}
	b.Queue(relatedOrdersSQL, eventIDs, sources, ids, d.ReceivedAt)
	b.Queue(relatedInvoicesSQL, ids, d.ReceivedAt)
	b.Queue(relatedRefundsSQL, eventIDs)
	b.Queue(relatedSubscriptionsSQL, d.Source, ids, d.ReceivedAt)
	b.Queue(relatedDisputesSQL, d.Source, ids, d.ReceivedAt)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	var r Records
	var err error
	rows, err := br.Query()
	if err == nil {
		r.Orders, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (OrderRow, error) {
			var o OrderRow
			err := row.Scan(&o.ID, &o.Source, &o.ProviderEventID, &o.ExternalID, &o.PaymentIntentID, &o.Status,
				&o.AmountCents, &o.Currency, &o.CustomerEmail, &o.Plan, &o.AmountRefunded, &o.AccountID, &o.CreatedAt,
				&o.UpdatedAt, &o.Wrote)
			return o, err
		})
	}
	if err != nil {
		return Records{}, fmt.Errorf("orders of %s: %w", d.Key, err)
	}
	rows, err = br.Query()
	if err == nil {
		r.Invoices, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (InvoiceRow, error) {
			var i InvoiceRow
			err := row.Scan(&i.StripeInvoiceID, &i.Status, &i.AmountDue, &i.AmountPaid, &i.Currency, &i.CustomerEmail,
				&i.AccountID, &i.CreatedAt, &i.UpdatedAt, &i.Wrote)
			return i, err
		})
	}
	if err != nil {
		return Records{}, fmt.Errorf("invoices of %s: %w", d.Key, err)
	}
	rows, err = br.Query()
	if err == nil {
		r.Refunds, err = pgx.CollectRows(rows, pgx.RowToStructByPos[RefundRow])
	}
	if err != nil {
		return Records{}, fmt.Errorf("refunds of %s: %w", d.Key, err)
	}
	rows, err = br.Query()
	if err == nil {
		r.Subscriptions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (SubscriptionRow, error) {
			var s SubscriptionRow
			err := row.Scan(&s.Source, &s.ExternalID, &s.Status, &s.CustomerID, &s.CurrentPeriodEnd, &s.CancelAtPeriodEnd,
				&s.AccountID, &s.EventAt, &s.LastEventID, &s.UpdatedAt, &s.Wrote)
			return s, err
		})
	}
	if err != nil {
		return Records{}, fmt.Errorf("subscriptions of %s: %w", d.Key, err)
	}
	rows, err = br.Query()
	if err == nil {
		r.Disputes, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (DisputeRow, error) {
			var x DisputeRow
			err := row.Scan(&x.Source, &x.ExternalID, &x.PaymentIntentID, &x.ChargeID, &x.AmountCents, &x.Currency, &x.Reason,
				&x.Status, &x.EvidenceDueBy, &x.AccountID, &x.LastEventID, &x.UpdatedAt, &x.Wrote)
			return x, err
		})
	}
	if err != nil {
		return Records{}, fmt.Errorf("disputes of %s: %w", d.Key, err)
	}
	return r, br.Close()
}
