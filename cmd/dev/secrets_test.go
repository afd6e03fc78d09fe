package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/providers"
)

// TestDevSecretsStart: the development secrets are ones start-up takes
// without a word, under every provider's rules; a kept secret start-up no
// longer takes (a Paddle one of 63 characters, from before secrets shorter
// than Paddle issues were refused) is made again, and one it takes is
// kept.
func TestDevSecretsStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev-secrets.env")
	const keptStripe = "whsec_dev_0123456789abcdef0123456789abcdef0123456789abcdef"
	shortPaddle := "pdl_ntfset_dev_" + strings.Repeat("0a", 24)
	if err := writeEnvFile(path, map[string]string{"STRIPE_WEBHOOK_SECRET": keptStripe, "PADDLE_WEBHOOK_SECRET": shortPaddle}); err != nil {
		t.Fatal(err)
	}
	secrets, err := loadDevSecrets(path)
	if err != nil {
		t.Fatal(err)
	}
	if secrets["STRIPE_WEBHOOK_SECRET"] != keptStripe {
		t.Errorf("a Stripe secret start-up takes was not kept: %q", secrets["STRIPE_WEBHOOK_SECRET"])
	}
	if p := secrets["PADDLE_WEBHOOK_SECRET"]; p == shortPaddle || !strings.HasPrefix(p, "pdl_ntfset_dev_") {
		t.Errorf("the short Paddle secret was kept, or made again wrong: %q", p)
	}
	again, err := loadDevSecrets(path)
	if err != nil || again["PADDLE_WEBHOOK_SECRET"] != secrets["PADDLE_WEBHOOK_SECRET"] {
		t.Errorf("the Paddle secret made again was not saved: %q, then %q (%v)", secrets["PADDLE_WEBHOOK_SECRET"], again["PADDLE_WEBHOOK_SECRET"], err)
	}

	env := map[string]string{"DATABASE_URL": "postgres://localhost/receiver", config.DevEnv: "1"}
	for _, s := range devSecrets {
		env[s.env] = secrets[s.env]
	}
	cfg, err := config.Load(func(k string) string { return env[k] }, providers.All())
	if err != nil {
		t.Fatalf("start-up refuses the development secrets: %v", err)
	}
	for _, w := range cfg.Warnings {
		for _, s := range devSecrets {
			if w.Var == s.env {
				t.Errorf("start-up warns of a development secret: %s %s", w.Var, w.Message)
			}
		}
	}
}
