package e2e

import (
	"context"
	"testing"
	"time"
)

// TestSlowEventTransactionStepsRunOnce: an event whose transaction is slow
// (its order write waits on a lock for longer than the lease) must still
// have each of its steps run once. Nobody is killed and nothing fails, so a
// second call would be a duplicate with no excuse: the doc promises that "a
// live worker always finishes or gives back its lease before the lease
// could run out under it".
//
// The step leases are planned inside the event's transaction, and a lease
// counts from its claimed_at. If claimed_at is the transaction's start
// (now() in PostgreSQL) rather than the moment the lease is actually
// granted, a slow transaction commits leases that have already run out: the
// redriver takes them at its next tick while the worker that committed them
// is still running the steps, and the fulfillment API is called twice.
func TestSlowEventTransactionStepsRunOnce(t *testing.T) {
	const lease = 4 * time.Second // step timeout: 1s
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env("LEASE_DURATION", lease.String(), "REDRIVE_INTERVAL", "200ms"))
	d := checkout(1, "slowtx")
	key := idemKey(d.Ref(stepFulfillment))

	release := w.API.Hold()
	defer release()
	ctx := context.Background()
	unlock := lockOrders(t, w)

	done := make(chan response, 1)
	go func() {
		res, err := post(ctx, p.URL, d)
		if err != nil {
			res.Body = err.Error()
		}
		done <- res
	}()
	// The event's transaction waits on the lock for longer than the lease.
	waitOrderWriteBlocked(t, w, lease+500*time.Millisecond)
	unlock()

	// The worker commits and runs its steps; its fulfillment call is held.
	// Watch, for most of the step timeout (lease/4) but less, whether
	// anybody else calls too, then let the call finish in time.
	w.API.WaitHeld(t, 1, 30*time.Second)
	deadline := time.Now().Add(lease/4 - 500*time.Millisecond)
	for time.Now().Before(deadline) && w.API.CountByKey(key) < 2 {
		time.Sleep(pollEvery)
	}
	release()
	select {
	case res := <-done:
		t.Logf("delivery answered %d %s", res.Status, res.Body)
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery was not answered")
	}
	w.waitSettled(t, 30*time.Second)

	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, d.ID); n != 1 {
		t.Errorf("orders = %d, want 1", n)
	}
	if n := w.API.CountByKey(key); n != 1 {
		t.Errorf("fulfillment called %d times for one step with no kill and no failure, want 1: "+
			"the step leases planned in the event's transaction count from the transaction's start, "+
			"so a transaction slower than the lease commits leases that have already run out and the redriver "+
			"runs the steps again while their worker is still running them", n)
	}
	if n := w.mailsByID()[messageID(d.Ref(stepConfirmation))]; n != 1 {
		t.Errorf("confirmation emails = %d, want 1", n)
	}
	if p.out.contains("lease was taken meanwhile") || p.out.contains("after its lease was taken") {
		t.Errorf("the receiver logged that a live worker's lease was taken from it")
	}
}
