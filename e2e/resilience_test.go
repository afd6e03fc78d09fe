package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/pglocal"
)

// TestReplicas runs three receivers on one database and sprays every
// delivery at all three at once: each event has exactly one effect, and,
// with a lease of five minutes (no lease can run out), each email and
// fulfillment call is made exactly once.
func TestReplicas(t *testing.T) {
	const checkouts, invoices, purchases = 40, 15, 15
	w := newWorld(t)
	env := w.env("LEASE_DURATION", "5m", "REDRIVE_INTERVAL", "200ms")
	var replicas []*proc
	for i := range 3 {
		replicas = append(replicas, startReceiver(t, fmt.Sprintf("replica-%d", i+1), env))
	}

	var events []delivery
	var mailSteps, callSteps []string // what each step's Message-ID or Idempotency-Key derives from
	for i := range checkouts {
		d := checkout(i, "replica")
		events = append(events, d)
		mailSteps, callSteps = append(mailSteps, d.Ref(stepConfirmation)), append(callSteps, d.Ref(stepFulfillment))
	}
	for i := range invoices {
		paid := invoiceEvent(i, "replica", "invoice.paid")
		events = append(events, invoiceEvent(i, "replica", "invoice.created"), paid)
		mailSteps = append(mailSteps, paid.Ref(stepReceipt))
	}
	for i := range purchases {
		d := purchase(i, "replica")
		events = append(events, d)
		mailSteps, callSteps = append(mailSteps, d.Ref(stepWelcome)), append(callSteps, d.Ref(stepFulfillment))
	}
	rand.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rp := retryPolicy{MaxRetryAfter: 100 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 1000}
	sem := make(chan struct{}, 12) // at most 12 deliveries in flight
	var wg sync.WaitGroup
	errs := make(chan error, 3*len(events))
	for _, d := range events {
		for _, r := range replicas { // the same event to every replica, at once
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := deliverUntilOK(ctx, d, func() string { return r.URL }, rp); err != nil {
					errs <- fmt.Errorf("%s: %w", r.name, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	w.waitSettled(t, 30*time.Second)

	if n := count(t, w.DB, `SELECT count(*) FROM orders`); n != checkouts+purchases {
		t.Errorf("orders = %d, want %d", n, checkouts+purchases)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM invoices WHERE status = 'paid'`); n != invoices {
		t.Errorf("paid invoices = %d, want %d", n, invoices)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE status <> 'done'`); n != 0 {
		t.Errorf("%d claims not done", n)
	}
	mails, calls := w.mailsByID(), w.fulfillmentsByKey()
	for _, k := range mailSteps {
		if n := mails[messageID(k)]; n != 1 {
			t.Errorf("email %s sent %d times, want exactly 1", k, n)
		}
	}
	for _, k := range callSteps {
		if n := calls[idemKey(k)]; n != 1 {
			t.Errorf("fulfillment %s called %d times, want exactly 1", k, n)
		}
	}
	if len(w.SMTP.Messages()) != len(mailSteps) || len(w.API.Requests()) != len(callSteps) {
		t.Errorf("%d emails and %d fulfillment calls in all, want %d and %d",
			len(w.SMTP.Messages()), len(w.API.Requests()), len(mailSteps), len(callSteps))
	}
	t.Logf("replicas: %d events x 3 replicas; %d emails, %d fulfillment calls, %d orders",
		len(events), len(w.SMTP.Messages()), len(w.API.Requests()), checkouts+purchases)
}

// TestDatabaseOutage stops the receiver's PostgreSQL (a private cluster)
// under load: while it is down no delivery is answered 2xx, /readyz says
// 503 and the process stays up; once it is back, the senders' retries
// complete every event.
func TestDatabaseOutage(t *testing.T) {
	const checkouts, clients = 60, 4
	ctx := context.Background()
	// Under os.TempDir(), not t.TempDir(), whose private parent the
	// server could not reach when it runs as postgres (we are root).
	dir, err := os.MkdirTemp("", "e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cluster, err := pglocal.Start(ctx, pglocal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cluster.Stop(sctx)
	})
	if err := cluster.CreateDatabase(ctx, "receiver"); err != nil {
		t.Fatal(err)
	}
	w := &world{DBURL: cluster.URL("receiver"), SMTP: mailtest.NewServer(t), API: fulfillmenttest.NewServer(t)}
	p := startReceiver(t, "receiver", w.env())
	w.DB = openPool(t, w.DBURL)

	var (
		mu               sync.Mutex
		atts             []attempt
		stopped, resumed time.Time // the outage, as the test saw it
	)
	var wg sync.WaitGroup
	queue := make(chan delivery)
	sendCtx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	rp := retryPolicy{MaxRetryAfter: 200 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 5000,
		OnAttempt: func(a attempt) {
			mu.Lock()
			atts = append(atts, a)
			mu.Unlock()
		}}
	errs := make(chan error, checkouts)
	for range clients {
		wg.Go(func() {
			for d := range queue {
				if _, err := deliverUntilOK(sendCtx, d, func() string { return p.URL }, rp); err != nil {
					errs <- err
				}
			}
		})
	}
	var events []delivery
	for i := range checkouts {
		events = append(events, checkout(i, "outage"))
	}
	go func() {
		for _, d := range events {
			queue <- d
		}
		close(queue)
	}()

	// Under load: once a third of the events are done, stop the database.
	waitFor(t, 60*time.Second, "a third of the orders", func() bool {
		return count(t, w.DB, `SELECT count(*) FROM orders`) >= checkouts/3
	})
	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = time.Now()
	waitFor(t, 10*time.Second, "/readyz to say 503 while the database is down", func() bool {
		return p.readyz() == 503
	})
	waitFor(t, 30*time.Second, "twenty delivery attempts while the database is down", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range atts {
			if a.Start.After(stopped) {
				n++
			}
		}
		return n >= 20
	})
	if !p.alive() {
		t.Fatalf("the receiver exited while the database was down: %v", p.waitErr)
	}
	if s := p.readyz(); s != 503 {
		t.Errorf("/readyz = %d while the database is down, want 503", s)
	}
	resumed = time.Now()
	if err := cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !p.alive() {
		t.Fatalf("the receiver exited: %v", p.waitErr)
	}

	var during, lies int
	for _, a := range atts {
		if a.Start.After(stopped) && a.End.Before(resumed) {
			during++
			if a.Status/100 == 2 {
				lies++
			}
		}
	}
	if during == 0 {
		t.Fatalf("no delivery attempt fell inside the outage")
	}
	if lies > 0 {
		t.Errorf("%d of %d deliveries made while the database was down were answered 2xx", lies, during)
	}
	p.waitReady(t, 30*time.Second)
	w.waitSettled(t, 60*time.Second)
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != checkouts {
		t.Errorf("paid orders = %d, want %d", n, checkouts)
	}
	mails, calls := w.mailsByID(), w.fulfillmentsByKey()
	var dups int
	for _, d := range events {
		m, c := mails[messageID(d.Ref(stepConfirmation))], calls[idemKey(d.Ref(stepFulfillment))]
		if m == 0 || c == 0 {
			t.Errorf("%s: %d confirmation emails, %d fulfillment calls; want both done", d.ID, m, c)
		}
		dups += max(m-1, 0) + max(c-1, 0)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE status <> 'done'`); n != 0 {
		t.Errorf("%d claims not done", n)
	}
	t.Logf("outage: %d attempts in all, %d inside the outage (none answered 2xx: %v), %d step repeats (steps done just before a failed completion)",
		len(atts), during, lies == 0, dups)
}

// TestGracefulDeploy sends SIGTERM while deliveries are in flight (held by
// the fulfillment API): the receiver stops accepting, lets the ones in
// flight finish, and exits 0. None is acknowledged and lost: every 200 has
// its order and its steps done. A restarted receiver and the senders'
// retries complete the rest.
func TestGracefulDeploy(t *testing.T) {
	const inFlight = 4
	w := newWorld(t)
	// The step timeout (a quarter of the lease) must outlast the hold.
	env := w.env("LEASE_DURATION", "60s", "SHUTDOWN_TIMEOUT", "30s")
	p := startReceiver(t, "old", env)

	release := w.API.Hold()
	defer release()
	var events []delivery
	for i := range inFlight + 1 {
		events = append(events, checkout(i, "deploy"))
	}
	type result struct {
		res response
		err error
	}
	results := make([]chan result, inFlight)
	for i := range inFlight {
		results[i] = make(chan result, 1)
		go func() {
			res, err := post(context.Background(), p.URL, events[i])
			results[i] <- result{res, err}
		}()
	}
	w.API.WaitHeld(t, inFlight, 30*time.Second)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitLog(t, "stopped accepting connections", 10*time.Second)

	// Draining: no new connection is taken. (A fresh connection: an idle
	// keep-alive one from an earlier request would test the client's pool.)
	late := events[inFlight]
	if res, err := postNewConn(p.URL, late); !isConnRefused(err) {
		t.Errorf("a delivery sent after the listener closed: %d, %v; want connection refused", res.Status, err)
	}
	release()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the receiver did not exit within 30s of SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}

	acked := 0
	for i := range inFlight {
		r := <-results[i]
		if r.err != nil || r.res.Status/100 != 2 {
			t.Logf("%s in flight at SIGTERM: not acknowledged (%v, %d); the sender will retry", events[i].ID, r.err, r.res.Status)
			continue
		}
		acked++
		// Acknowledged: it must all be there.
		assertAllDone(t, w, events[i])
		if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, events[i].ID); n != 1 {
			t.Errorf("%s acknowledged with %d orders", events[i].ID, n)
		}
		if w.mailsByID()[messageID(events[i].Ref(stepConfirmation))] != 1 || w.fulfillmentsByKey()[idemKey(events[i].Ref(stepFulfillment))] != 1 {
			t.Errorf("%s acknowledged but its email or fulfillment call is missing", events[i].ID)
		}
	}
	if acked != inFlight {
		t.Errorf("%d of %d deliveries in flight at SIGTERM finished; with a step timeout longer than the hold, all should", acked, inFlight)
	}
	t.Logf("deploy: %d of %d deliveries in flight at SIGTERM answered 2xx with all their work done; a new connection refused; exit code %d",
		acked, inFlight, p.cmd.ProcessState.ExitCode())

	// The new version: the senders retry everything.
	p2 := startReceiver(t, "new", env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, d := range events {
		if _, err := deliverUntilOK(ctx, d, func() string { return p2.URL }, stormRetry); err != nil {
			t.Fatal(err)
		}
	}
	w.waitSettled(t, 30*time.Second)
	if n := count(t, w.DB, `SELECT count(*) FROM orders`); n != len(events) {
		t.Errorf("orders = %d, want %d", n, len(events))
	}
	mails, calls := w.mailsByID(), w.fulfillmentsByKey()
	for _, d := range events {
		if m, c := mails[messageID(d.Ref(stepConfirmation))], calls[idemKey(d.Ref(stepFulfillment))]; m != 1 || c != 1 {
			t.Errorf("%s: %d emails, %d fulfillment calls; want 1 and 1 (no kill happened)", d.ID, m, c)
		}
	}
	if code := p2.Term(t, 30*time.Second); code != 0 {
		t.Errorf("new receiver: exit code %d after SIGTERM, want 0", code)
	}
}
