package wiring

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/config"
)

// TestPortal: the billing-portal links' settings. Unset, no keys and the
// defaults; set, each key is 32 bytes of standard base64 (a list, the
// first sealing), the bounds are held, the keys are never logged, and a key
// without PUBLIC_URL is warned of; anything wrong stops start-up naming
// the variable.
func TestPortal(t *testing.T) {
	e := valid()
	c, err := Load(env(e), specs)
	if err != nil || c.Portal.Keys != nil || c.Portal.TTL != config.DefaultPortalLinkTTL || c.Portal.Uses != config.DefaultPortalLinkUses {
		t.Fatalf("unset: %+v, %v", c.Portal, err)
	}
	k1, k2 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a", 32))), base64.StdEncoding.EncodeToString([]byte(strings.Repeat("b", 32)))
	e["PORTAL_LINK_SECRET"], e["PORTAL_LINK_TTL"], e["PORTAL_LINK_USES"] = k1+", "+k2, "48h", "3"
	e["PORTAL_RETURN_URL"] = "https://shop.example.com/account"
	c, err = Load(env(e), specs)
	if err != nil || len(c.Portal.Keys) != 2 || string(c.Portal.Keys[0]) != strings.Repeat("a", 32) || c.Portal.TTL != 48*time.Hour ||
		c.Portal.Uses != 3 || c.Portal.ReturnURL != "https://shop.example.com/account" {
		t.Fatalf("set: %+v, %v", c.Portal, err)
	}
	if len(c.Warnings) == 0 || !strings.Contains(fmt.Sprint(c.Warnings), "PUBLIC_URL is not") {
		t.Errorf("no warning of a key without PUBLIC_URL: %v", c.Warnings)
	}
	logged := fmt.Sprint(slog.AnyValue(c).Resolve())
	if strings.Contains(logged, k1) || strings.Contains(logged, k2) || !strings.Contains(logged, "PORTAL_LINK_SECRET=****,****") {
		t.Errorf("start-up logs %s", logged)
	}
	for name, bad := range map[string]string{
		"PORTAL_LINK_SECRET": base64.StdEncoding.EncodeToString([]byte("too short")), "PORTAL_LINK_TTL": "10s",
		"PORTAL_LINK_USES": "0", "PORTAL_RETURN_URL": "http://shop.example.com/account",
	} {
		e := valid()
		e[name] = bad
		if _, err := Load(env(e), specs); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v", name, bad, err)
		}
	}
}
