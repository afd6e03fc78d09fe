// Package dunning says, once for the providers that report a failing
// renewal on the subscription itself (Paddle's subscription.past_due,
// Polar's past-due subscription), what the customer is told: the past-due
// email, with the provider's own management link where the payload has
// one. (Stripe reports it on the invoice: its provider's dunning.go.)
//
// The email is a step of the subscription's billing period
// ("subscription:<source>:<id>:past_due:<period start>", webhooks.Step.Object),
// planned once per period whichever event reports it first (the provider's
// past_due event, an update carrying the same status, a catch-up, a
// replay), and only while the event leaves the subscription past due: a
// late report after the subscription was paid again tells the customer
// nothing untrue.
package dunning

import (
	"github.com/paywebhooks/receiver/internal/customers"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/subscriptions"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// StepPastDue is the step name of the past-due email.
const StepPastDue = "email.past_due"

// StatusPastDue is the status Paddle and Polar give a subscription whose
// renewal failed and is being retried.
const StatusPastDue = "past_due"

// PastDue is a subscription left past due by an event.
type PastDue struct {
	Sub subscriptions.Subscription // as the event carries it (Source, ExternalID, CustomerID, EventID)
	// Period names the billing period that is past due (its start, as the
	// provider writes it); "" when the event does not say: then the
	// subscription is told once per event that makes it past due.
	Period string
	// To is the address the payload gives; "" when it gives none (the
	// customer's remembered address is used, customers.WithAddress).
	To string
	// ManageURL and CancelURL are the provider's own pages for the
	// customer (Paddle's management_urls), when the payload has them.
	ManageURL, CancelURL string
	// Final are the provider's final statuses: no notice for an ended
	// subscription.
	Final []string
}

// Plan queues the past-due notice and its email, for a subscription this
// transaction leaves past due (call it after the subscription's own write).
func Plan(plan *webhooks.Plan, p PastDue) {
	if p.Sub.Status != StatusPastDue {
		return
	}
	period := p.Period
	if period == "" {
		period = p.Sub.EventID
	}
	notice := StatusPastDue + ":" + period
	subscriptions.NoticeWhile(plan, p.Sub.Source, p.Sub.ExternalID, notice, p.Sub.EventID, StatusPastDue)
	data := map[string]any{"SubscriptionID": p.Sub.ExternalID}
	if p.ManageURL != "" {
		data["ManageURL"] = p.ManageURL
	}
	if p.CancelURL != "" {
		data["CancelURL"] = p.CancelURL
	}
	step := mail.Step(StepPastDue, mail.Email{Template: "past_due", To: p.To,
		Customer: mail.CustomerOf(p.Sub.Source, p.Sub.CustomerID, p.Sub.AccountID), Data: data})
	step.Object = "subscription:" + p.Sub.Source + ":" + p.Sub.ExternalID + ":" + notice
	cond, args := subscriptions.Noticed(p.Sub.Source, p.Sub.ExternalID, notice, p.Final...)
	if p.To == "" {
		cond, args = customers.WithAddress(cond, args, p.Sub.Source, p.Sub.CustomerID)
	}
	plan.StepIf(step, cond, args...)
}
