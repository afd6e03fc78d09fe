// Package providers is the registry of webhook providers. Configuration,
// the routes, `make run`'s development secrets, `events prune` and
// `events list`, the test helpers and the README's tables all loop over
// All: adding a provider is its package and one line here.
package providers

import (
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/webhooks/githubhook"
	"github.com/paywebhooks/receiver/internal/webhooks/paddlehook"
	"github.com/paywebhooks/receiver/internal/webhooks/stripehook"
)

// All returns the Spec of every provider the receiver knows, in the order
// their routes are mounted and their variables documented.
func All() []webhooks.Spec {
	return []webhooks.Spec{
		stripehook.Spec,
		githubhook.Spec,
		paddlehook.Spec,
	}
}

// Sources returns the source name of every provider in specs.
func Sources(specs []webhooks.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Source
	}
	return out
}
