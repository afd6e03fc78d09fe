package stripe_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/endpoints/endpointstest"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestEndpoints holds Stripe's endpoint settings to the suite every
// provider's pass (endpointstest), against the fake's webhook endpoints.
func TestEndpoints(t *testing.T) {
	endpointstest.Run(t, func(t *testing.T) endpointstest.Fake {
		api := stripetest.New(t, stripeKey)
		find := func(id string) (stripetest.WebhookEndpoint, bool) {
			i := slices.IndexFunc(api.WebhookEndpoints(), func(we stripetest.WebhookEndpoint) bool { return we.ID == id })
			if i < 0 {
				return stripetest.WebhookEndpoint{}, false
			}
			return api.WebhookEndpoints()[i], true
		}
		return endpointstest.Fake{
			Target: endpoints.Target{Spec: stripe.Spec, Provider: stripe.Endpoints},
			Env: map[string]string{"STRIPE_API_KEY": stripeKey, "STRIPE_API_BASE": api.URL, "STRIPE_LIVEMODE": "false",
				"STRIPE_WEBHOOK_SECRET": rt.Secret(stripe.Spec)},
			Add: func(ep endpoints.Endpoint) string {
				status := "enabled"
				if !ep.Enabled {
					status = "disabled"
				}
				return api.AddWebhookEndpoint(stripetest.WebhookEndpoint{URL: ep.URL, Status: status, EnabledEvents: ep.Events,
					APIVersion: ep.Version}).ID
			},
			Get: func(id string) (endpoints.Endpoint, bool) {
				we, ok := find(id)
				return endpoints.Endpoint{ID: we.ID, URL: we.URL, Enabled: we.Status == "enabled", Events: we.EnabledEvents,
					Version: we.APIVersion}, ok
			},
			List: func() []string {
				var ids []string
				for _, we := range api.WebhookEndpoints() {
					ids = append(ids, we.ID)
				}
				return ids
			},
			Delete: api.DeleteWebhookEndpoint,
			Listings: func() int {
				n := 0
				for _, r := range api.Requests() {
					if r.Method == http.MethodGet && r.Path == "/v1/webhook_endpoints" {
						n++
					}
				}
				return n
			},
			OtherVersion: "2024-06-20",
		}
	})
}

// TestEndpointOfAnotherMode: an endpoint of another mode than the one
// acted on is a problem --fix leaves to the operator; one that sends every
// type ("*") lacks none, and is a note; --fix keeps "*" when it adds.
func TestEndpointOfAnotherMode(t *testing.T) {
	api := stripetest.New(t, stripeKey)
	here := endpointstest.PublicURL + stripe.Spec.Route()
	api.AddWebhookEndpoint(stripetest.WebhookEndpoint{URL: here, EnabledEvents: []string{"*"}, APIVersion: stripe.APIVersion, Livemode: true})
	env := map[string]string{"STRIPE_API_KEY": stripeKey, "STRIPE_API_BASE": api.URL, "STRIPE_LIVEMODE": "false",
		"STRIPE_WEBHOOK_SECRET": rt.Secret(stripe.Spec)}
	r := endpointstest.Check(t, endpoints.Target{Spec: stripe.Spec, Provider: stripe.Endpoints}, env, endpoints.Options{Fix: true}, 0)
	out := endpointstest.Text(t, r)
	if len(r.Findings) != 2 || r.Findings[0].Kind != "mode" || r.Findings[1].Kind != endpoints.KindUnhandled || r.OK() || len(r.Changes) != 0 {
		t.Fatalf("findings %+v, changes %+v\n%s", r.Findings, r.Changes, out)
	}
	if !strings.Contains(out, "a live-mode endpoint, and only test-mode events are acted on (STRIPE_LIVEMODE, else the mode of STRIPE_API_KEY)") ||
		!strings.Contains(out, "sends every event type (*)") {
		t.Errorf("the lines:\n%s", out)
	}
}
