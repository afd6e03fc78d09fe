package polar

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/dunning"
	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/sales"
	"github.com/paywebhooks/receiver/internal/subscriptions"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Step names of Polar events. Each is one claim under its own lease.
const (
	StepConfirmationEmail = sales.StepConfirmation
	StepFulfillment       = sales.StepFulfillment
	StepRefundEmail       = "email.refund"
	StepPastDueEmail      = dunning.StepPastDue
)

// handledTypes are the event types Plan acts on.
var handledTypes = []string{"order.paid", "order.refunded",
	"subscription.created", "subscription.updated", "subscription.active", "subscription.canceled",
	"subscription.uncanceled", "subscription.revoked", "subscription.past_due"}

// finalSubscription are the statuses of a Polar subscription whose access
// has ended, Polar's revoked statuses (SubscriptionStatus.revoked_statuses
// in polarsource/polar's server/polar/models/subscription.py): the row
// never leaves them. Polar sets them only when a subscription ends: at
// once when it is revoked (ended_at set to that moment), else at the end
// of the period a cancellation was scheduled for; a subscription.revoked
// always carries one. Polar's staff can reinstate a canceled
// subscription (since July 2026: active again, with a newer modified_at);
// this receiver keeps it ended, as it keeps a Stripe subscription deleted,
// and an operator reads Polar's dashboard for such a rare case.
var finalSubscription = []string{"canceled", "unpaid"}

// Plan implements webhooks.Provider: the contract's Polar table. Each
// write is safe on its own to run twice, and every step is planned on the
// condition that this event changed the state, so a copy of the event
// under another webhook-id (another endpoint's), or a replay past an
// emptied processed_events, changes nothing and sends nothing.
func (p *Provider) Plan(ev *webhooks.Event, plan *webhooks.Plan) error {
	if !slices.Contains(handledTypes, ev.Type) {
		return webhooks.ErrUnhandled
	}
	e, ok := ev.Payload.(*event)
	if !ok { // a stored event, replayed
		decoded, err := Decode(ev.ID, ev.Body)
		if err != nil {
			return webhooks.Unprocessable("event %s: %v", ev.ID, err)
		}
		e = decoded.Payload.(*event)
	}
	if e.dataErr != nil {
		return webhooks.Unprocessable("%s %s: data: %v", ev.Type, ev.ID, e.dataErr)
	}
	switch ev.Type {
	case "order.paid":
		return p.orderPaid(ev, e.Data, plan)
	case "order.refunded":
		return p.orderRefunded(ev, e.Data, plan)
	}
	return p.subscription(ev, e, plan)
}

// order is an order as the handlers use it.
type order struct {
	ID          string
	AmountCents int64 // total_amount
	Currency    string
	Email       string // customer.email, when the payload gives one
}

func readOrder(ev *webhooks.Event, d *data) (order, error) {
	switch {
	case d.ID == "":
		return order{}, webhooks.Unprocessable("%s %s: the order has no id", ev.Type, ev.ID)
	case d.TotalAmount == nil || *d.TotalAmount < 0:
		return order{}, webhooks.Unprocessable("%s %s: the order has no total_amount", ev.Type, ev.ID)
	case d.RefundedAmount < 0 || d.RefundedTaxAmount < 0:
		return order{}, webhooks.Unprocessable("%s %s: refunded_amount %d, refunded_tax_amount %d", ev.Type, ev.ID,
			d.RefundedAmount, d.RefundedTaxAmount)
	}
	o := order{ID: d.ID, AmountCents: *d.TotalAmount, Currency: strings.ToLower(d.Currency)}
	if d.Customer != nil {
		o.Email = d.Customer.Email
	}
	return o, nil
}

// orderPaid records the order paid (partially refunded or refunded if its
// refunds came first) and, when this event made it so, plans the
// confirmation (when the payload gives an address) and the fulfillment
// call. Every renewal of a subscription is an order of its own, with its
// own order.paid.
func (p *Provider) orderPaid(ev *webhooks.Event, d *data, plan *webhooks.Plan) error {
	o, err := readOrder(ev, d)
	if err != nil {
		return err
	}
	var items []byte
	if d.SubscriptionID == nil || *d.SubscriptionID == "" {
		// A one-time purchase grants by its product; a subscription's
		// order grants nothing of its own: its subscription does.
		items = productItems(d)
	}
	orders.Create(plan, orders.Order{
		Source:          Source,
		ProviderEventID: ev.ID,
		ExternalID:      o.ID,
		PaymentIntentID: o.ID, // a refund recorded first, by order id, makes the order start refunded
		Status:          orders.StatusPaid,
		AmountCents:     o.AmountCents,
		Currency:        o.Currency,
		CustomerEmail:   o.Email,
		CustomerKey:     entitlements.CustomerKey(Source, d.CustomerID),
		AppUserID:       appUser(d),
		Items:           items,
	}, orders.Position{})
	var sale sales.Sale
	if o.Email != "" {
		sale.Email = mail.Email{Template: "order_confirmation", To: o.Email, Customer: mail.CustomerOf(Source, d.CustomerID, "")}
	}
	cond, args := orders.Changed(Source, o.ID, orders.Sold...)
	sales.Plan(plan, sale, cond, args...)
	p.follow(plan, entitlements.Change{OrderSource: Source, OrderID: o.ID})
	return nil
}

// follow queues the statement that follows the rows c names, when
// entitlements are kept (internal/entitlements).
func (p *Provider) follow(plan *webhooks.Plan, c entitlements.Change) {
	if p.entitlements {
		entitlements.Follow(plan, c)
	}
}

