package paddle_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
	paddle "github.com/paywebhooks/receiver/internal/providers/paddle"
	"github.com/paywebhooks/receiver/internal/providers/paddle/paddletest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestBillingPortalLink: with PADDLE_API_KEY, PUBLIC_URL and
// PORTAL_LINK_SECRET set, the confirmation carries a link to the receiver
// that opens a session of Paddle's customer portal for the transaction's
// customer (303 to the fake's portal URL).
func TestBillingPortalLink(t *testing.T) {
	api := paddletest.New(t, "pdl_apikey_receivertest_portal_01")
	r := rt.New(t, providers.List(), rt.Env("PADDLE_API_KEY", api.Key), rt.Env("PADDLE_API_BASE", api.URL), rt.Env("PUBLIC_URL", "https://pay.example.com"),
		rt.Env("PORTAL_LINK_SECRET", "cGFkZGxlIHBvcnRhbCBsaW5rIGtleSwgMzIgYnl0ZXM="))
	if res := r.Deliver(t, paddle.Spec, rt.Fixture(t, completed), nil); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	text := r.SMTP.WaitFor(t, 1, 5*time.Second)[0].Text()
	m := regexp.MustCompile(`https://pay\.example\.com(/billing/portal\?t=[A-Za-z0-9_-]+)`).FindStringSubmatch(text)
	if m == nil || strings.Contains(text, "ctm_") {
		t.Fatalf("the confirmation has no link, or names the customer:\n%s", text)
	}
	res := r.Get(t, m[1], nil)
	sessions := api.PortalSessions()
	if res.Status != http.StatusSeeOther || len(sessions) != 1 || res.Header.Get("Location") != sessions[0].URL ||
		sessions[0].Customer != "ctm_01jpm5q1nxw1rnj47e65gh2bh8" {
		t.Errorf("the link: %d to %q; sessions %+v", res.Status, res.Header.Get("Location"), sessions)
	}
}
