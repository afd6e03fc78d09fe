package e2e

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestGitHubNeverRetries: GitHub does not retry a failed delivery, so what
// a killed receiver leaves half-done must be finished by the receiver itself.
// Every GitHub delivery here is sent exactly once, never retried, while the
// receiver is SIGKILLed and restarted; the redriver alone finishes every
// step of every event whose claim committed. What never committed is not
// half there: no order, nothing sent. An operator's redelivery (by hand, as
// on GitHub) then completes those.
func TestGitHubNeverRetries(t *testing.T) {
	const (
		purchases = 120
		senders   = 4
		kills     = 10
		// Each sender sends one event every pace: GitHub's deliveries
		// arrive over time, so kills land among them rather than after.
		pace = 150 * time.Millisecond
	)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("kill timings seeded with %d", seed)
	w := newWorld(t)
	api := slowFulfillmentAPI(t, w, seed)
	env := w.env("FULFILLMENT_URL", api.URL, "LEASE_DURATION", "2s", "REDRIVE_INTERVAL", "200ms")

	// First, deterministically: a kill while the fulfillment API holds the
	// call, and no redelivery at all.
	held := purchase(0, "noretry")
	release := w.API.Hold()
	p := startReceiver(t, "first", env)
	go func() { _, _ = post(context.Background(), p.URL, held) }()
	w.API.WaitHeld(t, 1, 30*time.Second)
	p.Kill()
	release()
	p = startReceiver(t, "after-kill", env)
	waitFor(t, 30*time.Second, "the redriver to finish the killed delivery's steps", func() bool {
		s1, _ := w.stepState(t, held.StepKey(stepFulfillment))
		s2, _ := w.stepState(t, held.StepKey(stepWelcome))
		return s1 == "done" && s2 == "done"
	})
	if _, attempts := w.stepState(t, held.StepKey(stepFulfillment)); attempts != 2 {
		t.Errorf("fulfillment attempts = %d, want 2 (the killed one and the redriver's)", attempts)
	}

	// Then a storm of single deliveries under random kills.
	var cur urlBox
	cur.Set(p.URL)
	queue := make(chan delivery)
	var mu sync.Mutex
	answered := map[string]int{} // key → status of its only attempt (0: no answer)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for d := range queue {
				next := time.Now().Add(pace)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := post(ctx, cur.Get(), d)
				cancel()
				mu.Lock()
				if err == nil {
					answered[d.Key] = res.Status
				} else {
					answered[d.Key] = 0
				}
				mu.Unlock()
				time.Sleep(time.Until(next)) // the arrival rate, not a synchronisation
			}
		})
	}
	var events []delivery
	for i := 1; i <= purchases; i++ {
		events = append(events, purchase(i, "noretry"))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, d := range events {
			queue <- d
		}
		close(queue)
		wg.Wait()
	}()
	landed := 0
	for landed < kills {
		select {
		case <-done:
		case <-time.After(time.Duration(80+rng.IntN(220)) * time.Millisecond):
			p.Kill()
			landed++
			p = startReceiver(t, "storm", env)
			cur.Set(p.URL)
			continue
		}
		break
	}
	<-done
	w.waitSettled(t, 60*time.Second)

	committed, acked, lost := 0, 0, 0
	for _, d := range events {
		claimed := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE event_key = $1`, d.Key) == 1
		orders := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, d.Key)
		status := answered[d.Key]
		if status == 200 {
			acked++
		}
		switch {
		case claimed:
			committed++
			if orders != 1 {
				t.Errorf("%s: claimed with %d orders", d.ID, orders)
			}
			for _, step := range []string{stepWelcome, stepFulfillment} {
				if s, _ := w.stepState(t, d.StepKey(step)); s != "done" {
					t.Errorf("%s: step %s %s without any redelivery, want done by the redriver", d.ID, step, s)
				}
			}
		case status == 200:
			t.Errorf("%s: answered 200 but nothing committed", d.ID)
		default:
			lost++
			if orders != 0 || w.fulfillmentsByKey()[idemKey(d.Ref(stepFulfillment))] != 0 {
				t.Errorf("%s: not committed, yet %d orders or a fulfillment call exist", d.ID, orders)
			}
		}
	}
	redriven := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND attempts > 1 AND event_key LIKE '%noretry%'`)
	t.Logf("github, no retries: %d events, %d kills; %d answered 200, %d committed, %d never reached a commit; %d steps finished after a kill (by the redriver)",
		len(events), landed, acked, committed, lost, redriven)

	// The operator redelivers the failed ones by hand; nothing else was retried.
	for _, d := range events {
		if answered[d.Key] != 200 {
			if _, err := deliverUntilOK(context.Background(), d, cur.Get, stormRetry); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.waitSettled(t, 60*time.Second)
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE source = 'github_marketplace'`); n != purchases+1 {
		t.Errorf("orders = %d after the redeliveries, want %d", n, purchases+1)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE status <> 'done'`); n != 0 {
		t.Errorf("%d claims not done at the end", n)
	}
}
