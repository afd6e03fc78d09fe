package wiring

import (
	"testing"

	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestSettingsOfASecondSpec: a second Spec of a provider's folder (Stripe's
// thin route) lists no variables of its own beside its secret, and its
// Settings read the first Spec's, defaults applied.
func TestSettingsOfASecondSpec(t *testing.T) {
	kv := valid()
	kv["STRIPE_API_KEY"] = "sk_test_settings"
	thin := stripe.ThinSpec.Secret.DevValue("thin_settings_0123456789abcdef")
	kv["STRIPE_THIN_WEBHOOK_SECRET"] = thin
	c, err := Load(env(kv), []webhooks.Spec{stripe.Spec, stripe.ThinSpec, github.Spec})
	if err != nil {
		t.Fatal(err)
	}
	s := c.Settings(stripe.ThinSource)
	if len(s.Secrets) != 1 || s.Secrets[0] != thin {
		t.Errorf("thin secrets %q", s.Secrets)
	}
	if got := s.Env("STRIPE_API_KEY"); got != "sk_test_settings" {
		t.Errorf("STRIPE_API_KEY as the thin route reads it = %q", got)
	}
	if got := s.Env("STRIPE_API_BASE"); got != "https://api.stripe.com" {
		t.Errorf("STRIPE_API_BASE as the thin route reads it = %q, want its default", got)
	}
	if got := s.Env("NO_SUCH_VARIABLE"); got != "" {
		t.Errorf("an unknown variable reads %q", got)
	}
}
