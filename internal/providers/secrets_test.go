package providers_test

import (
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestDevSecretsStart: every provider's development secret (DevValue, what
// `make run` generates and the test receiver verifies with) is one
// start-up takes without a word, and a one-character secret after its
// DevPrefix (whsec_x) is refused.
func TestDevSecretsStart(t *testing.T) {
	for _, spec := range providers.All() {
		t.Run(spec.Source, func(t *testing.T) {
			v := spec.Secret
			load := func(value string) (config.Config, error) {
				env := map[string]string{"DATABASE_URL": "postgres://localhost/x", config.DevEnv: "1", v.Name: value}
				return config.Load(func(k string) string { return env[k] }, []webhooks.Spec{spec})
			}
			dev := v.DevValue(strings.Repeat("0a", 24))
			cfg, err := load(dev)
			if err != nil {
				t.Fatalf("the development secret %q: %v", dev, err)
			}
			for _, w := range cfg.Warnings {
				if w.Var == v.Name {
					t.Errorf("the development secret %q is warned of: %s", dev, w.Message)
				}
			}
			if !v.Fits(dev) {
				t.Errorf("Fits(%q) is false", dev)
			}
			if prefix := v.DevPrefix; prefix != "" {
				if _, err := load(prefix + "x"); err == nil {
					t.Errorf("%sx is taken", prefix)
				}
				if v.Fits(prefix + "x") {
					t.Errorf("Fits(%sx) is true", prefix)
				}
			}
		})
	}
}
