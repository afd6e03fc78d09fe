package stripe

import (
	"time"

	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/providers/stripe/invoices"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Dunning: what the customer is told while an invoice's payment fails.
//
//   - invoice.payment_failed: the dunning email, with the invoice's
//     hosted_invoice_url (where the customer pays, or updates the card) and,
//     when Stripe will try again, next_payment_attempt.
//   - invoice.payment_action_required: the bank wants the customer to
//     confirm the payment (3-D Secure): an email that asks for it, with the
//     same link.
//   - invoice.paid: the receipt, which says the payment went through after
//     all when an earlier attempt did not (invoices.PaidNoting).
//
// Each attempt's email is a step of the attempt ("invoice:<id>:attempt:<n>",
// invoices.AttemptObject, by Stripe's attempt_count), and the receipt a
// step of the invoice, so that an attempt reported twice (by its event and
// a thin event, a catch-up after a fail-over, a replay) is told once, with
// one Message-ID. None of the attempt emails is planned once the invoice is
// paid: a failure delivered late tells a paying customer nothing untrue.

// invoiceAttempt records a reported payment attempt (failed, or waiting for
// the customer) and plans its email.
func invoiceAttempt(ev *webhooks.Event, a meta, plan *webhooks.Plan, outcome string) error {
	inv, in, err := readInvoice(ev, a, plan)
	if err != nil {
		return err
	}
	attempt := in.AttemptCount
	invoices.RecordAttempt(plan, ev.ID, inv, attempt, outcome)
	data := map[string]any{"InvoiceID": inv.StripeInvoiceID, "AmountDue": inv.AmountDue, "Currency": inv.Currency,
		"AttemptCount": attempt}
	if u := deref(in.HostedInvoiceURL); u != "" {
		data["HostedInvoiceURL"] = u
	}
	if next := deref(in.NextPaymentAttempt); next > 0 && outcome == invoices.AttemptFailed {
		data["NextPaymentAttempt"] = day(time.Unix(next, 0))
	}
	name, template := StepDunningEmail, "dunning"
	if outcome == invoices.AttemptActionRequired {
		name, template = StepActionRequiredEmail, "action_required"
	}
	step := mail.Step(name, mail.Email{Template: template, To: inv.CustomerEmail,
		Customer: mail.CustomerOf(Source, string(in.Customer), a.Account), Data: data})
	step.Object = invoices.AttemptObject(inv.StripeInvoiceID, attempt)
	cond, args := invoices.FailureToDun(ev.ID, inv.StripeInvoiceID)
	plan.StepIf(step, cond, args...)
	return nil
}

// invoicePaid records the invoice paid and plans its receipt, once per
// invoice.
func invoicePaid(ev *webhooks.Event, a meta, plan *webhooks.Plan) error {
	inv, in, err := readInvoice(ev, a, plan)
	if err != nil {
		return err
	}
	invoices.MarkPaid(plan, inv)
	step := mail.Step(StepReceiptEmail, mail.Email{Template: "invoice_receipt", To: inv.CustomerEmail,
		Customer: mail.CustomerOf(Source, string(in.Customer), a.Account),
		Data:     map[string]any{"InvoiceID": inv.StripeInvoiceID, "AmountPaid": inv.AmountPaid, "Currency": inv.Currency}})
	step.Object = invoices.Object(inv.StripeInvoiceID)
	cond, args := invoices.PaidNoting(inv.StripeInvoiceID, in.AttemptCount)
	plan.StepIf(step, cond, args...)
	return nil
}
