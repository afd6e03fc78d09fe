package paddle

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/customers"
	"github.com/paywebhooks/receiver/internal/dunning"
	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/sales"
	"github.com/paywebhooks/receiver/internal/subscriptions"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Step names of Paddle events. Each is one claim under its own lease.
const (
	StepConfirmationEmail  = sales.StepConfirmation
	StepFulfillment        = sales.StepFulfillment
	StepPaymentFailedEmail = "email.payment_failed"
	StepRefundEmail        = "email.refund"
	StepPastDueEmail       = dunning.StepPastDue
)

// handledTypes are the event types Plan acts on.
var handledTypes = []string{"transaction.completed", "transaction.payment_failed", "adjustment.created", "adjustment.updated",
	"subscription.created", "subscription.activated", "subscription.updated", "subscription.trialing",
	"subscription.past_due", "subscription.paused", "subscription.resumed", "subscription.canceled"}

// finalSubscription are the statuses a Paddle subscription never leaves.
var finalSubscription = []string{"canceled"}

// Plan implements webhooks.Provider: the contract's Paddle table. Each
// write is safe on its own to run twice, and every step is planned on the
// condition that this event changed the state, so even a replay past an
// emptied processed_events changes nothing and sends nothing.
func (p *Provider) Plan(ev *webhooks.Event, plan *webhooks.Plan) error {
	if !slices.Contains(handledTypes, ev.Type) {
		return webhooks.ErrUnhandled
	}
	n, ok := ev.Payload.(*notification)
	if !ok { // a stored event, replayed
		decoded, err := Decode(ev.Body)
		if err != nil {
			return webhooks.Unprocessable("event %s: %v", ev.ID, err)
		}
		n = decoded.Payload.(*notification)
	}
	if n.dataErr != nil {
		return webhooks.Unprocessable("%s %s: data: %v", ev.Type, ev.ID, n.dataErr)
	}
	switch ev.Type {
	case "transaction.completed":
		return p.transactionCompleted(ev, n, plan)
	case "transaction.payment_failed":
		return paymentFailed(ev, n, plan)
	case "adjustment.created", "adjustment.updated":
		return p.adjustment(ev, n, plan)
	}
	return p.subscription(ev, n, plan)
}

// subscription applies a subscription.* event: the subscription takes the
// event's state unless an event that occurred later was applied (by
// occurred_at; of the same time, the later arrival wins) or it is
// canceled, which is final. See internal/subscriptions.
func (p *Provider) subscription(ev *webhooks.Event, n *notification, plan *webhooks.Plan) error {
	d := n.Data
	if d.ID == "" || d.Status == "" {
		return webhooks.Unprocessable("%s %s: the subscription has no id or status", ev.Type, ev.ID)
	}
	at, err := time.Parse(time.RFC3339Nano, string(n.OccurredAt))
	if err != nil {
		return webhooks.Unprocessable("%s %s: occurred_at %s is not a time to order it by", ev.Type, ev.ID,
			webhooks.Quote(string(n.OccurredAt), 40))
	}
	sub := subscriptions.Subscription{
		Source:            Source,
		ExternalID:        d.ID,
		Status:            d.Status,
		CustomerID:        d.CustomerID,
		CancelAtPeriodEnd: d.ScheduledChange != nil && d.ScheduledChange.Action == "cancel",
		EventID:           ev.ID,
		At:                at,
		Items:             items(d),
		CustomerKey:       entitlements.CustomerKey(Source, d.CustomerID),
		AppUserID:         entitlements.AppUser(d.CustomData.AppUserID),
	}
	if d.CurrentBillingPeriod != nil {
		if end, err := time.Parse(time.RFC3339Nano, d.CurrentBillingPeriod.EndsAt); err == nil {
			sub.CurrentPeriodEnd = end
		}
	}
	subscriptions.Apply(plan, sub, finalSubscription)
	past := dunning.PastDue{Sub: sub, To: d.CustomData.Email, Final: finalSubscription}
	if d.CurrentBillingPeriod != nil {
		past.Period = d.CurrentBillingPeriod.StartsAt
	}
	if m := d.ManagementURLs; m != nil {
		past.ManageURL, past.CancelURL = deref(m.UpdatePaymentMethod), deref(m.Cancel)
	}
	dunning.Plan(plan, past)
	p.follow(plan, entitlements.Change{SubscriptionSource: Source, SubscriptionID: sub.ExternalID, At: at, Status: sub.Status})
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// follow queues the statement that follows the rows c names, when
// entitlements are kept (internal/entitlements).
func (p *Provider) follow(plan *webhooks.Plan, c entitlements.Change) {
	if p.entitlements {
		entitlements.Follow(plan, c)
	}
}

// items are what a transaction or subscription is for, as JSON.
func items(d *entity) []byte {
	out := []entitlements.Item{}
	for _, it := range d.Items {
		if it.Price != nil {
			out = append(out, entitlements.Item{Price: it.Price.ID, Product: it.Price.ProductID, Quantity: it.Quantity})
		}
	}
	b, _ := json.Marshal(out)
	return b
}

// transaction is a transaction as the handlers use it.
type transaction struct {
	ID          string
	AmountCents int64 // details.totals.grand_total, in the currency's lowest denomination
	Currency    string
	Email       string // custom_data.email, when the checkout put it there
	CustomerID  string // ctm_…
}

func readTransaction(ev *webhooks.Event, d *entity) (transaction, error) {
	if d.ID == "" {
		return transaction{}, webhooks.Unprocessable("%s %s: the transaction has no id", ev.Type, ev.ID)
	}
	if d.Details == nil || d.Details.Totals == nil {
		return transaction{}, webhooks.Unprocessable("%s %s: the transaction has no details.totals", ev.Type, ev.ID)
	}
	amount, err := amount(d.Details.Totals.GrandTotal)
	if err != nil {
		return transaction{}, webhooks.Unprocessable("%s %s: details.totals.grand_total: %v", ev.Type, ev.ID, err)
	}
	return transaction{ID: d.ID, AmountCents: amount, Currency: strings.ToLower(d.CurrencyCode), Email: d.CustomData.Email,
		CustomerID: d.CustomerID}, nil
}

// amount reads one of Paddle's amounts: a string of the amount in the
// currency's lowest denomination.
func amount(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s is not an amount", webhooks.Quote(s, 24))
	}
	return n, nil
}

