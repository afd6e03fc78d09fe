package paddle_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/endpoints/endpointstest"
	"github.com/paywebhooks/receiver/internal/providers/paddle"
	"github.com/paywebhooks/receiver/internal/providers/paddle/paddletest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestEndpoints holds Paddle's endpoint settings to the suite every
// provider's pass (endpointstest), against the fake's notification
// settings.
func TestEndpoints(t *testing.T) {
	endpointstest.Run(t, func(t *testing.T) endpointstest.Fake {
		api := paddletest.New(t, paddleKey)
		find := func(id string) (paddletest.NotificationSetting, bool) {
			all := api.NotificationSettings()
			i := slices.IndexFunc(all, func(n paddletest.NotificationSetting) bool { return n.ID == id })
			if i < 0 {
				return paddletest.NotificationSetting{}, false
			}
			return all[i], true
		}
		return endpointstest.Fake{
			Target: endpoints.Target{Spec: paddle.Spec, Provider: paddle.Endpoints},
			Env: map[string]string{"PADDLE_API_KEY": paddleKey, "PADDLE_API_BASE": api.URL,
				"PADDLE_WEBHOOK_SECRET": rt.Secret(paddle.Spec)},
			Add: func(ep endpoints.Endpoint) string {
				v, _ := strconv.Atoi(ep.Version)
				return api.AddNotificationSetting(paddletest.NotificationSetting{Destination: ep.URL, Active: ep.Enabled,
					SubscribedEvents: ep.Events, APIVersion: v}).ID
			},
			Get: func(id string) (endpoints.Endpoint, bool) {
				n, ok := find(id)
				return endpoints.Endpoint{ID: n.ID, URL: n.Destination, Enabled: n.Active, Events: n.SubscribedEvents,
					Version: strconv.Itoa(n.APIVersion)}, ok
			},
			List: func() []string {
				var ids []string
				for _, n := range api.NotificationSettings() {
					ids = append(ids, n.ID)
				}
				return ids
			},
			Delete: api.DeleteNotificationSetting,
			Listings: func() int {
				n := 0
				for _, r := range api.Requests() {
					if r.Method == http.MethodGet && r.Path == "/notification-settings" {
						n++
					}
				}
				return n
			},
			OtherVersion: "2",
		}
	})
}

// TestSimulationOnly: a destination that receives simulated events only is
// a problem; the listing never keeps a destination's secret key.
func TestSimulationOnly(t *testing.T) {
	api := paddletest.New(t, paddleKey)
	n := api.AddNotificationSetting(paddletest.NotificationSetting{Destination: endpointstest.PublicURL + paddle.Spec.Route(), Active: true,
		SubscribedEvents: paddle.Spec.Types, TrafficSource: "simulation"})
	env := map[string]string{"PADDLE_API_KEY": paddleKey, "PADDLE_API_BASE": api.URL, "PADDLE_WEBHOOK_SECRET": rt.Secret(paddle.Spec)}
	r := endpointstest.Check(t, endpoints.Target{Spec: paddle.Spec, Provider: paddle.Endpoints}, env, endpoints.Options{}, 0)
	out := endpointstest.Text(t, r)
	if len(r.Findings) != 1 || r.Findings[0].Kind != "traffic" || r.OK() || !strings.Contains(out, "receives simulated events only") {
		t.Fatalf("findings %+v\n%s", r.Findings, out)
	}
	if strings.Contains(out, n.SecretKey) || strings.Contains(fmt.Sprintf("%+v", r), n.SecretKey) {
		t.Errorf("the report holds the destination's secret key")
	}
}
