package ops_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func checkout(id string) []byte {
	return fmt.Appendf(nil, `{"id":"evt_%[1]s","object":"event","api_version":"2023-10-16","type":"checkout.session.completed",
"data":{"object":{"id":"cs_%[1]s","object":"checkout.session","payment_status":"paid","amount_total":2500,"currency":"usd",
"payment_intent":"pi_%[1]s","customer_details":{"email":"%[1]s@example.com","name":"Buyer %[1]s"}}}}`, id)
}

func deliver(t *testing.T, r *rt.Receiver, body []byte, want int) {
	t.Helper()
	if res := r.Deliver(t, stripe.Spec, body, nil); res.Status != want {
		t.Fatalf("delivery answered %d, want %d: %s", res.Status, want, res.Body)
	}
}

func step(t *testing.T, d ops.Detail, name string) ops.Claim {
	t.Helper()
	for _, c := range d.Claims {
		if c.Kind == "step" && c.Step == name {
			return c
		}
	}
	t.Fatalf("%s has no step %s", d.Key, name)
	return ops.Claim{}
}

// attemptLine is an attempt as the tests compare it: number, outcome,
// status, error class, and whether its text names the status.
func attemptLines(h []ops.Attempt) []string {
	var out []string
	for _, a := range h {
		line := fmt.Sprintf("%d %s", a.N, a.Outcome)
		if a.Status != 0 {
			line += fmt.Sprintf(" status=%d", a.Status)
		}
		if a.ErrorClass != "" {
			line += " " + a.ErrorClass
		}
		if a.StartedAt == nil || (a.Outcome != "unrecorded" && a.Duration <= 0) {
			line += " (no time)"
		}
		out = append(out, line)
	}
	return out
}

// TestAttemptHistory: a fulfillment step the API answers 503 twice, then
// accepts, shows three attempts (failed 503, failed 503, done), each with
// when and how long, and the redacted error; the email step, one done.
func TestAttemptHistory(t *testing.T) {
	ctx := context.Background()
	r := rt.New(t, providers.List())
	r.API.SetStatus(http.StatusServiceUnavailable)
	deliver(t, r, checkout("flaky"), http.StatusBadGateway) // Stripe retries a 5xx
	deliver(t, r, checkout("flaky"), http.StatusBadGateway)
	r.API.SetStatus(0)
	deliver(t, r, checkout("flaky"), http.StatusOK)

	d, err := ops.Show(ctx, r.Pool, "evt_flaky")
	if err != nil {
		t.Fatal(err)
	}
	f := step(t, d, "fulfillment")
	want := []string{
		"1 failed status=503 *fulfillment.StatusError",
		"2 failed status=503 *fulfillment.StatusError",
		"3 done status=201",
	}
	if diff := cmp.Diff(want, attemptLines(f.History)); diff != "" {
		t.Errorf("fulfillment attempts (-want +got):\n%s", diff)
	}
	for _, a := range f.History[:2] {
		if !strings.Contains(a.Error, "status 503") {
			t.Errorf("attempt %d's error %q does not say the status", a.N, a.Error)
		}
	}
	if !f.History[0].StartedAt.Before(*f.History[2].StartedAt) {
		t.Error("the attempts are not in the order they were made")
	}
	// The email went out at the first delivery; its one attempt, done.
	if diff := cmp.Diff([]string{"1 done status=250"}, attemptLines(step(t, d, "email.confirmation").History)); diff != "" {
		t.Errorf("email attempts (-want +got):\n%s", diff)
	}
	// The same attempts in the table an outside check reads.
	if n := r.Count(t, `SELECT count(*) FROM step_attempts WHERE step_key = 'evt_flaky/fulfillment' AND status_code = 503`); n != 2 {
		t.Errorf("step_attempts has %d attempts answered 503, want 2", n)
	}
}

// TestAttemptRedacted: a failure's text is kept short and without the
// customer's address; the SMTP server's reply code is its status.
func TestAttemptRedacted(t *testing.T) {
	ctx := context.Background()
	r := rt.New(t, providers.List())
	r.SMTP.SetFailure(errors.New("mailbox of redact@example.com is over quota"))
	deliver(t, r, checkout("redact"), http.StatusBadGateway)
	d, err := ops.Show(ctx, r.Pool, "evt_redact")
	if err != nil {
		t.Fatal(err)
	}
	h := step(t, d, "email.confirmation").History
	if len(h) != 1 || h[0].Outcome != "failed" || h[0].Status != 451 {
		t.Fatalf("email attempts %+v, want one failed with the reply code 451", h)
	}
	if strings.Contains(h[0].Error, "@example.com") || !strings.Contains(h[0].Error, "[email]") {
		t.Errorf("the attempt's error %q is not redacted", h[0].Error)
	}
	if len([]rune(h[0].Error)) > webhooks.MaxAttemptError {
		t.Errorf("the attempt's error is %d characters, more than %d", len([]rune(h[0].Error)), webhooks.MaxAttemptError)
	}
}

