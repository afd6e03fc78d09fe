package webhooks_test

import (
	"testing"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestPlural: one of anything in the singular, any other count in the
// plural; one secret is the configured secret.
func TestPlural(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{webhooks.Plural(0, "event", "events"), "0 events"},
		{webhooks.Plural(1, "event", "events"), "1 event"},
		{webhooks.Plural(2, "delivery", "deliveries"), "2 deliveries"},
		{webhooks.ConfiguredSecrets(1), "the configured secret"},
		{webhooks.ConfiguredSecrets(2), "any of the 2 configured secrets"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
