package stripe_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/reconcile"
)

const stripeKey = "rk_test_reads_events_only"

func newStripeAPI(t *testing.T, s *stripetest.Server, pageSize int64) *stripe.API {
	t.Helper()
	noRetries := int64(0)
	api, err := stripe.NewAPI(stripe.APIConfig{Key: s.Key, BaseURL: s.URL, PageSize: pageSize, MaxNetworkRetries: &noRetries})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// collect lists q and returns the events, or the error.
func collect(t *testing.T, api reconcile.Lister, q reconcile.Window) ([]reconcile.Listed, error) {
	t.Helper()
	var out []reconcile.Listed
	for ev, err := range api.List(context.Background(), q) {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

func idsOf(evs []reconcile.Listed) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// seedEvents adds events at the given offsets from base (oldest first, as
// given) and returns their ids.
func seedEvents(s *stripetest.Server, base time.Time, offsets []time.Duration, delivered func(i int) bool, typ func(i int) string) []string {
	var out []string
	for i, off := range offsets {
		if typ == nil {
			typ = func(int) string { return "invoice.paid" }
		}
		ev := s.Add(typ(i), base.Add(off), map[string]any{"id": fmt.Sprintf("in_%d", i), "object": "invoice"}, delivered == nil || delivered(i))
		out = append(out, ev.ID)
	}
	return out
}

func TestStripeAPIListsInCreationOrder(t *testing.T) {
	s := stripetest.New(t, stripeKey)
	now := time.Now().Truncate(time.Second)
	// Over three days, with bursts: many events in one second, which only
	// the order of addition tells apart.
	var offsets []time.Duration
	for i := range 40 {
		offsets = append(offsets, -72*time.Hour+time.Duration(i)*97*time.Minute)
	}
	for range 7 {
		offsets = append(offsets, -5*time.Hour) // a burst in one second
	}
	for i := range 20 {
		offsets = append(offsets, -time.Hour+time.Duration(i)*time.Second)
	}
	all := seedEvents(s, now, offsets, nil, nil)

	t.Run("FromSince", func(t *testing.T) {
		since := now.Add(-48 * time.Hour)
		got, err := collect(t, newStripeAPI(t, s, 3), reconcile.Window{Since: since})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, off := range offsets {
			if !now.Add(off).Before(since) {
				want = append(want, all[i])
			}
		}
		if diff := cmp.Diff(want, idsOf(got)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("WholeHistory", func(t *testing.T) {
		got, err := collect(t, newStripeAPI(t, s, 100), reconcile.Window{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(all, idsOf(got)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("Until", func(t *testing.T) {
		got, err := collect(t, newStripeAPI(t, s, 5), reconcile.Window{Since: now.Add(-6 * time.Hour), Until: now.Add(-time.Hour + 4*time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, off := range offsets {
			if off >= -6*time.Hour && off <= -time.Hour+4*time.Second {
				want = append(want, all[i])
			}
		}
		if diff := cmp.Diff(want, idsOf(got)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("AfterCursor", func(t *testing.T) {
		cursor := reconcile.Cursor{ID: all[42], Created: now.Add(offsets[42])} // inside the burst
		before := len(s.Requests())
		got, err := collect(t, newStripeAPI(t, s, 4), reconcile.Window{After: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(all[43:], idsOf(got)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		// It walks from the cursor: its first request names it.
		if first := s.Requests()[before]; first.Query.Get("ending_before") != cursor.ID {
			t.Errorf("first request %v, want ending_before=%s", first.Query, cursor.ID)
		}
	})
	t.Run("StopsWhenTheConsumerStops", func(t *testing.T) {
		api := newStripeAPI(t, s, 2)
		before := len(s.Requests())
		n := 0
		for _, err := range api.List(context.Background(), reconcile.Window{Since: now.Add(-2 * time.Hour)}) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 3 {
				break
			}
		}
		walked := 0
		for _, r := range s.Requests()[before:] {
			if r.Query.Get("ending_before") != "" {
				walked++
			}
		}
		if walked > 1 {
			t.Errorf("%d pages walked for 3 events of pages of 2", walked)
		}
	})
}

func TestStripeAPIFindsTheStartInFewRequests(t *testing.T) {
	s := stripetest.New(t, stripeKey)
	now := time.Now().Truncate(time.Second)
	var offsets []time.Duration
	for i := range 300 {
		offsets = append(offsets, -2*time.Hour+time.Duration(i)*10*time.Second)
	}
	all := seedEvents(s, now, offsets, nil, nil)
	got, err := collect(t, newStripeAPI(t, s, 100), reconcile.Window{Since: now.Add(-29 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, idsOf(got)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	// 29 days of nothing then 300 events: a few widening windows, a few
	// narrowing ones, then three pages walked with ending_before.
	reqs := s.Requests()
	t.Logf("%d requests, %d of them walking", len(reqs), countWalked(reqs))
	if len(reqs) > 25 {
		t.Errorf("%d requests to list 300 events", len(reqs))
	}
	walked := 0
	for _, r := range reqs {
		if r.Query.Get("ending_before") != "" {
			walked++
		}
		if r.Query.Get("limit") != "100" {
			t.Errorf("request without limit=100: %v", r.Query)
		}
	}
	if walked != 3 {
		t.Errorf("%d pages walked with ending_before, want 3 (%d requests in all)", walked, len(reqs))
	}
}

func TestStripeAPIKeepsTheRawJSON(t *testing.T) {
	s := stripetest.New(t, stripeKey)
	now := time.Now().Truncate(time.Second)
	raw := fmt.Sprintf(`{
    "id": "evt_raw_1",
    "object": "event",
    "created": %d,
    "type": "checkout.session.completed",
    "api_version": "2025-01-27.acacia",
    "data": {"object": {"id": "cs_1", "object": "checkout.session", "brand_new_field": {"x": [1, 2.50]}}},
    "request": "req_old_style_string",
    "a_top_level_field_stripe_go_lacks": true
  }`, now.Add(-time.Minute).Unix())
	if _, err := s.AddRaw([]byte(raw), false); err != nil {
		t.Fatal(err)
	}
	made := s.Add("invoice.paid", now, map[string]any{"id": "in_1"}, true)

	got, err := collect(t, newStripeAPI(t, s, 1), reconcile.Window{Since: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d events, want 2", len(got))
	}
	if string(got[0].Raw) != raw {
		t.Errorf("raw event changed:\n got %s\nwant %s", got[0].Raw, raw)
	}
	if string(got[1].Raw) != string(made.Raw) || !strings.Contains(string(got[1].Raw), "context_unknown_to_stripe_go") {
		t.Errorf("raw event changed:\n got %s\nwant %s", got[1].Raw, made.Raw)
	}
	if got[0].Type != "checkout.session.completed" || !got[0].At.Equal(now.Add(-time.Minute)) {
		t.Errorf("event %+v", got[0])
	}
}

func TestStripeAPIFilters(t *testing.T) {
	s := stripetest.New(t, stripeKey)
	now := time.Now().Truncate(time.Second)
	types := []string{"invoice.paid", "invoice.created", "charge.refunded"}
	var offsets []time.Duration
	for i := range 30 {
		offsets = append(offsets, -time.Hour+time.Duration(i)*time.Minute)
	}
	all := seedEvents(s, now, offsets, func(i int) bool { return i%4 != 1 }, func(i int) string { return types[i%3] })

	got, err := collect(t, newStripeAPI(t, s, 2), reconcile.Window{
		Since: now.Add(-2 * time.Hour), Types: []string{"invoice.paid", "invoice.created"}, FailedOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range all {
		if i%4 == 1 && i%3 != 2 {
			want = append(want, all[i])
		}
	}
	if diff := cmp.Diff(want, idsOf(got)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, r := range s.Requests() {
		if r.Query.Get("delivery_success") != "false" || r.Query.Get("types[0]") != "invoice.paid" || r.Query.Get("types[1]") != "invoice.created" {
			t.Errorf("request without the filters: %v", r.Query)
		}
	}

	many := make([]string, stripe.MaxListTypes+1)
	for i := range many {
		many[i] = fmt.Sprintf("t.%d", i)
	}
	if _, err := collect(t, newStripeAPI(t, s, 2), reconcile.Window{Types: many}); err == nil {
		t.Error("21 types listed")
	}
}

func TestStripeAPICursorGone(t *testing.T) {
	s := stripetest.New(t, stripeKey)
	now := time.Now().Truncate(time.Second)
	all := seedEvents(s, now, []time.Duration{-50 * time.Minute, -40 * time.Minute, -40 * time.Minute, -30 * time.Minute, -20 * time.Minute}, nil, nil)
	cursor := reconcile.Cursor{ID: all[2], Created: now.Add(-40 * time.Minute)}
	s.Remove(all[2]) // aged out
	got, err := collect(t, newStripeAPI(t, s, 2), reconcile.Window{After: cursor})
	if err != nil {
		t.Fatal(err)
	}
	// From the cursor's second on: all[1] again (same second), then on.
	if diff := cmp.Diff([]string{all[1], all[3], all[4]}, idsOf(got)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStripeAPIErrors(t *testing.T) {
	s := stripetest.New(t, stripeKey)
	now := time.Now().Truncate(time.Second)
	seedEvents(s, now, []time.Duration{-3 * time.Minute, -2 * time.Minute, -time.Minute}, nil, nil)

	t.Run("WrongKey", func(t *testing.T) {
		api, err := stripe.NewAPI(stripe.APIConfig{Key: "rk_test_wrong", BaseURL: s.URL})
		if err != nil {
			t.Fatal(err)
		}
		got, err := collect(t, api, reconcile.Window{})
		if err == nil || len(got) != 0 || !strings.Contains(err.Error(), "Invalid API Key") {
			t.Errorf("%d events, error %v; want an invalid key error", len(got), err)
		}
		if strings.Contains(err.Error(), "rk_test_wrong") {
			t.Errorf("the error shows the key: %v", err)
		}
	})
	t.Run("FailureMidWalk", func(t *testing.T) {
		api := newStripeAPI(t, s, 1)
		var got []reconcile.Listed
		var failure error
		calls := 0
		for ev, err := range api.List(context.Background(), reconcile.Window{Since: now.Add(-time.Hour)}) {
			if err != nil {
				failure = err
				continue
			}
			got = append(got, ev)
			if calls++; calls == 1 {
				s.FailNext(500, 1) // the next page fails
			}
		}
		if failure == nil || len(got) != 1 {
			t.Errorf("%d events then %v; want 1 event then the failure", len(got), failure)
		}
	})
	t.Run("NoKey", func(t *testing.T) {
		if _, err := stripe.NewAPI(stripe.APIConfig{BaseURL: s.URL}); err == nil {
			t.Error("a client without a key")
		}
	})
}

func countWalked(reqs []stripetest.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Query.Get("ending_before") != "" {
			n++
		}
	}
	return n
}
