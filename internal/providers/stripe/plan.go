package stripe

import (
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/providers/stripe/invoices"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Step names of Stripe events. Each is one claim under its own lease.
const (
	StepConfirmationEmail  = "email.confirmation"
	StepFulfillment        = "fulfillment"
	StepPaymentFailedEmail = "email.payment_failed"
	StepReceiptEmail       = "email.receipt"
	StepDunningEmail       = "email.dunning"
	StepRefundEmail        = "email.refund"
)

// handledTypes are the event types Plan acts on.
var handledTypes = []string{
	"checkout.session.completed", "checkout.session.async_payment_succeeded",
	"checkout.session.async_payment_failed", "invoice.created", "invoice.finalized", "invoice.paid",
	"invoice.payment_failed", "charge.refunded",
}

// Plan implements webhooks.Provider: the contract's Stripe table. Each
// write is safe on its own to run twice, and every step is planned on the
// condition that this event changed the state, so even a replay past an
// emptied processed_events changes nothing and sends nothing.
func (p *Provider) Plan(ev *webhooks.Event, plan *webhooks.Plan) error {
	switch ev.Type {
	case "checkout.session.completed":
		return checkoutCompleted(ev, plan)
	case "checkout.session.async_payment_succeeded":
		return asyncPayment(ev, plan, orders.StatusPaid)
	case "checkout.session.async_payment_failed":
		return asyncPayment(ev, plan, orders.StatusPaymentFailed)
	case "invoice.created", "invoice.finalized":
		inv, _, err := readInvoice(ev)
		if err == nil {
			invoices.EnsurePending(plan, inv)
		}
		return err
	case "invoice.paid":
		return invoicePaid(ev, plan)
	case "invoice.payment_failed":
		return invoicePaymentFailed(ev, plan)
	case "charge.refunded":
		return chargeRefunded(ev, plan)
	}
	return webhooks.ErrUnhandled
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

func (s session) order(ev *webhooks.Event, status string) orders.Order {
	return orders.Order{
		Source:          Source,
		ProviderEventID: ev.ID,
		ExternalID:      s.ID,
		PaymentIntentID: string(s.PaymentIntent),
		Status:          status,
		AmountCents:     deref(s.AmountTotal),
		Currency:        s.Currency,
		CustomerEmail:   s.email(),
	}
}

// paidSteps plans the steps of an order that this event has just paid: the
// confirmation and the fulfillment call, each on the condition that the
// transaction left the order paid. An order that starts refunded (its
// refund arrived first) gets neither.
func paidSteps(plan *webhooks.Plan, o orders.Order) {
	cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusPaid)
	plan.StepIf(mail.Step(StepConfirmationEmail, mail.Email{Template: "order_confirmation", To: o.CustomerEmail}), cond, args...)
	plan.StepIf(fulfillment.Step(StepFulfillment), cond, args...)
}

func checkoutCompleted(ev *webhooks.Event, plan *webhooks.Plan) error {
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
	o := s.order(ev, status)
	orders.Create(plan, o, orders.Position{})
	if status == orders.StatusPaid {
		paidSteps(plan, o)
	}
	return nil
}

// asyncPayment moves a pending order to paid or payment_failed, creating
// it in that state when its completed event has not arrived.
func asyncPayment(ev *webhooks.Event, plan *webhooks.Plan, status string) error {
	s, err := readSession(ev)
	if err != nil {
		return err
	}
	o := s.order(ev, status)
	orders.Upsert(plan, o, orders.Position{}, orders.StatusPendingPayment)
	if status == orders.StatusPaid {
		paidSteps(plan, o)
		return nil
	}
	cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusPaymentFailed)
	plan.StepIf(mail.Step(StepPaymentFailedEmail, mail.Email{Template: "payment_failed", To: o.CustomerEmail}), cond, args...)
	return nil
}

func readInvoice(ev *webhooks.Event) (invoices.Invoice, int, error) {
	in, err := object(ev)
	if err != nil {
		return invoices.Invoice{}, 0, err
	}
	if in.ID == "" {
		return invoices.Invoice{}, 0, webhooks.Unprocessable("%s %s: invoice has no id", ev.Type, ev.ID)
	}
	return invoices.Invoice{
		StripeInvoiceID: in.ID,
		AmountDue:       in.AmountDue,
		AmountPaid:      in.AmountPaid,
		Currency:        in.Currency,
		CustomerEmail:   deref(in.Email),
	}, in.AttemptCount, nil
}

func invoicePaid(ev *webhooks.Event, plan *webhooks.Plan) error {
	inv, _, err := readInvoice(ev)
	if err != nil {
		return err
	}
	invoices.MarkPaid(plan, inv)
	cond, args := invoices.BecamePaid(inv.StripeInvoiceID)
	plan.StepIf(mail.Step(StepReceiptEmail, mail.Email{Template: "invoice_receipt", To: inv.CustomerEmail,
		Data: map[string]any{"InvoiceID": inv.StripeInvoiceID, "AmountPaid": inv.AmountPaid, "Currency": inv.Currency}}),
		cond, args...)
	return nil
}

func invoicePaymentFailed(ev *webhooks.Event, plan *webhooks.Plan) error {
	inv, attempt, err := readInvoice(ev)
	if err != nil {
		return err
	}
	invoices.RecordPaymentFailure(plan, ev.ID, inv, attempt)
	cond, args := invoices.FailureToDun(ev.ID, inv.StripeInvoiceID)
	plan.StepIf(mail.Step(StepDunningEmail, mail.Email{Template: "dunning", To: inv.CustomerEmail,
		Data: map[string]any{"InvoiceID": inv.StripeInvoiceID, "AmountDue": inv.AmountDue,
			"Currency": inv.Currency, "AttemptCount": attempt}}),
		cond, args...)
	return nil
}

func chargeRefunded(ev *webhooks.Event, plan *webhooks.Plan) error {
	ch, err := object(ev)
	if err != nil {
		return err
	}
	if ch.ID == "" || ch.PaymentIntent == "" {
		return webhooks.Unprocessable("%s %s: charge has no id or payment_intent", ev.Type, ev.ID)
	}
	orders.ApplyRefund(plan, orders.Refund{
		ProviderEventID: ev.ID,
		PaymentIntentID: string(ch.PaymentIntent),
		ChargeID:        ch.ID,
		AmountRefunded:  ch.AmountRefunded,
		Currency:        ch.Currency,
	})
	to := deref(ch.ReceiptEmail)
	if ch.BillingDetails != nil && deref(ch.BillingDetails.Email) != "" {
		to = *ch.BillingDetails.Email
	}
	cond, args := orders.RefundRecorded(ev.ID)
	plan.StepIf(mail.Step(StepRefundEmail, mail.Email{Template: "refund", To: to,
		Data: map[string]any{"PaymentIntentID": string(ch.PaymentIntent), "AmountRefunded": ch.AmountRefunded,
			"Currency": ch.Currency}}),
		cond, args...)
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
