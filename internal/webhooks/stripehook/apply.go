package stripehook

import (
	"context"
	"fmt"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/invoices"
	"github.com/paywebhooks/receiver/internal/orders"
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

// Apply implements webhooks.Provider: the contract's Stripe table. Each
// write is safe on its own to run twice, and steps are planned only when
// this event changed the state, so even a replay past an emptied
// processed_events changes nothing and sends nothing.
func (p *Provider) Apply(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	switch ev.Type {
	case "checkout.session.completed":
		return checkoutCompleted(ctx, tx, ev)
	case "checkout.session.async_payment_succeeded":
		return asyncPaymentSucceeded(ctx, tx, ev)
	case "checkout.session.async_payment_failed":
		return asyncPaymentFailed(ctx, tx, ev)
	case "invoice.created", "invoice.finalized":
		return invoiceOpened(ctx, tx, ev)
	case "invoice.paid":
		return invoicePaid(ctx, tx, ev)
	case "invoice.payment_failed":
		return invoicePaymentFailed(ctx, tx, ev)
	case "charge.refunded":
		return chargeRefunded(ctx, tx, ev)
	}
	return nil, webhooks.ErrUnhandled
}

// session is the part of a Checkout Session the handlers need.
type session struct {
	ID              string     `json:"id"`
	PaymentStatus   string     `json:"payment_status"`
	AmountTotal     *int64     `json:"amount_total"`
	Currency        string     `json:"currency"`
	CustomerEmail   *string    `json:"customer_email"`
	PaymentIntent   expandable `json:"payment_intent"`
	CustomerDetails *struct {
		Email *string `json:"email"`
	} `json:"customer_details"`
}

func readSession(ev webhooks.Event) (session, error) {
	var s session
	if err := object(ev, &s); err != nil {
		return session{}, err
	}
	if s.ID == "" {
		return session{}, webhooks.Unprocessable("%s %s: checkout session has no id", ev.Type, ev.ID)
	}
	return s, nil
}

func (s session) email() string {
	if s.CustomerDetails != nil && s.CustomerDetails.Email != nil && *s.CustomerDetails.Email != "" {
		return *s.CustomerDetails.Email
	}
	return deref(s.CustomerEmail)
}

func (s session) order(ev webhooks.Event, status string) orders.Order {
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

// paidSteps are the steps of an order that has just been paid.
func paidSteps(o orders.Order) []webhooks.Step {
	return []webhooks.Step{
		{Name: StepConfirmationEmail, Email: &webhooks.EmailStep{
			Template: "order_confirmation",
			To:       o.CustomerEmail,
			Data:     orderData(o),
		}},
		{Name: StepFulfillment, Fulfillment: &fulfillment.Request{
			OrderID:       o.ID,
			Source:        o.Source,
			ExternalID:    o.ExternalID,
			AmountCents:   o.AmountCents,
			Currency:      o.Currency,
			CustomerEmail: o.CustomerEmail,
		}},
	}
}

func orderData(o orders.Order) map[string]any {
	return map[string]any{
		"OrderID":     o.ID,
		"ExternalID":  o.ExternalID,
		"AmountCents": o.AmountCents,
		"Currency":    o.Currency,
	}
}

func checkoutCompleted(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	s, err := readSession(ev)
	if err != nil {
		return nil, err
	}
	status := orders.StatusPaid
	switch s.PaymentStatus {
	case "paid", "no_payment_required":
	case "unpaid":
		status = orders.StatusPendingPayment
	default:
		return nil, webhooks.Unprocessable("%s %s: payment_status %q", ev.Type, ev.ID, s.PaymentStatus)
	}
	o, created, err := orders.Create(ctx, tx, s.order(ev, status))
	if err != nil || !created || o.Status != orders.StatusPaid {
		return nil, err
	}
	return paidSteps(o), nil
}

func asyncPaymentSucceeded(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	s, err := readSession(ev)
	if err != nil {
		return nil, err
	}
	o, changed, err := orders.Upsert(ctx, tx, s.order(ev, orders.StatusPaid), orders.StatusPendingPayment)
	if err != nil || !changed || o.Status != orders.StatusPaid {
		return nil, err
	}
	return paidSteps(o), nil
}

func asyncPaymentFailed(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	s, err := readSession(ev)
	if err != nil {
		return nil, err
	}
	o, changed, err := orders.Upsert(ctx, tx, s.order(ev, orders.StatusPaymentFailed), orders.StatusPendingPayment)
	if err != nil || !changed {
		return nil, err
	}
	return []webhooks.Step{{Name: StepPaymentFailedEmail, Email: &webhooks.EmailStep{
		Template: "payment_failed", To: o.CustomerEmail, Data: orderData(o),
	}}}, nil
}

// invoice is the part of an Invoice the handlers need.
type invoice struct {
	ID            string  `json:"id"`
	AmountDue     int64   `json:"amount_due"`
	AmountPaid    int64   `json:"amount_paid"`
	Currency      string  `json:"currency"`
	CustomerEmail *string `json:"customer_email"`
	AttemptCount  int     `json:"attempt_count"`
}

func readInvoice(ev webhooks.Event) (invoices.Invoice, int, error) {
	var in invoice
	if err := object(ev, &in); err != nil {
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
		CustomerEmail:   deref(in.CustomerEmail),
	}, in.AttemptCount, nil
}

func invoiceOpened(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	inv, _, err := readInvoice(ev)
	if err != nil {
		return nil, err
	}
	_, err = invoices.EnsurePending(ctx, tx, inv)
	return nil, err
}

func invoicePaid(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	inv, _, err := readInvoice(ev)
	if err != nil {
		return nil, err
	}
	changed, err := invoices.MarkPaid(ctx, tx, inv)
	if err != nil || !changed {
		return nil, err
	}
	return []webhooks.Step{{Name: StepReceiptEmail, Email: &webhooks.EmailStep{
		Template: "invoice_receipt", To: inv.CustomerEmail,
		Data: map[string]any{"InvoiceID": inv.StripeInvoiceID, "AmountPaid": inv.AmountPaid, "Currency": inv.Currency},
	}}}, nil
}

func invoicePaymentFailed(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	inv, attempt, err := readInvoice(ev)
	if err != nil {
		return nil, err
	}
	recorded, err := invoices.RecordPaymentFailure(ctx, tx, ev.ID, inv, attempt)
	if err != nil || !recorded {
		return nil, err
	}
	return []webhooks.Step{{Name: StepDunningEmail, Email: &webhooks.EmailStep{
		Template: "dunning", To: inv.CustomerEmail,
		Data: map[string]any{"InvoiceID": inv.StripeInvoiceID, "AmountDue": inv.AmountDue,
			"Currency": inv.Currency, "AttemptCount": attempt},
	}}}, nil
}

// charge is the part of a Charge the refund handler needs.
type charge struct {
	ID             string     `json:"id"`
	PaymentIntent  expandable `json:"payment_intent"`
	AmountRefunded int64      `json:"amount_refunded"`
	Currency       string     `json:"currency"`
	ReceiptEmail   *string    `json:"receipt_email"`
	BillingDetails *struct {
		Email *string `json:"email"`
	} `json:"billing_details"`
}

func chargeRefunded(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	var ch charge
	if err := object(ev, &ch); err != nil {
		return nil, err
	}
	if ch.ID == "" || ch.PaymentIntent == "" {
		return nil, webhooks.Unprocessable("%s %s: charge has no id or payment_intent", ev.Type, ev.ID)
	}
	recorded, _, err := orders.ApplyRefund(ctx, tx, orders.Refund{
		ProviderEventID: ev.ID,
		PaymentIntentID: string(ch.PaymentIntent),
		ChargeID:        ch.ID,
		AmountRefunded:  ch.AmountRefunded,
		Currency:        ch.Currency,
	})
	if err != nil {
		return nil, fmt.Errorf("apply refund: %w", err)
	}
	if !recorded {
		return nil, nil
	}
	to := deref(ch.ReceiptEmail)
	if ch.BillingDetails != nil && deref(ch.BillingDetails.Email) != "" {
		to = *ch.BillingDetails.Email
	}
	return []webhooks.Step{{Name: StepRefundEmail, Email: &webhooks.EmailStep{
		Template: "refund", To: to,
		Data: map[string]any{"PaymentIntentID": string(ch.PaymentIntent), "AmountRefunded": ch.AmountRefunded,
			"Currency": ch.Currency},
	}}}, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
