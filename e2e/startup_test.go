package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestDevelopmentSecretRefused: a webhook secret or console token copied
// from an example ("…development…") stops the binary at start-up, unless
// the development tool runs it (PAYWEBHOOKS_DEV=1, which the unit tests of
// internal/config cover). The refusal names the variable, never the value.
func TestDevelopmentSecretRefused(t *testing.T) {
	w := newWorld(t)
	for _, kv := range [][2]string{
		{"STRIPE_WEBHOOK_SECRET", "whsec_compose_development_only_0123456789ab"},
		{"ADMIN_TOKEN", "compose-Development-token"},
	} {
		env := w.env(kv[0], kv[1], "ADMIN_ADDR", "127.0.0.1:0", "ADMIN_TOKEN", "e2e-console-token-0123456789")
		env[kv[0]] = kv[1]
		r := runServerCmd(t, env)
		evidence(t, kv[0]+" that says development", r.Stderr, "-")
		if r.Code != 1 || !strings.Contains(r.Stderr, kv[0]) || !strings.Contains(r.Stderr, `contains "development"`) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 naming it", kv[0], r.Code, r.Stderr)
		}
		if strings.Contains(r.Stderr, kv[1]) {
			t.Errorf("the refusal quotes the value: %s", r.Stderr)
		}
	}
}

// TestShortGitHubSecretWarns: a GitHub secret of 16 to 31 characters is
// accepted with a start-up warning that names the variable, not the value.
func TestShortGitHubSecretWarns(t *testing.T) {
	w := newWorld(t)
	const short = "gh-secret-24-characters!"
	p := startReceiver(t, "receiver", w.env("GITHUB_WEBHOOK_SECRET", short))
	p.waitLog(t, "weak configuration", 10*time.Second)
	lines, _ := p.out.snapshot()
	for _, l := range lines {
		if strings.Contains(l, "weak configuration") && !strings.Contains(l, "GITHUB_WEBHOOK_SECRET") {
			t.Errorf("the warning does not name the variable: %s", l)
		}
		if strings.Contains(l, short) {
			t.Errorf("a log line shows the secret: %s", l)
		}
	}
}
