package stripe

import (
	"slices"
	"time"

	"github.com/paywebhooks/receiver/internal/customers"
	"github.com/paywebhooks/receiver/internal/disputes"
	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/providers/stripe/invoices"
	"github.com/paywebhooks/receiver/internal/sales"
	"github.com/paywebhooks/receiver/internal/subscriptions"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Step names of Stripe events. Each is one claim under its own lease.
const (
	StepConfirmationEmail      = sales.StepConfirmation
	StepFulfillment            = sales.StepFulfillment
	StepPaymentFailedEmail     = "email.payment_failed"
	StepReceiptEmail           = "email.receipt"
	StepDunningEmail           = "email.dunning"
	StepActionRequiredEmail    = "email.action_required"
	StepRefundEmail            = "email.refund"
	StepTrialEndingEmail       = "email.trial_ending"
	StepSubscriptionEndedEmail = "email.subscription_ended"
	StepDisputeNotice          = "email.dispute"
)

// handledTypes are the event types Plan acts on.
var handledTypes = []string{
	"checkout.session.completed", "checkout.session.async_payment_succeeded",
	"checkout.session.async_payment_failed", "invoice.created", "invoice.finalized", "invoice.paid",
	"invoice.payment_failed", "invoice.payment_action_required", "charge.refunded",
	"charge.refund.updated", "refund.created", "refund.updated", "refund.failed",
	"customer.created", "customer.updated",
	"customer.subscription.created", "customer.subscription.updated", "customer.subscription.paused",
	"customer.subscription.resumed", "customer.subscription.deleted", "customer.subscription.trial_will_end",
	"charge.dispute.created", "charge.dispute.updated", "charge.dispute.closed",
	"charge.dispute.funds_withdrawn", "charge.dispute.funds_reinstated",
	"entitlements.active_entitlement_summary.updated",
}

// periodicTypes are the types the periodic reconciliation lists: Stripe's Events
// API filters on at most MaxListTypes, so it leaves out events whose state
// others it lists carry too: the two dispute events that only move money
// (funds_withdrawn, funds_reinstated: the dispute's other events carry its
// state), invoice.finalized (which records what invoice.created records,
// and the invoice's payment events create it too), and the refund.* events (charge.refunded counts a refund made;
// charge.refund.updated, which Stripe sends for the refunds of a charge,
// card refunds among them, carries a refund's failure). A failure or
// cancellation that only a refund.* event tells (a refund of another
// payment method, from API version 2024-10-28.acacia) is brought back by
// `reconcile stripe` without --types, which lists every type.
var periodicTypes = func() []string {
	var out []string
	for _, t := range handledTypes {
		switch t {
		case "charge.dispute.funds_withdrawn", "charge.dispute.funds_reinstated", "invoice.finalized",
			"refund.created", "refund.updated", "refund.failed",
			// Each summary supersedes the ones before; the next change of
			// the customer's features sends another.
			"entitlements.active_entitlement_summary.updated":
		default:
			out = append(out, t)
		}
	}
	return out
}()

// finalSubscription are the statuses a Stripe subscription never leaves.
var finalSubscription = []string{"canceled", "incomplete_expired"}

// ignored is the error of an event outside the provider's Filter: it
// matches webhooks.ErrUnhandled (acknowledged, stored, counted as ignored)
// and says why, which the processor keeps on the event's claim.
type ignored string

func (e ignored) Error() string { return string(e) }

// Is makes an ignored event match webhooks.ErrUnhandled.
func (e ignored) Is(target error) bool { return target == webhooks.ErrUnhandled }

// Plan implements webhooks.Provider: the contract's Stripe table. Each
// write is safe on its own to run twice, and every step is planned on the
// condition that this event changed the state, so even a replay past an
// emptied processed_events changes nothing and sends nothing. An event
// outside the provider's Filter (the other mode, a connected account not
// configured) is ignored before anything is read of its object, whichever
// way it came (a delivery, reconciliation, a replay).
func (p *Provider) Plan(ev *webhooks.Event, plan *webhooks.Plan) error {
	env, err := envelopeOf(ev)
	if err != nil {
		return err
	}
	if why := p.filter.ignores(env); why != "" {
		return ignored(why)
	}
	a := metaOf(env)
	switch ev.Type {
	case "checkout.session.completed":
		return p.checkoutCompleted(ev, a, plan)
	case "checkout.session.async_payment_succeeded":
		return p.asyncPayment(ev, a, plan, orders.StatusPaid)
	case "checkout.session.async_payment_failed":
		return p.asyncPayment(ev, a, plan, orders.StatusPaymentFailed)
	case "invoice.created", "invoice.finalized":
		inv, _, err := readInvoice(ev, a, plan)
		if err == nil {
			invoices.EnsurePending(plan, inv)
		}
		return err
	case "invoice.paid":
		return invoicePaid(ev, a, plan)
	case "invoice.payment_failed":
		return invoiceAttempt(ev, a, plan, invoices.AttemptFailed)
	case "invoice.payment_action_required":
		return invoiceAttempt(ev, a, plan, invoices.AttemptActionRequired)
	case "charge.refunded":
		return p.chargeRefunded(ev, a, env, plan)
	case "charge.refund.updated", "refund.created", "refund.updated", "refund.failed":
		return p.refund(ev, a, plan)
	case "customer.created", "customer.updated":
		return customer(ev, a, plan)
	case "customer.subscription.created", "customer.subscription.updated", "customer.subscription.paused",
		"customer.subscription.resumed", "customer.subscription.deleted", "customer.subscription.trial_will_end":
		return p.subscription(ev, a, plan)
	case "charge.dispute.created", "charge.dispute.updated", "charge.dispute.closed",
		"charge.dispute.funds_withdrawn", "charge.dispute.funds_reinstated":
		return p.dispute(ev, a, plan)
	case "entitlements.active_entitlement_summary.updated":
		return p.entitlementSummary(ev, a, plan)
	}
	return webhooks.ErrUnhandled
}

// meta is what every handler reads of the envelope: the account, the
// mode and when the event happened.
type meta struct {
	Account string    // acct_… of a connected account's event; "" for the platform's own
	Live    bool      // livemode
	At      time.Time // the signed created; zero when the event has none
}

func metaOf(env *envelope) meta {
	e := meta{Account: string(env.Account), Live: env.Livemode.live()}
	if env.Created > 0 {
		e.At = time.Unix(int64(env.Created), 0).UTC()
	}
	return e
}

// ordered returns when the event happened, or why an event whose state
// must be ordered against its object's other events cannot be.
func (e meta) ordered(ev *webhooks.Event) (time.Time, error) {
	if e.At.IsZero() {
		return time.Time{}, webhooks.Unprocessable("%s %s: the event has no created time to order it by", ev.Type, ev.ID)
	}
	return e.At, nil
}

// session is a Checkout Session as the handlers read it.
type session struct{ *dataObject }

func readSession(ev *webhooks.Event) (session, error) {
	o, err := object(ev)
	if err != nil {
		return session{}, err
	}
	s := session{o}
	if s.ID == "" {
		return session{}, webhooks.Unprocessable("%s %s: checkout session has no id", ev.Type, ev.ID)
	}
	return s, nil
}

func (s session) email() string {
	if s.CustomerDetails != nil && s.CustomerDetails.Email != nil && *s.CustomerDetails.Email != "" {
		return *s.CustomerDetails.Email
	}
	return deref(s.Email)
}

// customer is the session's customer, whose billing portal its emails
// link to; nil for a guest checkout.
func (s session) customer(a meta) *mail.Customer {
	return mail.CustomerOf(Source, string(s.Customer), a.Account)
}

func (s session) order(ev *webhooks.Event, a meta, status orders.Status) orders.Order {
	return orders.Order{
		Source:          Source,
		ProviderEventID: ev.ID,
		ExternalID:      s.ID,
		PaymentIntentID: string(s.PaymentIntent),
		Status:          status,
		AmountCents:     deref(s.AmountTotal),
		Currency:        s.Currency,
		CustomerEmail:   s.email(),
		AccountID:       a.Account,
		Livemode:        &a.Live,
		CustomerKey:     entitlements.CustomerKey(Source, string(s.Customer)),
		AppUserID:       s.appUser(),
	}
}

// appUser is the app's user id the session carries: client_reference_id,
// else metadata.app_user_id ("" when neither can be a subject).
func (s session) appUser() string {
	if u := entitlements.AppUser(deref(s.ClientReferenceID)); u != "" {
		return u
	}
	return entitlements.AppUser(s.Metadata.AppUserID)
}

// remember records the address of the customer an event names with one.
func remember(plan *webhooks.Plan, ev *webhooks.Event, a meta, customerID, email string) {
	customers.Remember(plan, customers.Customer{Source: Source, ID: customerID, Email: email, AccountID: a.Account,
		EventID: ev.ID, At: a.At})
}

// paidSteps plans what the sale of an order that this event has just paid
// sets off (sales.Plan: the confirmation and the fulfillment call), on the
// condition that the transaction left the order paid (or partially
// refunded: a partial refund that arrived first leaves the sale standing).
// An order that starts refunded in full (its refund arrived first) gets
// neither.
func paidSteps(plan *webhooks.Plan, o orders.Order, c *mail.Customer) {
	cond, args := orders.Changed(o.Source, o.ExternalID, orders.Sold...)
	sales.Plan(plan, sales.Sale{Email: mail.Email{Template: "order_confirmation", To: o.CustomerEmail, Customer: c}}, cond, args...)
}

func (p *Provider) checkoutCompleted(ev *webhooks.Event, a meta, plan *webhooks.Plan) error {
	s, err := readSession(ev)
	if err != nil {
		return err
	}
	status := orders.StatusPaid
	switch s.PaymentStatus {
	case "paid", "no_payment_required":
	case "unpaid":
		status = orders.StatusPendingPayment
	default:
		return webhooks.Unprocessable("%s %s: payment_status %q", ev.Type, ev.ID, s.PaymentStatus)
	}
	remember(plan, ev, a, string(s.Customer), s.email())
	o := s.order(ev, a, status)
	orders.Create(plan, o, orders.Position{})
	if status == orders.StatusPaid {
		paidSteps(plan, o, s.customer(a))
	}
	p.followSession(plan, s, a, status)
	return nil
}

// asyncPayment moves a pending order to paid or payment_failed, creating
// it in that state when its completed event has not arrived.
func (p *Provider) asyncPayment(ev *webhooks.Event, a meta, plan *webhooks.Plan, status orders.Status) error {
	s, err := readSession(ev)
	if err != nil {
		return err
	}
	remember(plan, ev, a, string(s.Customer), s.email())
	o := s.order(ev, a, status)
	orders.Upsert(plan, o, orders.Position{}, orders.StatusPendingPayment)
	p.followSession(plan, s, a, status)
	if status == orders.StatusPaid {
		paidSteps(plan, o, s.customer(a))
		return nil
	}
	cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusPaymentFailed)
	plan.StepIf(mail.Step(StepPaymentFailedEmail, mail.Email{Template: "payment_failed", To: o.CustomerEmail, Customer: s.customer(a)}),
		cond, args...)
	return nil
}

