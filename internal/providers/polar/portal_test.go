package polar_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
	polar "github.com/paywebhooks/receiver/internal/providers/polar"
	"github.com/paywebhooks/receiver/internal/providers/polar/polartest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestBillingPortalLink: with POLAR_API_KEY, PUBLIC_URL and
// PORTAL_LINK_SECRET set, the past-due email carries a link to the receiver
// that opens a customer session of Polar's portal for the subscription's
// customer (303 to the fake's customer_portal_url).
func TestBillingPortalLink(t *testing.T) {
	api := polartest.New(t, "polar_oat_receivertest_portal_0123456789")
	r := rt.New(t, providers.List(), rt.Env("POLAR_API_KEY", api.Token), rt.Env("POLAR_API_BASE", api.URL), rt.Env("PUBLIC_URL", "https://pay.example.com"),
		rt.Env("PORTAL_LINK_SECRET", "cG9sYXIgcG9ydGFsIGxpbmsga2V5LCAzMiBieXRlcyE="),
		rt.Env("PORTAL_RETURN_URL", "https://shop.example.com/account"))
	if res := r.Deliver(t, polar.Spec, suite.Body(t, pastDue), nil); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	text := r.SMTP.WaitFor(t, 1, 5*time.Second)[0].Text()
	m := regexp.MustCompile(`https://pay\.example\.com(/billing/portal\?t=[A-Za-z0-9_-]+)`).FindStringSubmatch(text)
	if m == nil || strings.Contains(text, "9b2d4c1e") {
		t.Fatalf("the past-due email has no link, or names the customer:\n%s", text)
	}
	t.Logf("as sent to the SMTP sink:\n%s", text)
	res := r.Get(t, m[1], nil)
	sessions := api.PortalSessions()
	if res.Status != http.StatusSeeOther || len(sessions) != 1 || res.Header.Get("Location") != sessions[0].URL ||
		sessions[0].Customer != "9b2d4c1e-7a3f-4e8b-8c5d-1f6e2a7b3c04" || sessions[0].ReturnURL != "https://shop.example.com/account" {
		t.Errorf("the link: %d to %q; sessions %+v", res.Status, res.Header.Get("Location"), sessions)
	}
}
