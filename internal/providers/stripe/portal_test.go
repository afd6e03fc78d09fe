package stripe_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/portal"
	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// The billing-portal links of the test receivers: two keys, the second an
// older one still opening the links it sealed.
var (
	portalKey    = []byte("portal link key of the tests 32b")
	oldPortalKey = []byte("an older key, being rotated out!")
	portalSecret = base64.StdEncoding.EncodeToString(portalKey) + "," + base64.StdEncoding.EncodeToString(oldPortalKey)
)

// PortalEnv is the environment of a receiver whose emails link to the
// billing portal of the Stripe fake api.
func portalEnv(api *stripetest.Server, uses string) []rt.Option {
	return []rt.Option{rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", api.URL),
		rt.Env("PUBLIC_URL", "https://pay.example.com"), rt.Env("PORTAL_LINK_SECRET", portalSecret),
		rt.Env("PORTAL_LINK_USES", uses), rt.Env("PORTAL_RETURN_URL", "https://shop.example.com/account"),
		rt.Env("TRUSTED_PROXIES", "127.0.0.1/32")}
}

var portalLink = regexp.MustCompile(`https://pay\.example\.com/billing/portal\?t=([A-Za-z0-9_-]+)`)

// follow sends GET /billing/portal?<query> from client.
func follow(t *testing.T, r *rt.Receiver, query, client string) (int, string, string) {
	t.Helper()
	res := r.Get(t, "/billing/portal?"+query, http.Header{"X-Forwarded-For": {client}})
	return res.Status, res.Header.Get("Location"), res.Body
}

// TestBillingPortalLinks: a customer email carries a link to the receiver,
// never the customer id; the link opens a fresh session of Stripe's billing
// portal (303 to it), PORTAL_LINK_USES times; a forged, an expired, a
// reused-past-its-limit link gets a page saying to ask for a new one, and
// no call to Stripe; a link sealed with an older key of the list opens.
func TestBillingPortalLinks(t *testing.T) {
	api := stripetest.New(t, thinKey)
	r := rt.New(t, providers.List(), portalEnv(api, "2")...)
	body := dunningEvent(t, "evt_portal_failed", "failed", "in_portal", time.Now())
	if res := r.Deliver(t, stripe.Spec, body, nil); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	msgs := r.SMTP.WaitFor(t, 1, 5*time.Second)
	text := msgs[0].Text()
	m := portalLink.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the dunning email has no billing-portal link:\n%s", text)
	}
	if strings.Contains(text, "cus_dunning") || strings.Contains(m[0], "cus_") {
		t.Errorf("the email names the customer id in clear:\n%s", text)
	}
	t.Logf("the dunning email's link: %s", m[0])
	token := m[1]
	calls := func() int { return len(api.PortalSessions()) }

	status, to, _ := follow(t, r, "t="+token, "198.51.100.1")
	sessions := api.PortalSessions()
	if status != http.StatusSeeOther || len(sessions) != 1 || to != sessions[0].URL || !strings.HasPrefix(to, api.URL+"/p/session/") {
		t.Fatalf("a good link: %d to %q, %d sessions %+v; want 303 to the fake's portal session", status, to, len(sessions), sessions)
	}
	if s := sessions[0]; s.Customer != "cus_dunning" || s.ReturnURL != "https://shop.example.com/account" {
		t.Errorf("the session opened: %+v, want cus_dunning returning to PORTAL_RETURN_URL", s)
	}

	keys, err := portal.NewKeys([][]byte{portalKey})
	if err != nil {
		t.Fatal(err)
	}
	expired, _ := keys.Seal(portal.Claims{Source: "stripe", Customer: "cus_dunning", Expires: time.Now().Add(-time.Minute)})
	otherKeys, _ := portal.NewKeys([][]byte{[]byte("somebody else's key, 32 bytes!!!")})
	otherKey, _ := otherKeys.Seal(portal.Claims{Source: "stripe", Customer: "cus_victim", Expires: time.Now().Add(time.Hour)})
	flipped := []byte(token)
	flipped[len(flipped)/2] ^= 1
	if flipped[len(flipped)/2] == '-' || flipped[len(flipped)/2] == '_' {
		flipped[len(flipped)/2] = 'A'
	}
	refusals := []struct {
		name, query string
		status      int
		says        string
	}{
		{"forged: a character changed", "t=" + string(flipped), http.StatusForbidden, "ask for a new link"},
		{"forged: sealed with another key", "t=" + otherKey, http.StatusForbidden, "ask for a new link"},
		{"forged: made up", "t=cus_victim", http.StatusForbidden, "ask for a new link"},
		{"forged: none", "", http.StatusForbidden, "ask for a new link"},
		{"forged: too long", "t=" + strings.Repeat("A", 4000), http.StatusForbidden, "ask for a new link"},
		{"expired", "t=" + expired, http.StatusGone, "This link has expired. Please ask for a new link"},
	}
	for i, c := range refusals {
		before := calls()
		status, to, page := follow(t, r, c.query, fmt.Sprintf("198.51.100.%d", 2+i))
		if status != c.status || to != "" || !strings.Contains(page, c.says) || calls() != before {
			t.Errorf("%s: %d to %q %q, %d calls; want %d, %q, no call", c.name, status, to, page, calls()-before, c.status, c.says)
		}
		t.Logf("%s: %d %s", c.name, status, strings.TrimSpace(page))
	}

	if status, _, _ := follow(t, r, "t="+token, "198.51.100.20"); status != http.StatusSeeOther {
		t.Errorf("the link's second use (PORTAL_LINK_USES=2): %d, want 303", status)
	}
	before := calls()
	status, to, page := follow(t, r, "t="+token, "198.51.100.21")
	if status != http.StatusGone || to != "" || !strings.Contains(page, "used as often as it may be") || calls() != before {
		t.Errorf("reused past its limit: %d to %q %q, %d calls; want 410 and no call", status, to, page, calls()-before)
	}
	t.Logf("reused past its limit: %d %s", status, strings.TrimSpace(page))

	oldKeys, _ := portal.NewKeys([][]byte{oldPortalKey})
	old, _ := oldKeys.Seal(portal.Claims{Source: "stripe", Customer: "cus_old", Expires: time.Now().Add(time.Hour)})
	if status, to, _ := follow(t, r, "t="+old, "198.51.100.30"); status != http.StatusSeeOther || !strings.HasPrefix(to, api.URL) {
		t.Errorf("a link sealed with the older key of PORTAL_LINK_SECRET: %d to %q, want 303", status, to)
	}

	t.Run("Throttled", func(t *testing.T) {
		var last int
		for range 6 {
			last, _, _ = follow(t, r, "t=forged", "192.0.2.99")
		}
		if last != http.StatusTooManyRequests {
			t.Errorf("six links a moment from one client: the last %d, want 429", last)
		}
	})
}