// readInvoice reads the event's invoice, and remembers its customer's
// address.
func readInvoice(ev *webhooks.Event, a meta, plan *webhooks.Plan) (invoices.Invoice, *dataObject, error) {
	in, err := object(ev)
	if err != nil {
		return invoices.Invoice{}, nil, err
	}
	if in.ID == "" {
		return invoices.Invoice{}, nil, webhooks.Unprocessable("%s %s: invoice has no id", ev.Type, ev.ID)
	}
	remember(plan, ev, a, string(in.Customer), deref(in.Email))
	return invoices.Invoice{
		StripeInvoiceID: in.ID,
		AmountDue:       in.AmountDue,
		AmountPaid:      in.AmountPaid,
		Currency:        in.Currency,
		CustomerEmail:   deref(in.Email),
		AccountID:       a.Account,
	}, in, nil
}

// chargeRefunded records the charge's cumulative amount_refunded, as of
// the event's time, and gives its payment intent's order what its refunds
// now add up to (orders.ApplyRefund). The refund email goes once per
// refund: when this event brings an amount not recorded before for the
// charge, to the charge's address, else the order's. Its amount is what
// this refund added (amount_refunded less previous_attributes.amount_refunded)
// when the event says what it was before.
func (p *Provider) chargeRefunded(ev *webhooks.Event, a meta, env *envelope, plan *webhooks.Plan) error {
	ch, err := object(ev)
	if err != nil {
		return err
	}
	if ch.ID == "" || ch.PaymentIntent == "" {
		return webhooks.Unprocessable("%s %s: charge has no id or payment_intent", ev.Type, ev.ID)
	}
	if ch.AmountRefunded < 0 {
		return webhooks.Unprocessable("%s %s: amount_refunded %d", ev.Type, ev.ID, ch.AmountRefunded)
	}
	orders.ApplyRefund(plan, orders.Refund{
		ProviderEventID: ev.ID,
		PaymentIntentID: string(ch.PaymentIntent),
		ChargeID:        ch.ID,
		AmountRefunded:  ch.AmountRefunded,
		Currency:        ch.Currency,
		At:              a.At,
	})
	to := deref(ch.ReceiptEmail)
	if ch.BillingDetails != nil && deref(ch.BillingDetails.Email) != "" {
		to = *ch.BillingDetails.Email
	}
	data := map[string]any{"PaymentIntentID": string(ch.PaymentIntent), "TotalRefunded": ch.AmountRefunded,
		"Currency": ch.Currency}
	if ch.Amount > 0 {
		data["AmountCents"] = ch.Amount
	}
	if prev := env.Data.PreviousAttributes; prev != nil && prev.AmountRefunded.Set && prev.AmountRefunded.N < ch.AmountRefunded {
		data["AmountRefunded"] = ch.AmountRefunded - prev.AmountRefunded.N
	}
	cond, args := orders.RefundRecorded(ev.ID)
	plan.StepIf(mail.Step(StepRefundEmail, mail.Email{Template: "refund", To: to, Customer: mail.CustomerOf(Source, string(ch.Customer), a.Account),
		Data: data}), cond, args...)
	p.follow(plan, entitlements.Change{OrderSource: Source, Payment: string(ch.PaymentIntent)})
	return nil
}

