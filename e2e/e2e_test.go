package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The seed's two tests ("How to actually test this"), word for word:
//
//  1. Send the same delivery twice, in sequence, and assert the side effect
//     happened once.
//  2. Kill the process between the claim and the commit, replay the event,
//     restart, replay again, and check that the work eventually happens.
//
// The second runs against the real receiver and against the baseline (the
// copied snippet, baseline_test.go): the baseline must lose the event, the
// receiver must not.

// TestSeedSameDeliveryTwice sends one delivery, byte for byte and header for
// header, twice in sequence: one order, one email, one fulfillment call.
func TestSeedSameDeliveryTwice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		d     delivery
		steps []string
		order string // orders.provider_event_id
	}{
		{"Stripe", checkout(1, "twice"), []string{stepConfirmation, stepFulfillment}, "evt_twice_checkout_0001"},
		{"GitHub", purchase(1, "twice"), []string{stepWelcome, stepFulfillment}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			p := startReceiver(t, "receiver", w.env())
			h := tc.d.Header() // the same delivery: same body, same headers
			for i, want := range []string{`"processed"`, `"duplicate"`} {
				res, err := postRaw(context.Background(), p.URL+tc.d.Path, h.Clone(), tc.d.Body)
				if err != nil || res.Status != 200 || !strings.Contains(res.Body, want) {
					t.Fatalf("delivery %d: %+v, %v; want 200 %s", i+1, res, err, want)
				}
			}
			if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, tc.d.Key); n != 1 {
				t.Errorf("orders = %d, want 1", n)
			}
			mails, calls := w.mailsByID(), w.fulfillmentsByKey()
			if n := mails[messageID(tc.d.Ref(tc.steps[0]))]; n != 1 || len(w.SMTP.Messages()) != 1 {
				t.Errorf("emails = %d (%d in all), want 1", n, len(w.SMTP.Messages()))
			}
			if n := calls[idemKey(tc.d.Ref(tc.steps[1]))]; n != 1 || len(w.API.Requests()) != 1 {
				t.Errorf("fulfillment calls = %d (%d in all), want 1", n, len(w.API.Requests()))
			}
		})
	}
}

