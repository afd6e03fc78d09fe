package webhooks_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestFetchedEvent: an event whose delivery only names it (Event.Fetch) is
// fetched before its transaction, and what the fetch returns is its stored
// body; a fetch that fails writes nothing (503 fetch_failed), and so does
// one that returns another event; a copy of a claimed event is answered
// from its claims without a fetch.
func TestFetchedEvent(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	ctx := context.Background()
	var calls atomic.Int64
	named := func(id string, fetch func(webhooks.Event) (webhooks.Event, error)) webhooks.Event {
		ev := webhooks.Event{Source: "test", Key: id, ID: id, Type: "invoice.created", Body: []byte(`{"named":"` + id + `"}`)}
		ev.Fetch = func(context.Context) (webhooks.Event, error) {
			calls.Add(1)
			return fetch(ev)
		}
		return ev
	}
	whole := func(ev webhooks.Event) (webhooks.Event, error) {
		ev.Fetch, ev.Body = nil, []byte(`{"fetched":"`+ev.ID+`"}`)
		return ev, nil
	}
	claims := func(id string) int {
		var n int
		if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE event_key LIKE $1 || '%'`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	failing := named("evt_fetch_fails", func(webhooks.Event) (webhooks.Event, error) { return webhooks.Event{}, errors.New("api down") })
	if res := r.proc.Process(ctx, planOnly{invoiceProvider{}}, failing); res.Outcome != webhooks.OutcomeFetchFailed || res.Outcome.Acknowledged() {
		t.Errorf("a failed fetch: %s (%v), want fetch_failed, not acknowledged", res.Outcome, res.Err)
	}
	other := named("evt_fetch_other", func(ev webhooks.Event) (webhooks.Event, error) {
		ev.Fetch, ev.Key = nil, "evt_someone_else"
		return ev, nil
	})
	if res := r.proc.Process(ctx, planOnly{invoiceProvider{}}, other); res.Outcome != webhooks.OutcomeFetchFailed {
		t.Errorf("a fetch that returns another event: %s, want fetch_failed", res.Outcome)
	}
	if n := claims("evt_fetch_") + claims("evt_someone_else"); n != 0 {
		t.Errorf("%d claims written by failed fetches", n)
	}

	calls.Store(0)
	ev := named("evt_fetch_ok", whole)
	if res := r.proc.Process(ctx, planOnly{invoiceProvider{}}, ev); res.Outcome != webhooks.OutcomeProcessed {
		t.Fatalf("fetched: %s (%v)", res.Outcome, res.Err)
	}
	var body string
	if err := r.pool.QueryRow(ctx, `SELECT convert_from(body, 'UTF8') FROM processed_events WHERE event_key = 'evt_fetch_ok'`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if body != `{"fetched":"evt_fetch_ok"}` {
		t.Errorf("stored body %s, want what the fetch returned", body)
	}
	for range 3 {
		if res := r.proc.Process(ctx, planOnly{invoiceProvider{}}, named("evt_fetch_ok", whole)); res.Outcome != webhooks.OutcomeDuplicate {
			t.Errorf("a copy: %s, want duplicate", res.Outcome)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d fetches for one event and three copies, want 1", n)
	}
}
