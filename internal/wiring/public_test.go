package wiring

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestPublicURL: PUBLIC_URL is optional; set, it is the receiver's base
// URL without a trailing slash, logged as it is (it is no secret); one
// that is not a base URL stops start-up, naming the variable.
func TestPublicURL(t *testing.T) {
	e := valid()
	if c, err := Load(env(e), specs); err != nil || c.PublicURL != "" {
		t.Fatalf("unset: %q, %v", c.PublicURL, err)
	}
	e["PUBLIC_URL"] = "https://pay.example.com/"
	c, err := Load(env(e), specs)
	if err != nil || c.PublicURL != "https://pay.example.com" {
		t.Fatalf("set: %q, %v", c.PublicURL, err)
	}
	if logged := fmt.Sprint(slog.AnyValue(c).Resolve()); !strings.Contains(logged, "PUBLIC_URL=https://pay.example.com") {
		t.Errorf("start-up logs %s", logged)
	}
	for _, bad := range []string{"pay.example.com", "http://pay.example.com", "https://pay.example.com/?a=1", "https://u:p@pay.example.com"} {
		e["PUBLIC_URL"] = bad
		if _, err := Load(env(e), specs); err == nil || !strings.Contains(err.Error(), "PUBLIC_URL must") {
			t.Errorf("PUBLIC_URL=%s: %v", bad, err)
		}
	}
}