// refundEffects are what each status of a Stripe refund does to its
// payment's refunded amount: the charge's amount_refunded counts a refund
// from its creation until it fails or is cancelled.
var refundEffects = map[string]orders.Effect{
	"pending": orders.Counts, "requires_action": orders.Counts, "succeeded": orders.Counts,
	"failed": orders.Void, "canceled": orders.Void,
}

// refund records a refund object's state (refund.created, .updated,
// .failed, and charge.refund.updated, which Stripe sends for a charge's
// refunds before API version 2024-10-28.acacia) as of the event's time,
// and gives its payment intent's order what its refunds now add up to: a
// refund that failed or was cancelled takes back what it had added, in
// whatever order its events and its charge's charge.refunded arrive (see
// internal/orders). The refund email is charge.refunded's. An order that
// started refunded in full (its refund came before it) and stands as a
// sale again gets the confirmation and the fulfillment call it never had
// (orders.RestoredSale). A refund of no payment intent, or of a status
// this receiver does not know, is parked for an operator.
func (p *Provider) refund(ev *webhooks.Event, a meta, plan *webhooks.Plan) error {
	re, err := object(ev)
	if err != nil {
		return err
	}
	if re.ID == "" || re.PaymentIntent == "" {
		return webhooks.Unprocessable("%s %s: refund has no id or payment_intent", ev.Type, ev.ID)
	}
	if re.Amount < 0 {
		return webhooks.Unprocessable("%s %s: amount %d", ev.Type, ev.ID, re.Amount)
	}
	effect, ok := refundEffects[re.Status]
	if !ok {
		return webhooks.Unprocessable("%s %s: refund status %s", ev.Type, ev.ID, webhooks.Quote(re.Status, 40))
	}
	at, err := a.ordered(ev)
	if err != nil {
		return err
	}
	var made time.Time
	if c := deref(re.Created); c > 0 {
		made = time.Unix(c, 0).UTC()
	}
	orders.ApplyRefundObject(plan, orders.RefundObject{
		ProviderEventID: ev.ID,
		PaymentIntentID: string(re.PaymentIntent),
		ChargeID:        string(re.Charge),
		RefundID:        re.ID,
		Amount:          re.Amount,
		Currency:        re.Currency,
		Status:          re.Status,
		Effect:          effect,
		FailureReason:   deref(re.FailureReason),
		CreatedAt:       made,
		At:              at,
	})
	cond, args := orders.RestoredSale(string(re.PaymentIntent))
	sales.Plan(plan, sales.Sale{Email: mail.Email{Template: "order_confirmation"}}, cond, args...)
	p.follow(plan, entitlements.Change{OrderSource: Source, Payment: string(re.PaymentIntent)})
	return nil
}