// TestSeedKillBetweenClaimAndCommit kills the process between the claim and
// the commit of the work, replays the event (refused: the process is dead),
// restarts it, replays again, and checks that the work eventually happens:
// once with the work a database write (blocked by a test holding the orders
// table's lock), once with the work an external call (held by the
// fulfillment API). The baseline acknowledges the replay and never does the
// work; the receiver does it.
func TestSeedKillBetweenClaimAndCommit(t *testing.T) {
	t.Run("DatabaseWrite", func(t *testing.T) {
		t.Run("Baseline", func(t *testing.T) {
			w := newWorld(t)
			d := checkout(1, "seeddb")
			killDuringOrderWrite(t, w, d, startBaseline, w.env())
			if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, d.ID); n != 0 {
				t.Fatalf("baseline: %d orders; the copied snippet was expected to lose this event", n)
			}
			if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE event_key = $1 AND status = 'done'`, d.ID); n != 1 {
				t.Fatalf("baseline: claim rows = %d, want the one that says done", n)
			}
			t.Logf("baseline lost %s: the replay after restart was answered 200, its claim says done, and there is no order and no fulfillment call (%d)", d.ID, len(w.API.Requests()))
		})
		t.Run("Receiver", func(t *testing.T) {
			w := newWorld(t)
			d := checkout(1, "seeddb")
			killDuringOrderWrite(t, w, d, startReceiver, w.env())
			w.waitSettled(t, 30*time.Second)
			if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1 AND status = 'paid'`, d.ID); n != 1 {
				t.Fatalf("receiver: %d paid orders, want 1", n)
			}
			// The kill landed before the commit: nothing had left the
			// database, so each step ran exactly once.
			if n := w.mailsByID()[messageID(d.Ref(stepConfirmation))]; n != 1 {
				t.Errorf("confirmation emails = %d, want 1", n)
			}
			if n := w.fulfillmentsByKey()[idemKey(d.Ref(stepFulfillment))]; n != 1 {
				t.Errorf("fulfillment calls = %d, want 1", n)
			}
			assertAllDone(t, w, d)
		})
	})

	t.Run("ExternalStep", func(t *testing.T) {
		// A lease long enough that a restart certainly happens within it;
		// its step timeout (a quarter) leaves the test time to kill.
		const lease = 5 * time.Second
		t.Run("Baseline", func(t *testing.T) {
			w := newWorld(t)
			d := checkout(2, "seedext")
			p := killDuringFulfillment(t, w, d, startBaseline, w.env(), nil)
			mustPost(t, p.URL, d, 200)
			if n := len(w.API.Requests()); n != 1 {
				t.Fatalf("baseline: %d fulfillment calls; the copied snippet was expected to lose this event after its first, abandoned, call", n)
			}
			t.Logf("baseline lost %s: the replay after restart was answered 200 and made no fulfillment call; the only call was abandoned by the killed process", d.ID)
		})
		t.Run("Receiver", func(t *testing.T) {
			w := newWorld(t)
			d := checkout(2, "seedext")
			stepKey := d.StepKey(stepFulfillment)
			// The steps run concurrently: the kill waits for the email to
			// be done, so that it lands inside the fulfillment call alone.
			emailDone := func() {
				waitFor(t, 30*time.Second, "confirmation email done", func() bool {
					status, _ := w.stepState(t, d.StepKey(stepConfirmation))
					return status == "done"
				})
			}
			p := killDuringFulfillment(t, w, d, startReceiver, w.env("LEASE_DURATION", lease.String()), emailDone)

			// Within the lease, the dead worker's claim still stands: the
			// replay must not be answered 200 (that would be a lie if the
			// work never happens), but 503 with Retry-After.
			var claimedAt time.Time
			var fresh bool
			err := w.DB.QueryRow(context.Background(), `
SELECT claimed_at, claimed_at > now() - $2 * interval '1 millisecond' FROM processed_events WHERE event_key = $1 AND status = 'in_progress'`,
				stepKey, lease.Milliseconds()).Scan(&claimedAt, &fresh)
			if err != nil || !fresh {
				t.Fatalf("the killed worker's fulfillment lease is not in progress and fresh after the restart (%v, fresh=%v): the restart took longer than the lease of %v", err, fresh, lease)
			}
			res := mustPost(t, p.URL, d, 503)
			if res.RetryAfter == "" {
				t.Errorf("503 without Retry-After")
			}
			// Once the lease has run out, a retry (or the redriver) takes
			// the step and does it.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := deliverUntilOK(ctx, d, func() string { return p.URL },
				retryPolicy{MaxRetryAfter: time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, MaxAttempts: 500}); err != nil {
				t.Fatal(err)
			}
			w.waitSettled(t, 30*time.Second)
			if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, d.ID); n != 1 {
				t.Errorf("orders = %d, want 1", n)
			}
			const killsInsideStep = 1
			reqs := w.API.Requests()
			if len(reqs) != 1+killsInsideStep {
				t.Errorf("fulfillment calls = %d, want 1 + %d kill inside the step", len(reqs), killsInsideStep)
			}
			for _, r := range reqs {
				if want := idemKey(d.Ref(stepFulfillment)); r.IdempotencyKey != want {
					t.Errorf("fulfillment call with Idempotency-Key %q, want %q on every attempt", r.IdempotencyKey, want)
				}
			}
			if n := w.mailsByID()[messageID(d.Ref(stepConfirmation))]; n != 1 {
				t.Errorf("confirmation emails = %d, want 1 (it was done before the kill)", n)
			}
			assertAllDone(t, w, d)
		})
	})
}

// starter starts a receiver: the real one or the baseline.
type starter func(t *testing.T, name string, env map[string]string) *proc

