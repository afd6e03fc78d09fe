package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// TestPeriodicEndpointAlert: the periodic endpoint check, as the server
// wires it, hands what it finds to the alerts' monitor, which tells each
// finding once an hour: two runs within the hour, one alert per finding;
// the next hour, again; once the endpoint is put right, nothing more. The
// check holds its lock while it runs: another replica's run is busy.
func TestPeriodicEndpointAlert(t *testing.T) {
	var mu sync.Mutex
	var got []string // the texts the alert webhook received
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, body.Text)
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	texts := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}

	api := stripetest.New(t, "rk_test_endpoints_0123456789")
	we := api.AddWebhookEndpoint(stripetest.WebhookEndpoint{URL: "https://pay.example.com/webhooks/stripe", Status: "disabled",
		EnabledEvents: stripe.Spec.Types, APIVersion: stripe.APIVersion})
	pool := pgtest.NewPool(t)
	env := map[string]string{"DATABASE_URL": "postgres://receiver@localhost:5432/receiver", "PUBLIC_URL": "https://pay.example.com",
		"RECONCILE_INTERVAL": "15m", "ALERT_WEBHOOK_URL": sink.URL, "STRIPE_WEBHOOK_SECRET": stripe.Spec.Secret.DevValue("periodic_0123456789abcdef"),
		"STRIPE_API_KEY": api.Key, "STRIPE_API_BASE": api.URL}
	cfg, err := wiring.Load(func(k string) string { return env[k] }, []webhooks.Spec{stripe.Spec})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	kinds := webhooks.StepKinds{alerts.KindWebhook: alerts.WebhookKind{URL: cfg.AlertWebhookURL}}
	proc := NewProcessor(cfg, pool, kinds, webhooks.NewMetrics(prometheus.NewRegistry()), log)
	now := time.Now().UTC().Truncate(time.Hour).Add(time.Minute)
	mon := &alerts.Monitor{DB: pool, Runner: proc, Channels: alerts.Channels(cfg.AlertWebhookURL, ""), Log: log,
		Metrics: alerts.NewMetrics(prometheus.NewRegistry()), Now: func() time.Time { return now }}
	s := &Server{cfg: cfg, pool: pool, monitor: mon, log: log}
	job := s.endpointsJob([]webhooks.Spec{stripe.Spec}, []endpoints.Provider{stripe.Endpoints})
	job.Now = mon.Now
	ctx := context.Background()
	endpointAlerts := func() []string {
		t.Helper()
		raised, err := mon.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range raised {
			if a.Cause == alerts.CauseEndpoint {
				out = append(out, a.Subject)
			}
		}
		return out
	}
	run := func() reconcile.Tally {
		t.Helper()
		tally, err := job.Run(ctx)
		if err != nil {
			t.Fatalf("periodic check: %v", err)
		}
		return tally
	}

	if tally := run(); tally.Unresolved != 1 || tally.Found != 1 {
		t.Fatalf("the run's tally: %+v, want 1 endpoint, 1 problem", tally)
	}
	wantSubject := "stripe:disabled:" + we.ID
	if a := endpointAlerts(); !slices.Equal(a, []string{wantSubject}) {
		t.Fatalf("the first run raised %v, want %s", a, wantSubject)
	}
	now = now.Add(20 * time.Minute)
	run()
	if a := endpointAlerts(); len(a) != 0 {
		t.Errorf("the second run within the hour raised %v, want nothing", a)
	}
	if n := len(texts()); n != 1 {
		t.Errorf("the alert webhook received %d alerts in the hour, want 1", n)
	}
	if text := texts()[0]; !strings.Contains(text, "[paywebhooks] stripe endpoint "+we.ID+": disabled\nstripe "+we.ID+": disabled (status disabled): stripe sends it nothing") ||
		!strings.Contains(text, "--fix") {
		t.Errorf("the alert's text:\n%s", text)
	} else {
		t.Logf("the endpoint alert:\n%s", text)
	}

	now = now.Add(time.Hour)
	run()
	if a := endpointAlerts(); !slices.Equal(a, []string{wantSubject}) {
		t.Errorf("the next hour raised %v, want %s again", a, wantSubject)
	}

	// Another replica's run holds the lock: this one is busy.
	release, err := reconcile.NewStore(pool).Lock(ctx, endpoints.LockName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(ctx); !errors.Is(err, reconcile.ErrBusy) {
		t.Errorf("a run while another holds the lock: %v, want ErrBusy", err)
	}
	release()

	// Put right, it is told no more.
	api.DeleteWebhookEndpoint(we.ID)
	api.AddWebhookEndpoint(stripetest.WebhookEndpoint{URL: "https://pay.example.com/webhooks/stripe",
		EnabledEvents: stripe.Spec.Types, APIVersion: stripe.APIVersion})
	if tally := run(); tally.Unresolved != 0 {
		t.Errorf("put right, the run found %d problems", tally.Unresolved)
	}
	now = now.Add(time.Hour)
	if a := endpointAlerts(); len(a) != 0 {
		t.Errorf("put right, the next hour raised %v", a)
	}
	// A check that stops running tells nothing past two intervals.
	api.DeleteWebhookEndpoint(api.WebhookEndpoints()[0].ID)
	run()
	now = now.Add(31 * time.Minute)
	if a := endpointAlerts(); len(a) != 0 {
		t.Errorf("two intervals after the last run, raised %v", a)
	}
}

// TestPeriodicEndpointCheckWiring: the check runs beside the server only
// with RECONCILE_INTERVAL, PUBLIC_URL and a provider's API key, and the
// log says why it does not otherwise.
func TestPeriodicEndpointCheckWiring(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://receiver@localhost:5432/receiver", "PUBLIC_URL": "https://pay.example.com",
		"RECONCILE_INTERVAL": "15m", "STRIPE_API_KEY": "rk_test_wiring_0123456789"}
	for _, tc := range []struct {
		name, unset string
		on          bool
		log         string
	}{
		{"On", "", true, "periodic endpoint check on"},
		{"NoInterval", "RECONCILE_INTERVAL", false, ""},
		{"NoPublicURL", "PUBLIC_URL", false, "periodic endpoint check off: PUBLIC_URL is unset"},
		{"NoAPIKey", "STRIPE_API_KEY", false, "periodic endpoint check off: no provider's API key is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := wiring.Load(func(k string) string {
				if k == tc.unset {
					return ""
				}
				return base[k]
			}, []webhooks.Spec{stripe.Spec})
			if err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			s := &Server{cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil))}
			s.setupEndpoints([]webhooks.Spec{stripe.Spec}, []endpoints.Provider{stripe.Endpoints})
			if on := len(s.background) == 1; on != tc.on || !strings.Contains(logs.String(), tc.log) {
				t.Errorf("running: %v, want %v; log:\n%s", on, tc.on, logs.String())
			}
		})
	}
}