// transactionCompleted records the transaction's order paid (partially
// refunded or refunded if its refunds came first) and, when this event
// made it paid or partially refunded, plans the confirmation (when an
// address is known) and the fulfillment call.
func (p *Provider) transactionCompleted(ev *webhooks.Event, n *notification, plan *webhooks.Plan) error {
	d := n.Data
	tx, err := readTransaction(ev, d)
	if err != nil {
		return err
	}
	remember(plan, ev, n, tx)
	o := orders.Order{
		Source:          Source,
		ProviderEventID: ev.ID,
		ExternalID:      tx.ID,
		PaymentIntentID: tx.ID, // a refund recorded first, by transaction, makes the order start refunded
		Status:          orders.StatusPaid,
		AmountCents:     tx.AmountCents,
		Currency:        tx.Currency,
		CustomerEmail:   tx.Email,
		CustomerKey:     entitlements.CustomerKey(Source, d.CustomerID),
		AppUserID:       entitlements.AppUser(d.CustomData.AppUserID),
	}
	// A one-off purchase grants by its items; a subscription's transaction
	// grants nothing of its own: its subscription does.
	if d.SubscriptionID == nil || *d.SubscriptionID == "" {
		o.Items = items(d)
	}
	orders.Create(plan, o, orders.Position{})
	var sale sales.Sale
	if tx.Email != "" {
		sale.Email = mail.Email{Template: "order_confirmation", To: tx.Email, Customer: mail.CustomerOf(Source, tx.CustomerID, "")}
	}
	cond, args := orders.Changed(Source, tx.ID, orders.Sold...)
	sales.Plan(plan, sale, cond, args...)
	p.follow(plan, entitlements.Change{OrderSource: Source, OrderID: tx.ID})
	return nil
}

// paymentFailed records the failed attempt, once per event, and plans the
// payment-failed email when an address is known and the transaction's
// order is not paid (a failure delivered after the payment succeeded asks
// nothing of the customer).
func paymentFailed(ev *webhooks.Event, n *notification, plan *webhooks.Plan) error {
	d := n.Data
	tx, err := readTransaction(ev, d)
	if err != nil {
		return err
	}
	remember(plan, ev, n, tx)
	code, attempt := "", strconv.Itoa(len(d.Payments))
	if len(d.Payments) > 0 {
		code = deref(d.Payments[0].ErrorCode)
		if id := d.Payments[0].PaymentAttemptID; id != "" {
			attempt = id
		}
	}
	recordFailure(plan, failure{EventID: ev.ID, TransactionID: tx.ID, ErrorCode: code, AmountCents: tx.AmountCents, Currency: tx.Currency})
	if tx.Email != "" {
		data := map[string]any{"ExternalID": tx.ID, "AmountCents": tx.AmountCents, "Currency": tx.Currency}
		if d.Checkout != nil && deref(d.Checkout.URL) != "" {
			data["PaymentURL"] = *d.Checkout.URL
		}
		step := mail.Step(StepPaymentFailedEmail, mail.Email{Template: "payment_failed", To: tx.Email,
			Customer: mail.CustomerOf(Source, tx.CustomerID, ""), Data: data})
		// One email per attempt of the transaction (its payments[], most
		// recent first), whichever event reports it.
		step.Object = "transaction:" + tx.ID + ":attempt:" + attempt
		cond, args := failureToNotify(ev.ID, tx.ID)
		plan.StepIf(step, cond, args...)
	}
	return nil
}

// remember records the transaction's customer's address (custom_data.email,
// when the checkout put one there), for the emails of its subscription.
func remember(plan *webhooks.Plan, ev *webhooks.Event, n *notification, tx transaction) {
	customers.Remember(plan, customers.Customer{Source: Source, ID: tx.CustomerID, Email: tx.Email, EventID: ev.ID,
		At: n.OccurredAt.Time()})
}