// customer remembers the address of customer.created and customer.updated.
func customer(ev *webhooks.Event, a meta, plan *webhooks.Plan) error {
	c, err := object(ev)
	if err != nil {
		return err
	}
	if c.ID == "" {
		return webhooks.Unprocessable("%s %s: customer has no id", ev.Type, ev.ID)
	}
	remember(plan, ev, a, c.ID, deref(c.CustomerEmail))
	return nil
}

// subscription applies a customer.subscription.* event (see
// internal/subscriptions for how events of one subscription converge):
// created only inserts, updated, paused and resumed take the event's state
// unless an event of a later second was applied, deleted ends the
// subscription for good and tells the customer, trial_will_end writes no
// state and tells the customer, unless the subscription is already known
// to have ended (a late delivery). Each email goes once, to the address an
// earlier event gave for the subscription's customer; without one it is
// recorded skipped.
func (p *Provider) subscription(ev *webhooks.Event, a meta, plan *webhooks.Plan) error {
	o, err := object(ev)
	if err != nil {
		return err
	}
	if o.ID == "" || o.Status == "" {
		return webhooks.Unprocessable("%s %s: subscription has no id or status", ev.Type, ev.ID)
	}
	at, err := a.ordered(ev)
	if err != nil {
		return err
	}
	sub := subscriptions.Subscription{
		Source:            Source,
		ExternalID:        o.ID,
		Status:            o.Status,
		CustomerID:        string(o.Customer),
		CurrentPeriodEnd:  periodEnd(o),
		CancelAtPeriodEnd: o.CancelAtPeriodEnd,
		AccountID:         a.Account,
		EventID:           ev.ID,
		At:                at,
		Items:             subscriptionItems(o),
		CustomerKey:       entitlements.CustomerKey(Source, string(o.Customer)),
		AppUserID:         entitlements.AppUser(o.Metadata.AppUserID),
	}
	data := map[string]any{"SubscriptionID": sub.ExternalID}
	if ev.Type != "customer.subscription.trial_will_end" {
		defer p.follow(plan, entitlements.Change{SubscriptionSource: Source, SubscriptionID: sub.ExternalID, At: at, Status: o.Status})
	}
	switch ev.Type {
	case "customer.subscription.created":
		subscriptions.Insert(plan, sub)
	case "customer.subscription.deleted":
		if !slices.Contains(finalSubscription, sub.Status) {
			sub.Status = "canceled"
		}
		subscriptions.End(plan, sub, finalSubscription)
		subscriptions.Notice(plan, Source, sub.ExternalID, "ended", ev.ID)
		if !sub.CurrentPeriodEnd.IsZero() {
			data["PeriodEnd"] = day(sub.CurrentPeriodEnd)
		}
		cond, args := subscriptions.Noticed(Source, sub.ExternalID, "ended")
		cond, args = customers.WithAddress(cond, args, Source, sub.CustomerID)
		plan.StepIf(mail.Step(StepSubscriptionEndedEmail, mail.Email{Template: "subscription_ended", Data: data,
			Customer: mail.CustomerOf(Source, sub.CustomerID, a.Account)}), cond, args...)
	case "customer.subscription.trial_will_end":
		notice := "trial_will_end:" + ev.ID
		if o.TrialEnd != nil && *o.TrialEnd > 0 {
			end := time.Unix(*o.TrialEnd, 0).UTC()
			notice = "trial_will_end:" + end.Format(time.RFC3339)
			data["TrialEnd"] = day(end)
		}
		subscriptions.Notice(plan, Source, sub.ExternalID, notice, ev.ID)
		cond, args := subscriptions.Noticed(Source, sub.ExternalID, notice, finalSubscription...)
		cond, args = customers.WithAddress(cond, args, Source, sub.CustomerID)
		plan.StepIf(mail.Step(StepTrialEndingEmail, mail.Email{Template: "trial_ending", Data: data,
			Customer: mail.CustomerOf(Source, sub.CustomerID, a.Account)}), cond, args...)
	default:
		subscriptions.Apply(plan, sub, finalSubscription)
	}
	return nil
}

