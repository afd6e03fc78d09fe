package providers

import (
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks/githubhook"
	"github.com/paywebhooks/receiver/internal/webhooks/stripehook"
)

// Reconcilers returns the catch-up capabilities the providers offer
// (`server reconcile <name>`, RECONCILE_INTERVAL, the console): one line
// per provider that has one.
func Reconcilers() []reconcile.Reconciler {
	return []reconcile.Reconciler{
		stripehook.Reconciler,
		githubhook.Reconciler,
	}
}
