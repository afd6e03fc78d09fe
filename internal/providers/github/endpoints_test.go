package github_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/endpoints/endpointstest"
	"github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/providers/github/githubtest"
)

// TestEndpoints: GitHub's events the receiver acts on are set up where no
// API shows (the Marketplace listing's and the Sponsors dashboard's
// webhooks), so an App whose webhook sends elsewhere, or that has none, is
// right, and the summary says what to check by hand; an App webhook that
// sends here is checked for the events it sends that nothing handles (a
// note) and for a TLS check turned off (a problem), which --fix leaves to
// the operator; another URL's webhook is left alone.
func TestEndpoints(t *testing.T) {
	target := endpoints.Target{Spec: github.Spec, Provider: github.Endpoints}
	here := endpointstest.PublicURL + github.Spec.Route()
	for _, tc := range []struct {
		name  string
		hook  githubtest.AppHook
		kinds []endpoints.Kind
		ok    bool
		line  string
	}{
		{"NoWebhook", githubtest.AppHook{}, nil, true, "github: nothing this API shows sends to " + here + ": right; marketplace_purchase and sponsorship"},
		{"ElsewhereIsRight", githubtest.AppHook{URL: "https://ci.example.com/github", Events: []string{"push"}}, nil, true,
			"github: nothing this API shows sends to " + here + " (1 other sends elsewhere, left alone): right; marketplace_purchase"},
		{"HereSendsUnhandled", githubtest.AppHook{URL: here, Events: []string{"installation", "push"}},
			[]endpoints.Kind{endpoints.KindUnhandled}, true, "github app (note): sends 2 event types nothing here handles: installation, push"},
		{"HereWithoutTLSCheck", githubtest.AppHook{URL: here, InsecureSSL: true}, []endpoints.Kind{"tls"}, false,
			"github app: does not verify this receiver's TLS certificate (insecure_ssl 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := githubtest.New(t, testAppID)
			gh.SetAppHook(tc.hook)
			env := map[string]string{"GITHUB_APP_ID": strconv.FormatInt(testAppID, 10), "GITHUB_APP_PRIVATE_KEY": string(gh.PrivateKeyPEM()),
				"GITHUB_API_URL": strings.TrimSuffix(gh.URL, "/"), "GITHUB_WEBHOOK_SECRET": "github_endpoints_test_secret_0123456789"}
			r := endpointstest.Check(t, target, env, endpoints.Options{Fix: true, Create: true}, 0)
			var got []endpoints.Kind
			for _, f := range r.Findings {
				got = append(got, f.Kind)
			}
			out := endpointstest.Text(t, r)
			if !slices.Equal(got, tc.kinds) || r.OK() != tc.ok || len(r.Changes)+len(r.Created) != 0 {
				t.Errorf("findings %v, OK %v, changes %+v, created %+v; want %v, OK %v, nothing changed\n%s",
					got, r.OK(), r.Changes, r.Created, tc.kinds, tc.ok, out)
			}
			if !strings.Contains(out, tc.line) {
				t.Errorf("the report lacks %q:\n%s", tc.line, out)
			}
		})
	}
}
