package conformance

import (
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestSuiteWithoutItsProvider: a suite whose Providers do not list its Spec
// (a fork's test run before its registry line is written) stops at once,
// naming the trap, instead of failing every case for a route not mounted.
func TestSuiteWithoutItsProvider(t *testing.T) {
	s := &Suite{Spec: webhooks.Spec{Source: "acme"}}
	msg := fatal(t, func(tb testing.TB) { s.receiver(tb) })
	if !strings.Contains(msg, "Suite.Providers does not list acme") || !strings.Contains(msg, "providers.List()") {
		t.Errorf("a suite without its provider: %q", msg)
	}
}
