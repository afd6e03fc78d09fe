package paddle_test

import (
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/providers/paddle"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestSecretVariable: PADDLE_WEBHOOK_SECRET takes a secret key as Paddle
// issues it (pdl_ntfset_, the destination's id, _ and 32 characters: 70),
// refuses a shorter one or one of another form without quoting it, and is
// logged masked.
func TestSecretVariable(t *testing.T) {
	const issued = "pdl_ntfset_01j47rjgzbqqk1pm17b3w1rfwx_Qa1oWt4PMruIrT1v9e88uwrmkdoJsFT+"
	load := func(v string) error {
		env := map[string]string{"DATABASE_URL": "postgres://localhost/x", paddle.Spec.Secret.Name: v}
		_, err := config.Load(func(k string) string { return env[k] }, []webhooks.Spec{paddle.Spec})
		return err
	}
	if err := load(issued + "," + strings.Replace(issued, "Qa1o", "Zb2p", 1)); err != nil {
		t.Errorf("two secrets as Paddle issues them: %v", err)
	}
	for _, c := range []struct{ name, value, err string }{
		{"Placeholder", "pdl_ntfset_x", "secret 1 is shorter than 70 characters"},
		{"Truncated", issued[:69], "secret 1 is shorter than 70 characters"},
		{"AnotherProvider", "whsec_" + strings.Repeat("0123456789abcdef", 5), "is not a notification destination's secret key"},
		{"WhiteSpace", issued[:40] + " " + issued[40:], "is not a notification destination's secret key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := load(c.value)
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), c.value) {
				t.Errorf("error %v, want one saying %q without the value", err, c.err)
			}
		})
	}
	if got := paddle.Spec.Secret.Masked(issued); got != "pdl_ntfset_****" {
		t.Errorf("Masked = %q", got)
	}
}