// adjustmentEffects are what each status of a Paddle refund adjustment does
// to its transaction's refunded amount.
var adjustmentEffects = map[string]orders.Effect{
	"approved": orders.Counts, "pending_approval": orders.Awaits,
	"rejected": orders.Void, "reversed": orders.Void,
}

// adjustment records a refund adjustment's state as of the event's
// occurred_at (see internal/orders): the transaction's order has refunded
// the sum of its approved refund adjustments, each counted once by its id,
// partially_refunded below its amount, refunded at it, paid again at
// nothing; an order that arrives later starts with them. An adjustment's
// state is its newest event's, and rejected or reversed is final: a
// reversed adjustment takes back what its approval had added, in whichever
// order the two arrive. The refund email goes once per adjustment, when it
// is first recorded approved (none for one already reversed), to the
// order's address, when the order is known and has one. An order that
// started refunded in full (its refund came before it) and stands as a
// sale again gets the confirmation (address known) and the fulfillment
// call it never had (orders.RestoredSale). Other actions
// (credit, chargeback, …) and statuses this receiver does not know are
// acknowledged and change nothing.
func (p *Provider) adjustment(ev *webhooks.Event, n *notification, plan *webhooks.Plan) error {
	d := n.Data
	if d.Action != "refund" {
		return fmt.Errorf("adjustment action %s: %w", webhooks.Quote(d.Action, 40), webhooks.ErrUnhandled)
	}
	effect, ok := adjustmentEffects[d.Status]
	if !ok {
		return fmt.Errorf("adjustment status %s: %w", webhooks.Quote(d.Status, 40), webhooks.ErrUnhandled)
	}
	if d.ID == "" || d.TransactionID == "" || d.Totals == nil {
		return webhooks.Unprocessable("%s %s: the adjustment has no id, transaction_id or totals", ev.Type, ev.ID)
	}
	total, err := amount(d.Totals.Total)
	if err != nil {
		return webhooks.Unprocessable("%s %s: totals.total: %v", ev.Type, ev.ID, err)
	}
	at, err := time.Parse(time.RFC3339Nano, string(n.OccurredAt))
	if err != nil {
		return webhooks.Unprocessable("%s %s: occurred_at %s is not a time to order it by", ev.Type, ev.ID,
			webhooks.Quote(string(n.OccurredAt), 40))
	}
	currency := strings.ToLower(d.CurrencyCode)
	orders.ApplyRefundObject(plan, orders.RefundObject{
		ProviderEventID: ev.ID,
		PaymentIntentID: d.TransactionID,
		ChargeID:        d.ID, // an adjustment is of no charge: it is its own
		RefundID:        d.ID,
		Amount:          total,
		Currency:        currency,
		Status:          d.Status,
		Effect:          effect,
		At:              at,
	})
	cond, args := orders.RefundCounted(ev.ID)
	plan.StepIf(mail.Step(StepRefundEmail, mail.Email{Template: "refund", Customer: mail.CustomerOf(Source, d.CustomerID, ""),
		Data: map[string]any{"PaymentIntentID": d.TransactionID, "AmountRefunded": total, "Currency": currency}}),
		sales.WithAddress(cond), args...)
	cond, args = orders.RestoredSale(d.TransactionID)
	sales.Plan(plan, sales.Sale{Email: mail.Email{Template: "order_confirmation", Customer: mail.CustomerOf(Source, d.CustomerID, "")},
		OnlyWithAddress: true}, cond, args...)
	p.follow(plan, entitlements.Change{OrderSource: Source, Payment: d.TransactionID})
	return nil
}

// --- paddle_payment_failures (migrations/000006) ---

// failure is one failed payment attempt of a transaction.
type failure struct {
	EventID       string
	TransactionID string
	ErrorCode     string // the latest attempt's error_code (declined, …)
	AmountCents   int64
	Currency      string
}

// recordFailure queues the failed attempt, once per event.
func recordFailure(q *webhooks.Plan, f failure) {
	q.Exec(`
INSERT INTO paddle_payment_failures (provider_event_id, transaction_id, error_code, amount_cents, currency)
SELECT $1, $2, NULLIF($3, ''), $4, $5 WHERE receiver_claimed() ON CONFLICT DO NOTHING`,
		f.EventID, f.TransactionID, f.ErrorCode, f.AmountCents, f.Currency)
}

// failureToNotify is a step condition: it holds when this transaction
// recorded the event's failed attempt and the transaction has no paid (or
// refunded) order. internal/orders has no condition on an order's absence,
// so the order is looked up here.
func failureToNotify(eventID, transactionID string) (string, []any) {
	return `SELECT NULL::jsonb FROM paddle_payment_failures f
WHERE f.provider_event_id = $1 AND f.xmin = pg_current_xact_id()::xid
  AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.source = $2 AND o.external_id = $3 AND o.status IN ('paid', 'partially_refunded', 'refunded'))`,
		[]any{eventID, Source, transactionID}
}
