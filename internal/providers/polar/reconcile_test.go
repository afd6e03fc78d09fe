package polar_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/providers/polar"
	"github.com/paywebhooks/receiver/internal/providers/polar/polartest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

const (
	polarToken    = "polar_oat_reconcile_test_token_012345"
	endpoint      = "4a1b2c3d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
	otherEndpoint = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
)

// orderPaidBody is the fixture's order.paid for another order and address.
func orderPaidBody(t *testing.T, id, email string) []byte {
	return rt.Fixture(t, paid, orderA, id, "buyer@example.com", email)
}

// TestReconcileWithTheRealProcessor: what a reconciliation writes and sends is
// what deliveries of the same events write and send, once. An event
// delivered is known by its webhook-id; one whose every delivery failed is
// processed through the Polar provider, with the body Polar sent; an event
// with several deliveries is one event; another endpoint's deliveries and
// deliveries outside the window are not listed; an archived event is
// skipped, visibly. The next run resumes where this one ended.
func TestReconcileWithTheRealProcessor(t *testing.T) {
	r := rt.New(t, providers.List(), suite.Options...)
	api := polartest.New(t, polarToken)
	now := time.Now().Truncate(time.Second)

	deliveredBody := orderPaidBody(t, "11111111-1111-4111-8111-111111111111", "a@example.com")
	delivered := api.Add(endpoint, "order.paid", deliveredBody, true, now.Add(-50*time.Minute))
	missedBody := orderPaidBody(t, "22222222-2222-4222-8222-222222222222", "b@example.com")
	missed := api.Add(endpoint, "order.paid", missedBody, false,
		now.Add(-40*time.Minute), now.Add(-40*time.Minute+4*time.Second), now.Add(-40*time.Minute+12*time.Second))
	ignored := api.Add(endpoint, "checkout.created", rt.Fixture(t, checkout), false, now.Add(-30*time.Minute))
	archived := api.Add(endpoint, "order.paid", orderPaidBody(t, "33333333-3333-4333-8333-333333333333", "c@example.com"), false,
		now.Add(-20*time.Minute))
	api.Archive(archived)
	api.Add(otherEndpoint, "order.paid", missedBody, true, now.Add(-40*time.Minute)) // the same event, to another endpoint
	api.Add(endpoint, "order.paid", orderPaidBody(t, "44444444-4444-4444-8444-444444444444", "d@example.com"), false,
		now.Add(-3*time.Hour)) // outside the window

	// The delivery of the first, under its webhook-id.
	h := polar.Spec.Sign(webhooks.SignInput{Body: deliveredBody, Secret: rt.Secret(polar.Spec), At: time.Now(), ID: delivered.ID})
	if res := r.Post(t, polar.Spec.Route(), h, deliveredBody); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}

	client, err := polar.NewAPI(polar.APIConfig{Token: polarToken, BaseURL: api.URL, Endpoint: endpoint, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	store := reconcile.NewStore(r.Pool)
	clock := now
	rec := polar.Events(client, polar.New([]string{rt.Secret(polar.Spec)}), r.Server.Processor(), store)
	rec.Log, rec.Now = reconciletest.Log(t), func() time.Time { return clock }

	var reports []string
	sum, err := rec.Run(context.Background(), reconcile.Options{Since: time.Hour, OnEvent: func(e reconcile.EventReport) {
		reports = append(reports, e.ID+" "+e.Type+" "+string(e.Disposition))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 4 || sum.Known != 1 || sum.Processed != 1 || sum.Ignored != 1 || sum.Unreadable != 1 || sum.Missed() != 1 {
		t.Errorf("summary %+v", sum)
	}
	want := []string{delivered.ID + " order.paid known", missed.ID + " order.paid processed",
		ignored.ID + " checkout.created ignored", archived.ID + " order.paid unreadable"}
	if diff := cmp.Diff(want, reports); diff != "" {
		t.Errorf("events, oldest first (-want +got):\n%s", diff)
	}
	for _, q := range api.Requests() {
		if q.Query.Get("endpoint_id") != endpoint || q.Query.Get("end_timestamp") == "" || q.Query.Get("limit") != "2" {
			t.Errorf("request %v: want the endpoint's deliveries within a closed window, 2 a page", q.Query)
		}
	}
	if n := len(api.Requests()); n != 3 { // 6 deliveries in the window, 2 a page
		t.Errorf("%d requests, want 3", n)
	}
	var via string
	var stored []byte
	if err := r.Pool.QueryRow(context.Background(), `SELECT via, body FROM processed_events WHERE event_key = $1`, missed.ID).
		Scan(&via, &stored); err != nil || via != "reconcile" || string(stored) != string(missedBody) {
		t.Errorf("the missed event's claim: via %q, %v; body as sent: %v", via, err, string(stored) == string(missedBody))
	}
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE source = 'polar' AND status = 'paid'`); n != 2 {
		t.Errorf("%d paid orders, want 2", n)
	}
	r.SMTP.WaitFor(t, 2, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND status = 'in_progress'`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("steps still in progress after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(r.API.Requests()); n != 2 {
		t.Errorf("%d fulfillment calls, want 2 (one per order)", n)
	}

	t.Run("ResumeFromTheWindowsEnd", func(t *testing.T) {
		before := r.Snapshot(t)
		clock = now.Add(10 * time.Minute)
		late := api.Add(endpoint, "order.paid", orderPaidBody(t, "55555555-5555-4555-8555-555555555555", "e@example.com"), false,
			now.Add(5*time.Minute))
		sum, err := rec.Run(context.Background(), reconcile.Options{Resume: true})
		if err != nil || sum.Found != 1 || sum.Processed != 1 || !sum.From.Created.Equal(now.Add(-time.Second)) {
			t.Fatalf("%+v %v; want the new delivery alone, from where the last window ended (less a second)", sum, err)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key = $1 AND via = 'reconcile'`, late.ID); n != 1 {
			t.Errorf("the late event: %d claims", n)
		}
		if n := len(r.Snapshot(t)) - len(before); n != 1 {
			t.Errorf("%d rows more, want the late order", n)
		}
	})
	t.Run("SecondRunChangesNothing", func(t *testing.T) {
		before, emails := r.Snapshot(t), len(r.SMTP.Messages())
		sum, err := rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour})
		if err != nil || sum.Known != 4 || sum.Processed != 0 || sum.Unreadable != 1 {
			t.Errorf("%+v %v", sum, err)
		}
		if diff := cmp.Diff(before, r.Snapshot(t)); diff != "" {
			t.Errorf("state changed (-before +after):\n%s", diff)
		}
		if n := len(r.SMTP.Messages()); n != emails {
			t.Errorf("%d emails, want %d", n, emails)
		}
	})
	t.Run("DryRunWritesNothing", func(t *testing.T) {
		ghost := api.Add(endpoint, "order.paid", orderPaidBody(t, "66666666-6666-4666-8666-666666666666", "f@example.com"), false,
			clock.Add(-time.Minute))
		runs := r.Count(t, `SELECT count(*) FROM reconcile_runs`)
		sum, err := rec.Run(context.Background(), reconcile.Options{Since: time.Hour, DryRun: true})
		if err != nil || sum.WouldProcess != 1 {
			t.Errorf("%+v %v", sum, err)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key = $1`, ghost.ID); n != 0 {
			t.Errorf("a dry run claimed the event")
		}
		if n := r.Count(t, `SELECT count(*) FROM reconcile_runs`); n != runs {
			t.Errorf("a dry run recorded a run")
		}
	})
}

// TestReconcileAPIErrors: a refused token stops the run at once, with
// Polar's answer, and moves no cursor; a 5xx is tried again.
func TestReconcileAPIErrors(t *testing.T) {
	api := polartest.New(t, polarToken)
	api.Add(endpoint, "order.paid", rt.Fixture(t, paid), true, time.Now().Add(-time.Minute))
	q := reconcile.Window{Until: time.Now()}

	wrong, err := polar.NewAPI(polar.APIConfig{Token: "polar_oat_not_the_token_0123", BaseURL: api.URL, Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.Events(context.Background(), q)
	var ae *polar.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || len(api.Requests()) != 1 {
		t.Errorf("a refused token: %v after %d requests; want a 401 APIError, not retried", err, len(api.Requests()))
	}

	one := 1
	client, err := polar.NewAPI(polar.APIConfig{Token: polarToken, BaseURL: api.URL, Endpoint: endpoint, MaxRetries: &one})
	if err != nil {
		t.Fatal(err)
	}
	api.FailNext(http.StatusBadGateway)
	evs, err := client.Events(context.Background(), q)
	if err != nil || len(evs) != 1 {
		t.Errorf("after a 502: %d events, %v; want the one, the request tried again", len(evs), err)
	}
	if _, err := client.Events(context.Background(), reconcile.Window{}); err == nil {
		t.Error("a window without an end was listed")
	}
	if _, err := polar.NewAPI(polar.APIConfig{Token: polarToken, BaseURL: "http://polar.example"}); err == nil {
		t.Error("a token accepted for http:// to another host")
	}
}

// TestReconcilerConfiguration: `server reconcile polar` runs with an access
// token and the endpoint's id, both checked at start-up, and says which
// it lacks.
func TestReconcilerConfiguration(t *testing.T) {
	rec := polar.Reconciler
	if !rec.Takes("since") || !rec.Takes("resume") || rec.Takes("types") {
		t.Errorf("flags %v", rec.Flags)
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		env  func(string) string
		want string
	}{
		{env(), "POLAR_API_KEY is unset"},
		{env("POLAR_API_KEY", polarToken), "POLAR_WEBHOOK_ENDPOINT_ID is unset"},
		{env("POLAR_API_KEY", polarToken, "POLAR_WEBHOOK_ENDPOINT_ID", endpoint), ""},
	} {
		if got := rec.Unconfigured(c.env); got != c.want {
			t.Errorf("Unconfigured = %q, want %q", got, c.want)
		}
	}
	load := func(kv ...string) error {
		e := map[string]string{"DATABASE_URL": "postgres://localhost/x", "POLAR_WEBHOOK_SECRET": newSecret}
		for i := 0; i+1 < len(kv); i += 2 {
			e[kv[i]] = kv[i+1]
		}
		_, err := config.Load(func(k string) string { return e[k] }, []webhooks.Spec{polar.Spec})
		return err
	}
	if err := load("POLAR_API_KEY", polarToken, "POLAR_WEBHOOK_ENDPOINT_ID", endpoint, "POLAR_API_BASE", "https://sandbox-api.polar.sh"); err != nil {
		t.Errorf("a good configuration: %v", err)
	}
	for _, bad := range [][]string{
		{"POLAR_WEBHOOK_ENDPOINT_ID", "endpoint-1"},
		{"POLAR_WEBHOOK_ENDPOINT_ID", strings.Replace(endpoint, "-", "x", 1)},
		{"POLAR_API_BASE", "http://api.polar.sh"},
		{"POLAR_API_KEY", "short"},
	} {
		if err := load(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: %v, want refused", bad[0], bad[1], err)
		}
	}
}