// killDuringOrderWrite delivers d while the test holds the orders table's
// lock, so that the receiver's order write blocks; SIGKILLs the receiver
// while it waits; releases the lock; checks that a replay finds nobody
// listening; restarts; and replays until answered 200.
func killDuringOrderWrite(t *testing.T, w *world, d delivery, start starter, env map[string]string) *proc {
	t.Helper()
	p := start(t, "first", env)
	ctx := context.Background()
	release := lockOrders(t, w)

	first := make(chan error, 1)
	go func() {
		res, err := post(ctx, p.URL, d)
		if err == nil && res.Status/100 == 2 {
			first <- nil
			return
		}
		first <- errOrStatus(err, res)
	}()
	waitOrderWriteBlocked(t, w, 0)
	p.Kill()
	if err := <-first; err == nil {
		t.Fatalf("the delivery in flight was answered 2xx by a killed process")
	}
	release()

	if _, err := post(ctx, p.URL, d); !isConnRefused(err) {
		t.Fatalf("replay to the dead process: %v, want connection refused", err)
	}
	p2 := start(t, "restarted", env)
	mustPost(t, p2.URL, d, 200)
	return p2
}

// killDuringFulfillment delivers d while the fulfillment API holds every
// call, runs beforeKill (if not nil) once the call is held, SIGKILLs the
// receiver while its call is still held, releases the API,
// checks that a replay finds nobody listening, and restarts.
func killDuringFulfillment(t *testing.T, w *world, d delivery, start starter, env map[string]string, beforeKill func()) *proc {
	t.Helper()
	p := start(t, "first", env)
	release := w.API.Hold()
	defer release()
	first := make(chan error, 1)
	go func() {
		res, err := post(context.Background(), p.URL, d)
		if err == nil && res.Status/100 == 2 {
			first <- nil
			return
		}
		first <- errOrStatus(err, res)
	}()
	w.API.WaitHeld(t, 1, 30*time.Second)
	if beforeKill != nil {
		beforeKill()
	}
	p.Kill()
	if err := <-first; err == nil {
		t.Fatalf("the delivery in flight was answered 2xx by a killed process")
	}
	release()
	if _, err := post(context.Background(), p.URL, d); !isConnRefused(err) {
		t.Fatalf("replay to the dead process: %v, want connection refused", err)
	}
	return start(t, "restarted", env)
}

// assertAllDone checks that the event and every one of its steps is done.
func assertAllDone(t *testing.T, w *world, d delivery) {
	t.Helper()
	rows, err := w.DB.Query(context.Background(),
		`SELECT event_key, status FROM processed_events WHERE event_key = $1 OR parent_key = $1`, d.Key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Key, Status string }])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatalf("no claim rows for %s", d.Key)
	}
	for _, r := range got {
		if r.Status != "done" {
			t.Errorf("claim %s is %s, want done", r.Key, r.Status)
		}
	}
}

type statusError struct{ res response }

func (e statusError) Error() string { return "status " + e.res.Body }

func errOrStatus(err error, res response) error {
	if err != nil {
		return err
	}
	return statusError{res}
}

// TestGCPercent: the receiver runs its collector at GOGC=200 unless GOGC is
// set, and then at what GOGC says (go_gc_gogc_percent, the runtime's own
// figure, on /metrics).
func TestGCPercent(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct{ gogc, want string }{{"", "200"}, {"150", "150"}} {
		p := startReceiver(t, "receiver-gogc-"+c.gogc, w.env("GOGC", c.gogc))
		got := sample(metricsOf(t, p.URL+"/metrics").Text, "go_gc_gogc_percent")
		t.Logf("GOGC=%q: go_gc_gogc_percent %s", c.gogc, got)
		if got != c.want {
			t.Errorf("GOGC=%q: go_gc_gogc_percent %q, want %s", c.gogc, got, c.want)
		}
		p.Kill()
	}
}
