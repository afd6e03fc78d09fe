package polar_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/endpoints/endpointstest"
	"github.com/paywebhooks/receiver/internal/providers/polar"
	"github.com/paywebhooks/receiver/internal/providers/polar/polartest"
)

// TestEndpoints holds Polar's endpoint settings to the suite every
// provider's pass (endpointstest), against the fake's webhook endpoints.
// Polar's endpoints have no API version.
func TestEndpoints(t *testing.T) {
	endpointstest.Run(t, func(t *testing.T) endpointstest.Fake {
		api := polartest.New(t, polarToken)
		find := func(id string) (polartest.WebhookEndpoint, bool) {
			all := api.Endpoints()
			i := slices.IndexFunc(all, func(we polartest.WebhookEndpoint) bool { return we.ID == id })
			if i < 0 {
				return polartest.WebhookEndpoint{}, false
			}
			return all[i], true
		}
		return endpointstest.Fake{
			Target: endpoints.Target{Spec: polar.Spec, Provider: polar.Endpoints},
			Env: map[string]string{"POLAR_API_KEY": polarToken, "POLAR_API_BASE": api.URL,
				"POLAR_WEBHOOK_SECRET": "whsec_endpoints_test_0123456789abcdef"},
			Add: func(ep endpoints.Endpoint) string {
				return api.AddEndpoint(polartest.WebhookEndpoint{URL: ep.URL, Enabled: ep.Enabled, Events: ep.Events}).ID
			},
			Get: func(id string) (endpoints.Endpoint, bool) {
				we, ok := find(id)
				return endpoints.Endpoint{ID: we.ID, URL: we.URL, Enabled: we.Enabled, Events: we.Events}, ok
			},
			List: func() []string {
				var ids []string
				for _, we := range api.Endpoints() {
					ids = append(ids, we.ID)
				}
				return ids
			},
			Delete: api.DeleteEndpoint,
			Listings: func() int {
				n := 0
				for _, r := range api.Requests() {
					if r.Query.Has("page") && !r.Query.Has("endpoint_id") {
						n++
					}
				}
				return n
			},
		}
	})
}

// TestChatFormatAndReconciledEndpoint: an endpoint in a chat format is a problem, and
// so is this receiver's endpoint when POLAR_WEBHOOK_ENDPOINT_ID names
// another (the catch-up would read another endpoint's deliveries); the
// listing never keeps an endpoint's secret.
func TestChatFormatAndReconciledEndpoint(t *testing.T) {
	api := polartest.New(t, polarToken)
	we := api.AddEndpoint(polartest.WebhookEndpoint{URL: endpointstest.PublicURL + polar.Spec.Route(), Format: "slack", Enabled: true,
		Events: polar.Spec.Types})
	env := map[string]string{"POLAR_API_KEY": polarToken, "POLAR_API_BASE": api.URL, "POLAR_WEBHOOK_SECRET": "whsec_endpoints_test_0123456789abcdef",
		"POLAR_WEBHOOK_ENDPOINT_ID": "00000000-0000-4000-8000-000000000000"}
	r := endpointstest.Check(t, endpoints.Target{Spec: polar.Spec, Provider: polar.Endpoints}, env, endpoints.Options{}, 0)
	out := endpointstest.Text(t, r)
	if len(r.Findings) != 2 || r.Findings[0].Kind != "format" || r.Findings[1].Kind != "catch_up" || r.OK() {
		t.Fatalf("findings %+v\n%s", r.Findings, out)
	}
	if !strings.Contains(out, `sends in the "slack" format`) || !strings.Contains(out, "POLAR_WEBHOOK_ENDPOINT_ID names") {
		t.Errorf("the lines:\n%s", out)
	}
	if strings.Contains(out, we.Secret) || strings.Contains(fmt.Sprintf("%+v", r), we.Secret) {
		t.Errorf("the report holds the endpoint's secret")
	}
	env["POLAR_WEBHOOK_ENDPOINT_ID"] = we.ID
	api.DeleteEndpoint(we.ID)
	api.AddEndpoint(polartest.WebhookEndpoint{ID: we.ID, URL: we.URL, Enabled: true, Events: polar.Spec.Types})
	if r := endpointstest.Check(t, endpoints.Target{Spec: polar.Spec, Provider: polar.Endpoints}, env, endpoints.Options{}, 0); !r.OK() {
		t.Errorf("raw, and the endpoint named: %+v", r.Findings)
	}
}