// productItems is what an order or subscription is for: its product.
func productItems(d *data) []byte {
	if d.ProductID == "" {
		return []byte(`[]`)
	}
	b, _ := json.Marshal([]entitlements.Item{{Product: d.ProductID}})
	return b
}

// appUser is the app's user id Polar carries: the customer's external_id.
func appUser(d *data) string {
	if d.Customer == nil || d.Customer.ExternalID == nil {
		return ""
	}
	return entitlements.AppUser(*d.Customer.ExternalID)
}

// orderRefunded records the order's cumulative refunded total,
// refunded_amount + refunded_tax_amount (Polar's refunded_amount is net of
// tax): the order takes it when it is larger than what it had,
// partially_refunded below total_amount, refunded at it; an order that
// arrives later starts with it. The refund email goes once per refunded
// total (a copy from another endpoint adds nothing), to the payload's
// address, else the order's; with neither, none is planned.
func (p *Provider) orderRefunded(ev *webhooks.Event, d *data, plan *webhooks.Plan) error {
	o, err := readOrder(ev, d)
	if err != nil {
		return err
	}
	refunded := d.RefundedAmount + d.RefundedTaxAmount
	if refunded == 0 {
		return nil // nothing refunded yet: nothing to record
	}
	orders.ApplyRefund(plan, orders.Refund{
		ProviderEventID: ev.ID,
		PaymentIntentID: o.ID,
		ChargeID:        o.ID, // one cumulative total per order: the largest recorded counts
		AmountRefunded:  refunded,
		Currency:        o.Currency,
	})
	cond, args := orders.RefundRecorded(ev.ID)
	if o.Email == "" {
		cond = sales.WithAddress(cond)
	}
	plan.StepIf(mail.Step(StepRefundEmail, mail.Email{Template: "refund", To: o.Email, Customer: mail.CustomerOf(Source, d.CustomerID, ""), Data: map[string]any{
		"PaymentIntentID": o.ID, "TotalRefunded": refunded, "AmountCents": o.AmountCents, "Currency": o.Currency}}),
		cond, args...)
	p.follow(plan, entitlements.Change{OrderSource: Source, Payment: o.ID})
	return nil
}

// subscription applies a subscription.* event: the subscription takes the
// event's state, in Polar's own words, unless an event of a later time was
// applied or the subscription has ended (finalSubscription). Its time is
// modified_at, or created_at while Polar has not updated the subscription
// yet (subscription.created and the .updated sent with it carry none),
// with Polar's microseconds. Events of the same time carry the same state
// (one change sends updated with canceled, or with revoked), so among
// them the later arrival wins with nothing to lose, except over an ended
// subscription. The event that ends it — subscription.revoked, or any
// event whose status is canceled or unpaid with its end (ends_at,
// ended_at or current_period_end) no later than the event — applies
// whatever the time of the last event applied (subscriptions.End), like
// Stripe's customer.subscription.deleted: no later-arriving event, of the
// same modified_at or a newer one, moves the subscription back.
func (p *Provider) subscription(ev *webhooks.Event, e *event, plan *webhooks.Plan) error {
	d := e.Data
	if d.ID == "" || d.Status == "" {
		return webhooks.Unprocessable("%s %s: the subscription has no id or status", ev.Type, ev.ID)
	}
	stamp := d.ModifiedAt
	if stamp == "" {
		stamp = d.CreatedAt
	}
	at, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		return webhooks.Unprocessable("%s %s: neither modified_at nor created_at is a time to order it by (%s)",
			ev.Type, ev.ID, webhooks.Quote(stamp, 40))
	}
	sub := subscriptions.Subscription{
		Source:            Source,
		ExternalID:        d.ID,
		Status:            d.Status,
		CustomerID:        d.CustomerID,
		CancelAtPeriodEnd: d.CancelAtPeriodEnd,
		EventID:           ev.ID,
		At:                at,
		Items:             productItems(d),
		CustomerKey:       entitlements.CustomerKey(Source, d.CustomerID),
		AppUserID:         appUser(d),
	}
	defer p.follow(plan, entitlements.Change{SubscriptionSource: Source, SubscriptionID: sub.ExternalID, At: at, Status: sub.Status})
	if end, err := time.Parse(time.RFC3339Nano, d.CurrentPeriodEnd); err == nil {
		sub.CurrentPeriodEnd = end
	}
	happened := at // when the event happened: its timestamp, when later than the subscription's change
	if t := e.Timestamp.Time(); t.After(happened) {
		happened = t
	}
	if slices.Contains(finalSubscription, sub.Status) && (ev.Type == "subscription.revoked" || ended(d, happened)) {
		subscriptions.End(plan, sub, finalSubscription)
		return nil
	}
	subscriptions.Apply(plan, sub, finalSubscription)
	past := dunning.PastDue{Sub: sub, Period: d.CurrentPeriodStart, Final: finalSubscription}
	if d.Customer != nil {
		past.To = d.Customer.Email
	}
	dunning.Plan(plan, past)
	return nil
}

// ended reports whether the subscription's end (ends_at, ended_at, else
// current_period_end) is no later than the event's time.
func ended(d *data, at time.Time) bool {
	for _, s := range []string{d.EndedAt, d.EndsAt, d.CurrentPeriodEnd} {
		if end, err := time.Parse(time.RFC3339Nano, s); err == nil && !end.After(at) {
			return true
		}
	}
	return false
}