// periodEnd is the end of the subscription's current period: on the
// subscription in API versions up to 2025-02-24.acacia, on each of its
// items from 2025-03-31.basil (the latest of them, when they differ).
func periodEnd(o *dataObject) time.Time {
	end := deref(o.CurrentPeriodEnd)
	if o.Items != nil {
		for _, it := range o.Items.Data {
			end = max(end, deref(it.CurrentPeriodEnd))
		}
	}
	if end <= 0 {
		return time.Time{}
	}
	return time.Unix(end, 0).UTC()
}

// day formats a date for an email.
func day(t time.Time) string { return t.UTC().Format("2 January 2006") }

// dispute applies a charge.dispute.* event (see internal/disputes): created
// records the dispute if it is new and tells NOTIFY_EMAIL, once per
// dispute, of its amount, reason and evidence deadline; the others take
// the event's state unless a later one was applied or the dispute is
// closed. The orders of its payment intent are then marked dispute_lost
// while a dispute of it is lost, and cleared once none is
// (orders.FollowDisputes). A dispute without an id (API versions before
// 2014) is parked.
func (p *Provider) dispute(ev *webhooks.Event, a meta, plan *webhooks.Plan) error {
	o, err := object(ev)
	if err != nil {
		return err
	}
	if o.ID == "" || o.Status == "" {
		return webhooks.Unprocessable("%s %s: dispute has no id or status", ev.Type, ev.ID)
	}
	at, err := a.ordered(ev)
	if err != nil {
		return err
	}
	d := disputes.Dispute{
		Source:          Source,
		ExternalID:      o.ID,
		ChargeID:        string(o.Charge),
		PaymentIntentID: string(o.PaymentIntent),
		AmountCents:     o.Amount,
		Currency:        o.Currency,
		Reason:          deref(o.Reason),
		Status:          o.Status,
		AccountID:       a.Account,
		EventID:         ev.ID,
		At:              at,
	}
	due := deref(o.EvidenceDueBy)
	if o.EvidenceDetails != nil && deref(o.EvidenceDetails.DueBy) > 0 {
		due = *o.EvidenceDetails.DueBy
	}
	if due > 0 {
		d.EvidenceDueBy = time.Unix(due, 0).UTC()
	}
	if d.PaymentIntentID != "" {
		defer p.follow(plan, entitlements.Change{OrderSource: Source, Payment: d.PaymentIntentID})
	}
	if ev.Type != "charge.dispute.created" {
		disputes.Apply(plan, d)
		orders.FollowDisputes(plan, Source, d.PaymentIntentID)
		return nil
	}
	disputes.Open(plan, d)
	orders.FollowDisputes(plan, Source, d.PaymentIntentID)
	data := map[string]any{"DisputeID": d.ExternalID, "AmountCents": d.AmountCents, "Currency": d.Currency,
		"Reason": d.Reason, "Status": d.Status, "ChargeID": d.ChargeID, "PaymentIntentID": d.PaymentIntentID,
		"Account": d.AccountID}
	if !d.EvidenceDueBy.IsZero() {
		data["DueBy"] = d.EvidenceDueBy.Format("2 January 2006 15:04 MST")
	}
	cond, args := disputes.Opened(Source, d.ExternalID, ev.ID)
	plan.StepIf(mail.Step(StepDisputeNotice, mail.Email{Template: "dispute_opened", Notify: p.notify, Data: data}), cond, args...)
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
