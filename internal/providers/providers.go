// Package providers is the registry: the one place that names every
// webhook provider and every step kind. Each provider lives in a folder of
// its own below this one (its Spec and verification, its plans, its
// catch-up, the fake of its API, its fixtures and tests); adding one is
// its folder and one line in List. Only the commands (cmd/) and tests
// import this package: they hand what it lists down to internal/server,
// internal/ops and internal/console, which name no provider.
package providers

import (
	"maps"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/portal"
	"github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/providers/paddle"
	"github.com/paywebhooks/receiver/internal/providers/polar"
	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Provider is one line of the registry: a provider's Spec and, when it can
// catch up on what its deliveries missed, its Reconciler; when its API
// shows how it is set up to send here, its Endpoints.
type Provider struct {
	Spec       webhooks.Spec
	Reconciler *reconcile.Reconciler // nil: no catch-up
	Endpoints  *endpoints.Provider   // nil: no endpoint check; without New: listed by make run only
}

// List returns every provider the receiver knows, in the order their
// routes are mounted and their variables documented.
func List() []Provider {
	return []Provider{
		{stripe.Spec, &stripe.Reconciler, &stripe.Endpoints},
		{stripe.ThinSpec, nil, &stripe.ThinEndpoints}, // Stripe's thin events: fetched from its API, no catch-up of their own
		{github.Spec, &github.Reconciler, &github.Endpoints},
		{paddle.Spec, &paddle.Reconciler, &paddle.Endpoints},
		{polar.Spec, &polar.Reconciler, &polar.Endpoints},
	}
}

// All returns the Spec of every provider of List.
func All() []webhooks.Spec {
	var out []webhooks.Spec
	for _, p := range List() {
		out = append(out, p.Spec)
	}
	return out
}

// Reconcilers returns the catch-up of every provider of List that has one
// (`server reconcile <name>`, RECONCILE_INTERVAL, the console).
func Reconcilers() []reconcile.Reconciler {
	var out []reconcile.Reconciler
	for _, p := range List() {
		if p.Reconciler != nil {
			out = append(out, *p.Reconciler)
		}
	}
	return out
}

// Endpoints returns the endpoint settings the endpoint check reads, of
// every provider of List that has them (`server endpoints check`, the
// periodic check).
func Endpoints() []endpoints.Provider {
	var out []endpoints.Provider
	for _, p := range List() {
		if p.Endpoints != nil && p.Endpoints.New != nil {
			out = append(out, *p.Endpoints)
		}
	}
	return out
}

// Enable is the first hour's list of the event types to enable at each
// provider (endpoints.Enable), for every provider of List with endpoint
// settings, those the check does not read included (Stripe's event
// destination of thin events): make run prints it, and the README holds
// it word for word.
func Enable() string {
	var ps []endpoints.Provider
	for _, p := range List() {
		if p.Endpoints != nil {
			ps = append(ps, *p.Endpoints)
		}
	}
	return endpoints.Enable(endpoints.Targets(All(), ps))
}

// StepKinds returns the step kinds the receiver runs, by the name a Step
// carries, built from the configuration: the server, `events replay` and
// `reconcile` all use it, so a kind a fork adds is one line here.
func StepKinds(cfg config.Config) webhooks.StepKinds {
	var sender mail.Sender = mail.FileSender{Dir: cfg.MailDir}
	if cfg.SMTPAddr != "" {
		sender = mail.SMTPSender{Addr: cfg.SMTPAddr, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, TLS: cfg.SMTPTLS}
	}
	var client *fulfillment.Client
	if cfg.FulfillmentURL != "" {
		client = fulfillment.New(cfg.FulfillmentURL)
		client.Key = cfg.FulfillmentKey
	}
	var portalLink func(mail.Customer) string
	if keys, openers, _, err := portal.Setup(cfg.PortalSettings(), Portals()); err == nil && keys != nil {
		sources := map[string]bool{}
		for s := range openers {
			sources[s] = true
		}
		portalLink = (&portal.Linker{Keys: keys, Base: cfg.PublicURL, TTL: cfg.Portal.TTL, Sources: sources}).Link
	}
	kinds := webhooks.StepKinds{
		mail.KindEmail: mail.Kind{Sender: sender, From: cfg.MailFrom, Domain: cfg.MailDomain(), Templates: cfg.MailTemplates,
			Portal: portalLink},
		fulfillment.KindFulfillment: fulfillment.Kind{Client: client},
		// Operator alerts (internal/alerts): email goes through the same sender.
		alerts.KindWebhook: alerts.WebhookKind{URL: cfg.AlertWebhookURL},
		alerts.KindEmail:   alerts.EmailKind{Sender: sender, From: cfg.MailFrom, To: cfg.AlertEmail, Domain: cfg.MailDomain()},
		// Entitlements (internal/entitlements): the call that tells the app.
		entitlements.KindNotify: entitlements.Kind{Client: client, Lease: cfg.LeaseDuration},
	}
	// Stripe's API for entitlements: a Checkout's line items, its features.
	// (Its variables were checked by the configuration: no error here.)
	if sk, err := stripe.StepKinds(cfg.Var); err == nil {
		maps.Copy(kinds, sk)
	}
	return kinds
}

// Portals returns the providers whose customers' billing portal the
// emails link to (internal/portal).
func Portals() []portal.Provider {
	return []portal.Provider{stripe.Portal, paddle.Portal, polar.Portal}
}

// Registry is what internal/server is built from besides its
// configuration (whose providers are All).
func Registry() server.Registry {
	return server.Registry{Reconcilers: Reconcilers(), StepKinds: StepKinds, Endpoints: Endpoints(), Checkout: &stripe.Checkout,
		Portals: Portals()}
}

// Sources returns the source name of every provider in specs.
func Sources(specs []webhooks.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Source
	}
	return out
}
