// Package registry is the shape of the provider registry: Provider, one
// line of it, says what one provider's folder offers the receiver (its
// Spec, and each capability it has of the frameworks: a catch-up, endpoint
// settings, a billing portal, a checkout return, step kinds of its own,
// the owners of tables of its own that operators read).
//
// The list itself is internal/providers, the one place that names every
// provider. It imports this package and the provider folders, nothing of
// the wiring; cmd/server hands its list to internal/server and
// internal/wiring, and each test hands internal/receivertest the list it
// wants (the registry's, or one with a provider of its own). So that all
// of them can take a list without importing the one that names the
// providers, the shape of a line lives here, below them all.
package registry

import (
	"github.com/paywebhooks/receiver/internal/checkout"
	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/portal"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Provider is one line of the registry: a provider's Spec and what else
// its folder offers. Every field but Spec is optional.
type Provider struct {
	Spec webhooks.Spec
	// Reconciler is its catch-up (`server reconcile <name>`,
	// RECONCILE_INTERVAL, the console); nil: none.
	Reconciler *reconcile.Reconciler
	// Endpoints are its endpoint settings, checked against the event types
	// its plan acts on (`server endpoints check`, the periodic check,
	// make run's list of types to enable); nil: its API shows none;
	// without New: the check reads none, make run lists its types.
	Endpoints *endpoints.Provider
	// Portal opens its customers' billing portal from the links of the
	// emails (GET /billing/portal); nil: it has none.
	Portal *portal.Provider
	// Checkout reads its checkout sessions for GET /checkout/return; nil:
	// none. One provider of a list at most offers it.
	Checkout *checkout.Provider
	// StepKinds are the kinds of the steps its plans add beside the
	// receiver's own (email, fulfillment, alerts, entitlements), built from
	// its variables (env), which the configuration has checked; nil: none.
	StepKinds func(env func(string) string) (webhooks.StepKinds, error)
	// Owners are the owners of the business tables its folder keeps (as
	// Stripe's invoices), which operators read beside the receiver's own
	// (ops.Owner: an event's records, a search); nil: none.
	Owners []ops.Owner
}

// Specs returns the Spec of every provider of list, in its order.
func Specs(list []Provider) []webhooks.Spec {
	out := make([]webhooks.Spec, len(list))
	for i, p := range list {
		out[i] = p.Spec
	}
	return out
}

// Reconcilers returns the catch-up of every provider of list that has one.
func Reconcilers(list []Provider) []reconcile.Reconciler {
	return offered(list, func(p Provider) *reconcile.Reconciler { return p.Reconciler })
}

// Endpoints returns the endpoint settings the endpoint check reads (those
// with New), of every provider of list that has them.
func Endpoints(list []Provider) []endpoints.Provider {
	return offered(list, func(p Provider) *endpoints.Provider {
		if p.Endpoints == nil || p.Endpoints.New == nil {
			return nil
		}
		return p.Endpoints
	})
}

// Portals returns every provider of list whose customers' billing portal
// the emails can link to.
func Portals(list []Provider) []portal.Provider {
	return offered(list, func(p Provider) *portal.Provider { return p.Portal })
}

// Checkouts returns every provider of list that offers the checkout
// return (internal/server mounts one at most).
func Checkouts(list []Provider) []checkout.Provider {
	return offered(list, func(p Provider) *checkout.Provider { return p.Checkout })
}

// Owners returns the owners of the business tables of every provider of
// list, in its order.
func Owners(list []Provider) []ops.Owner {
	var out []ops.Owner
	for _, p := range list {
		out = append(out, p.Owners...)
	}
	return out
}

// offered returns what the providers of list offer of one capability
// (of, nil where a provider offers none), in the list's order.
func offered[T any](list []Provider, of func(Provider) *T) []T {
	var out []T
	for _, p := range list {
		if v := of(p); v != nil {
			out = append(out, *v)
		}
	}
	return out
}
