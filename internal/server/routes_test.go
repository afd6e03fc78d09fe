package server_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/version"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// specOf is the registry's provider of source.
func specOf(t *testing.T, source string) webhooks.Spec {
	t.Helper()
	i := slices.IndexFunc(providers.All(), func(s webhooks.Spec) bool { return s.Source == source })
	if i < 0 {
		t.Fatalf("no provider %q in the registry", source)
	}
	return providers.All()[i]
}

// TestWebhookRouteTrailingSlash: a delivery to /webhooks/stripe/ (a
// --forward-to URL typed with a slash; the Stripe CLI follows no
// redirect) is the route's own delivery, answered and counted as the
// route's; other paths under /webhooks/ stay 404 and name the mounted
// routes without echoing the request.
func TestWebhookRouteTrailingSlash(t *testing.T) {
	r := rt.New(t, providers.List())
	stripe := specOf(t, "stripe")
	body := stripeEvent("evt_slash", "invoice.created", `{"id":"in_slash","amount_due":5,"currency":"usd"}`)
	res := r.Post(t, "/webhooks/stripe/", rt.Signed(stripe, body, nil), body)
	if res.Status != 200 || !strings.Contains(res.Body, `"processed"`) {
		t.Fatalf("POST /webhooks/stripe/ = %d %s, want 200 processed", res.Status, res.Body)
	}
	if res := r.Post(t, "/webhooks/stripe", rt.Signed(stripe, body, nil), body); res.Status != 200 || !strings.Contains(res.Body, `"duplicate"`) {
		t.Fatalf("the same event at /webhooks/stripe = %d %s, want 200 duplicate", res.Status, res.Body)
	}
	if n := r.Count(t, `SELECT count(*) FROM invoices`); n != 1 {
		t.Errorf("invoices = %d, want 1", n)
	}
	value := scrape(t, r.URL+"/metrics")
	if got := value("http_request_duration_seconds", map[string]string{"route": "/webhooks/stripe", "code": "200"}); got != 2 {
		t.Errorf(`http_request_duration_seconds{route="/webhooks/stripe",code="200"} count = %v, want 2 (both paths)`, got)
	}

	var mounted []string
	for _, s := range providers.All() {
		mounted = append(mounted, "POST "+s.Route())
	}
	for _, path := range []string{"/webhooks/stripe//", "/webhooks/strip", "/webhooks/stripe/x", "/webhooks/", "/webhooks", "/webhooks/%3Cscript%3E"} {
		res := r.Post(t, path, rt.Signed(stripe, body, nil), body)
		if res.Status != http.StatusNotFound {
			t.Errorf("POST %s = %d, want 404", path, res.Status)
			continue
		}
		var got struct {
			Error  string   `json:"error"`
			Routes []string `json:"webhook_routes"`
			Hint   string   `json:"hint"`
		}
		if err := json.Unmarshal([]byte(res.Body), &got); err != nil {
			t.Fatalf("POST %s: 404 body %q is not JSON: %v", path, res.Body, err)
		}
		if diff := cmp.Diff(mounted, got.Routes); diff != "" || got.Error != "Not Found" {
			t.Errorf("POST %s: 404 %s; routes (-want +got):\n%s", path, res.Body, diff)
		}
		if strings.Contains(res.Body, "script") || strings.Contains(res.Body, "strip\"") || strings.Contains(res.Body, "/x") {
			t.Errorf("POST %s: the 404 echoes the request: %s", path, res.Body)
		}
	}
	// Elsewhere a 404 is the plain one.
	if res := r.Post(t, "/nope", http.Header{}, nil); res.Status != 404 || strings.Contains(res.Body, "webhook_routes") {
		t.Errorf("POST /nope = %d %s, want the plain 404", res.Status, res.Body)
	}
}

// TestWebhookNotFoundNamesOnlyMounted: a 404 under /webhooks/ names the
// routes this configuration mounts, not the registry's.
func TestWebhookNotFoundNamesOnlyMounted(t *testing.T) {
	ts := newServer(t, pgtest.NewDB(t)) // a Stripe secret only
	code, body := get(t, ts.URL+"/webhooks/github")
	if code != 404 || !strings.Contains(body, `"webhook_routes":["POST /webhooks/stripe"]`) {
		t.Fatalf("GET /webhooks/github = %d %s, want 404 naming POST /webhooks/stripe alone", code, body)
	}
}

// TestBuildInfo: /metrics says which build runs, as
// paywebhooks_build_info{version,goversion} 1.
func TestBuildInfo(t *testing.T) {
	r := rt.New(t, providers.List())
	v := version.Get()
	value := scrape(t, r.URL+"/metrics")
	if v.Version == "" || v.GoVersion != runtime.Version() {
		t.Fatalf("version.Get() = %+v", v)
	}
	if got := value("paywebhooks_build_info", map[string]string{"version": v.Version, "goversion": v.GoVersion}); got != 1 {
		t.Errorf("paywebhooks_build_info{version=%q,goversion=%q} = %v, want 1", v.Version, v.GoVersion, got)
	}
}
