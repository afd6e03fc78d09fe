package wiring

import (
	"maps"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/portal"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// StepKinds returns the step kinds the receiver runs, by the name a Step
// carries, built from s: the receiver's own (the emails, the fulfillment
// call, the operator alerts, the entitlements call) and those of the
// providers of list. The server, `events replay` and `reconcile` all run
// the kinds it returns, so a kind a fork adds is one line here (or, a
// provider's own, its registry line's StepKinds).
func StepKinds(s Setup, list []registry.Provider) webhooks.StepKinds {
	var sender mail.Sender = mail.FileSender{Dir: s.MailDir}
	if s.SMTPAddr != "" {
		sender = mail.SMTPSender{Addr: s.SMTPAddr, Username: s.SMTPUsername, Password: s.SMTPPassword, TLS: s.SMTPTLS}
	}
	var client *fulfillment.Client
	if s.FulfillmentURL != "" {
		client = fulfillment.New(s.FulfillmentURL)
		client.Key = s.FulfillmentKey
	}
	var portalLink func(mail.Customer) string
	if keys, openers, _, err := portal.Setup(s.PortalSettings(), registry.Portals(list)); err == nil && keys != nil {
		sources := map[string]bool{}
		for source := range openers {
			sources[source] = true
		}
		portalLink = (&portal.Linker{Keys: keys, Base: s.PublicURL, TTL: s.Portal.TTL, Sources: sources}).Link
	}
	kinds := webhooks.StepKinds{
		mail.KindEmail: mail.Kind{Sender: sender, From: s.MailFrom, Domain: s.MailDomain(), Templates: s.MailTemplates,
			Portal: portalLink},
		fulfillment.KindFulfillment: fulfillment.Kind{Client: client},
		// Operator alerts (internal/alerts): email goes through the same sender.
		alerts.KindWebhook: alerts.WebhookKind{URL: s.AlertWebhookURL},
		alerts.KindEmail:   alerts.EmailKind{Sender: sender, From: s.MailFrom, To: s.AlertEmail, Domain: s.MailDomain()},
		// Entitlements (internal/entitlements): the call that tells the app.
		entitlements.KindNotify: entitlements.Kind{Client: client, Lease: s.LeaseDuration},
	}
	// A provider's own kinds (Stripe's API for entitlements: a Checkout's
	// line items, its features). Its variables were checked by the
	// configuration: no error here.
	for _, p := range list {
		if p.StepKinds == nil {
			continue
		}
		if pk, err := p.StepKinds(s.Settings(p.Spec.Source).Env); err == nil {
			maps.Copy(kinds, pk)
		}
	}
	return kinds
}
