package conformance

import (
	"errors"
	"strings"
	"testing"

	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/registry"
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

// TestSuiteWithATestSecretItRefuses: a suite whose Spec's Check refuses the
// test secret (a secret with a form of its own and no Secret.Dev) stops
// at once, naming the trap, instead of failing every receiver's start-up.
func TestSuiteWithATestSecretItRefuses(t *testing.T) {
	strict := webhooks.Var{Name: "ACME_WEBHOOK_SECRET", DevPrefix: "whsec_", Check: func(v string) error {
		if strings.Contains(strings.TrimPrefix(v, "whsec_"), "_") {
			return errors.New("not base64")
		}
		return nil
	}}
	s := &Suite{Spec: webhooks.Spec{Source: "acme", Secret: strict}, Providers: []registry.Provider{{Spec: webhooks.Spec{Source: "acme"}}}}
	msg := fatal(t, func(tb testing.TB) { s.receiver(tb) })
	if !strings.Contains(msg, "refuses the test secret") || !strings.Contains(msg, "Secret.Dev") {
		t.Errorf("a suite whose Check refuses its test secret: %q", msg)
	}
	strict.Dev = func(random string) string { return "whsec_" + strings.ReplaceAll(random, "_", "") }
	s.Spec.Secret = strict
	secrets := []string{rt.Secret(s.Spec), rt.OldSecret(s.Spec)}
	for _, secret := range secrets {
		if err := strict.Check(secret); err != nil {
			t.Errorf("with Secret.Dev, the test secret %q is refused: %v", secret, err)
		}
	}
	if secrets[0] == secrets[1] {
		t.Errorf("the test secret and its predecessor are one: %q", secrets[0])
	}
}