func parkedCounts(t *testing.T, r *rt.Receiver) (claims, events int) {
	t.Helper()
	if err := r.Pool.QueryRow(context.Background(), webhooks.ParkedCountsSQL).Scan(&claims, &events); err != nil {
		t.Fatal(err)
	}
	return claims, events
}

func keys(t *testing.T, r *rt.Receiver, state webhooks.State) []string {
	t.Helper()
	list, err := ops.List(context.Background(), r.Pool, ops.Filter{State: state})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list {
		out = append(out, s.Key)
	}
	slices.Sort(out)
	return out
}

// TestResolve: a parked event is closed with a reason: it leaves the parked
// count and the parked listing, is listed resolved, keeps its body, the
// reason, who and when; events of any other state are refused with what
// they are; prune deletes it (and its attempts) as finished; a replay by
// key reopens it and runs it.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	r := rt.New(t, providers.List())
	deliver(t, r, checkout("fine"), http.StatusOK)
	r.API.SetStatus(http.StatusUnprocessableEntity) // permanent: the step is parked
	deliver(t, r, checkout("stuck"), http.StatusOK)
	r.API.SetStatus(0)

	if c, e := parkedCounts(t, r); c != 1 || e != 1 {
		t.Fatalf("before: %d parked claims of %d events, want 1 of 1", c, e)
	}
	if diff := cmp.Diff([]string{"evt_stuck"}, keys(t, r, webhooks.StateParked)); diff != "" {
		t.Fatalf("parked before (-want +got):\n%s", diff)
	}

	t.Run("ErrBadReason", func(t *testing.T) {
		for _, reason := range []string{"", "   ", strings.Repeat("x", ops.MaxReasonLength+1)} {
			if _, err := ops.Resolve(ctx, r.Pool, "evt_stuck", reason, "test", quiet); !errors.Is(err, ops.ErrBadReason) {
				t.Errorf("reason of %d characters: %v, want ErrBadReason", len(reason), err)
			}
		}
	})
	t.Run("ErrNotParked", func(t *testing.T) {
		_, err := ops.Resolve(ctx, r.Pool, "evt_fine", "nothing to do", "test", quiet)
		if !errors.Is(err, ops.ErrNotParked) || !strings.Contains(err.Error(), "evt_fine is done") {
			t.Errorf("resolving a done event: %v, want ErrNotParked saying it is done", err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := ops.Resolve(ctx, r.Pool, "evt_nope", "why", "test", quiet); !errors.Is(err, ops.ErrNotFound) {
			t.Errorf("resolving no event: %v, want ErrNotFound", err)
		}
	})

	res, err := ops.Resolve(ctx, r.Pool, "evt_stuck", "  refunded by hand; never to be shipped  ", "cli tester", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != webhooks.StateResolved || !slices.Equal(res.Closed, []string{"evt_stuck", "evt_stuck/fulfillment"}) {
		t.Errorf("resolved %+v; want the event and its parked step closed, state resolved", res)
	}
	if c, e := parkedCounts(t, r); c != 0 || e != 0 {
		t.Errorf("after: %d parked claims of %d events, want none", c, e)
	}
	if got := keys(t, r, webhooks.StateParked); len(got) != 0 {
		t.Errorf("still listed parked: %v", got)
	}
	if diff := cmp.Diff([]string{"evt_stuck"}, keys(t, r, webhooks.StateResolved)); diff != "" {
		t.Errorf("resolved listing (-want +got):\n%s", diff)
	}
	if got := keys(t, r, webhooks.StateDone); slices.Contains(got, "evt_stuck") || !slices.Contains(got, "evt_fine") {
		t.Errorf("done listing %v: want evt_fine and not the resolved event", got)
	}
	d, err := ops.Show(ctx, r.Pool, "evt_stuck")
	if err != nil {
		t.Fatal(err)
	}
	if d.Resolution == nil || d.Resolution.Reason != "refunded by hand; never to be shipped" || d.Resolution.By != "cli tester" ||
		d.Resolution.Reopened || time.Since(d.Resolution.At) > time.Minute || len(d.Body) == 0 {
		t.Errorf("the event keeps %+v and a body of %d bytes; want the reason, who, when and the body", d.Resolution, len(d.Body))
	}
	if _, err := ops.Resolve(ctx, r.Pool, "evt_stuck", "again", "test", quiet); !errors.Is(err, ops.ErrNotParked) ||
		!strings.Contains(err.Error(), "resolved already, by cli tester") {
		t.Errorf("resolving twice: %v, want ErrNotParked naming who resolved it", err)
	}
	// A delivery of it again is a duplicate, answered 200.
	deliver(t, r, checkout("stuck"), http.StatusOK)

	t.Run("Replay", func(t *testing.T) {
		p, err := ops.PreviewReplay(ctx, r.Pool, r.Server.Processor().Runnable, r.Server.Providers(), "evt_stuck")
		if err != nil {
			t.Fatal(err)
		}
		if !p.Unresolve || len(p.Reopen) != 1 || p.Reopen[0].Step != "fulfillment" {
			t.Errorf("the replay's preview %+v: want it to reopen the resolved event and give back its step", p)
		}
		res, err := ops.Replay(ctx, r.Pool, r.Server.Processor(), r.Server.Providers(), "evt_stuck", "test", quiet)
		if err != nil || res.Outcome != webhooks.OutcomeProcessed {
			t.Fatalf("replay of the resolved event: %+v %v, want processed", res, err)
		}
		d, err := ops.Show(ctx, r.Pool, "evt_stuck")
		if err != nil {
			t.Fatal(err)
		}
		if d.State != webhooks.StateDone || d.Resolution == nil || !d.Resolution.Reopened {
			t.Errorf("after the replay: %s, resolution %+v; want done, the resolution kept as history", d.State, d.Resolution)
		}
	})

	t.Run("Prune", func(t *testing.T) {
		deliver(t, r, checkout("old"), http.StatusOK)
		r.API.SetStatus(http.StatusUnprocessableEntity)
		deliver(t, r, checkout("oldstuck"), http.StatusOK)
		r.API.SetStatus(0)
		if _, err := r.Pool.Exec(ctx, `UPDATE processed_events SET claimed_at = claimed_at - interval '100 days'
WHERE kind = 'event' AND event_key IN ('evt_old', 'evt_oldstuck')`); err != nil {
			t.Fatal(err)
		}
		prune := func() int64 {
			res, err := ops.Prune(ctx, r.Pool, "stripe", 90*24*time.Hour, 100, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			return res.Events
		}
		if n := prune(); n != 1 {
			t.Fatalf("pruned %d events, want 1: the parked one stays", n)
		}
		if _, err := ops.Resolve(ctx, r.Pool, "evt_oldstuck", "written off", "test", quiet); err != nil {
			t.Fatal(err)
		}
		if n := prune(); n != 1 {
			t.Errorf("pruned %d events, want the resolved one", n)
		}
		if n := r.Count(t, `SELECT count(*) FROM step_attempts WHERE step_key LIKE 'evt_old%'`); n != 0 {
			t.Errorf("%d attempts of the pruned events are left", n)
		}
		if n := r.Count(t, `SELECT count(*) FROM step_attempts WHERE step_key LIKE 'evt_stuck/%'`); n == 0 {
			t.Error("prune deleted the attempts of an event it kept")
		}
	})
}

// TestSharedDeliveryID: GitHub's delivery GUID names an event when it is
// the only one with it; when two events share it (the same GUID sent with
// another body), show, the console and replay refuse to pick one and list
// both keys; each key still names its own.
func TestSharedDeliveryID(t *testing.T) {
	ctx := context.Background()
	r := rt.New(t, providers.List())
	const guid, lone = "5a1d0000-0000-4000-8000-00000000c0de", "5a1d0000-0000-4000-8000-00000000a10e"
	keys := []string{"11:" + guid + ":aaaaaaaaaaaaaaaa", "12:" + guid + ":bbbbbbbbbbbbbbbb", "11:" + lone + ":cccccccccccccccc"}
	for i, k := range keys {
		id, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(k, "11:"), "12:"), ":")
		if _, err := r.Pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, body, outcome, via)
VALUES ($1, 'github', 'done', 'event', now() - $2 * interval '1 minute', now(), $3, 'ping', '{"zen":"x"}', 'processed', 'delivery')`,
			k, 3-i, id); err != nil {
			t.Fatal(err)
		}
	}
	_, err := ops.Show(ctx, r.Pool, guid)
	if !errors.Is(err, webhooks.ErrAmbiguous) || !strings.Contains(err.Error(), keys[0]+", "+keys[1]) {
		t.Errorf("show of the shared GUID: %v; want ErrAmbiguous listing %s and %s", err, keys[0], keys[1])
	}
	if _, err := webhooks.LoadEvent(ctx, r.Pool, guid); !errors.Is(err, webhooks.ErrAmbiguous) {
		t.Errorf("load of the shared GUID: %v; want ErrAmbiguous", err)
	}
	for _, k := range keys[:2] {
		if d, err := ops.Show(ctx, r.Pool, k); err != nil || d.Key != k {
			t.Errorf("show %s: %v, key %s", k, err, d.Key)
		}
		if ev, err := webhooks.LoadEvent(ctx, r.Pool, k); err != nil || ev.Key != k {
			t.Errorf("load %s: %v, key %s", k, err, ev.Key)
		}
	}
	if d, err := ops.Show(ctx, r.Pool, lone); err != nil || d.Key != keys[2] {
		t.Errorf("show of a GUID of one event: %v, key %s; want %s", err, d.Key, keys[2])
	}
	if ev, err := webhooks.LoadEvent(ctx, r.Pool, lone); err != nil || ev.Key != keys[2] {
		t.Errorf("load of a GUID of one event: %v, key %s; want %s", err, ev.Key, keys[2])
	}
	if _, err := ops.Show(ctx, r.Pool, "5a1d0000-0000-4000-8000-000000000000"); !errors.Is(err, ops.ErrNotFound) {
		t.Errorf("show of an unknown GUID: %v; want ErrNotFound", err)
	}
}
