// Package providers is the registry: the one place that names every
// webhook provider. Each provider lives in a folder of its own below this
// one (its Spec and verification, its plans, its catch-up, the fake of its
// API, its fixtures and tests); adding one is its folder and one line in
// List. This package is a plain list: it imports the provider folders and
// the shape of a line (internal/registry), nothing of the wiring. Only the
// commands (cmd/) and tests import it: they hand what it lists down to
// internal/wiring, internal/server, internal/ops and internal/console,
// which name no provider.
package providers

import (
	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/providers/paddle"
	"github.com/paywebhooks/receiver/internal/providers/polar"
	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// List returns every provider the receiver knows, in the order their
// routes are mounted and their variables documented: each line its Spec
// and what else its folder offers (registry.Provider).
func List() []registry.Provider {
	return []registry.Provider{
		{Spec: stripe.Spec, Reconciler: &stripe.Reconciler, Endpoints: &stripe.Endpoints, Portal: &stripe.Portal,
			Checkout: &stripe.Checkout, StepKinds: stripe.StepKinds, Owners: stripe.Owners},
		{Spec: stripe.ThinSpec, Endpoints: &stripe.ThinEndpoints}, // Stripe's thin events: fetched from its API, no catch-up of their own
		{Spec: github.Spec, Reconciler: &github.Reconciler, Endpoints: &github.Endpoints},
		{Spec: paddle.Spec, Reconciler: &paddle.Reconciler, Endpoints: &paddle.Endpoints, Portal: &paddle.Portal},
		{Spec: polar.Spec, Reconciler: &polar.Reconciler, Endpoints: &polar.Endpoints, Portal: &polar.Portal},
	}
}

// All returns the Spec of every provider of List.
func All() []webhooks.Spec { return registry.Specs(List()) }

// Reconcilers returns the catch-up of every provider of List that has one
// (`server reconcile <name>`, RECONCILE_INTERVAL, the console).
func Reconcilers() []reconcile.Reconciler { return registry.Reconcilers(List()) }

// Endpoints returns the endpoint settings the endpoint check reads, of
// every provider of List that has them (`server endpoints check`, the
// periodic check).
func Endpoints() []endpoints.Provider { return registry.Endpoints(List()) }

// Enable is the first hour's list of the event types to enable at each
// provider (endpoints.Enable), for every provider of List with endpoint
// settings, those the check does not read included (Stripe's event
// destination of thin events): make run prints it, and
// docs/endpoints.md holds it word for word.
func Enable() string {
	var ps []endpoints.Provider
	for _, p := range List() {
		if p.Endpoints != nil {
			ps = append(ps, *p.Endpoints)
		}
	}
	return endpoints.Enable(endpoints.Targets(All(), ps))
}

// Sources returns the source name of every provider in specs.
func Sources(specs []webhooks.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Source
	}
	return out
}
