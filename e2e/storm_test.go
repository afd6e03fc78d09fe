package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestKillStorm delivers a few hundred distinct events, each also as a
// duplicate, shuffled, from eight senders that retry like Stripe, while the
// receiver is SIGKILLed and restarted dozens of times at random moments.
// At the end every event's database effect happened exactly once, every
// email and fulfillment call at least once, and each one was repeated at
// most as often as a kill landed inside that very step; no step is left in
// progress or parked.
//
// Which kills landed inside which step is measured, not guessed: only one
// receiver runs at a time, so once no transaction of a killed receiver is
// left open, every step lease still held (in_progress, not given back) is an
// attempt that the kill interrupted. Each attempt is one (step, claim_token)
// pair; the set of them is the exact number of interrupted attempts, and a
// step can have been sent twice only by an attempt that did not finish.
func TestKillStorm(t *testing.T) {
	w := newWorld(t)
	killStorm(t, w, fullStorm)
}

// storm is the size of a kill storm.
type storm struct {
	checkouts, invoices, purchases int // invoices: each a created/paid pair
	clients, kills                 int
	budget                         time.Duration // for the senders to finish
}

// fullStorm is TestKillStorm's.
var fullStorm = storm{checkouts: 150, invoices: 50, purchases: 50, clients: 8, kills: 30, budget: 150 * time.Second}

// killStorm runs a storm of size st against receivers on w, started with
// env (key, value, …) on top of w.env, and checks what it left: see
// TestKillStorm.
func killStorm(t *testing.T, w *world, st storm, env ...string) {
	t.Helper()
	var (
		checkouts = st.checkouts
		invoices  = st.invoices
		purchases = st.purchases
		clients   = st.clients
		kills     = st.kills
	)
	const lease = 2 * time.Second
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	t.Logf("shuffle and kill timings seeded with %d", seed)

	slowAPI := slowFulfillmentAPI(t, w, seed)

	// The events, and what each must lead to.
	var events []delivery
	// key: the step's claim; ref: what its Message-ID or Idempotency-Key
	// derives from (a sale's steps are the order's); kind: mail or
	// fulfillment.
	type expectedStep struct{ key, ref, kind string }
	var steps []expectedStep
	for i := range checkouts {
		d := checkout(i, "storm")
		events = append(events, d)
		steps = append(steps, expectedStep{d.StepKey(stepConfirmation), d.Ref(stepConfirmation), "mail"},
			expectedStep{d.StepKey(stepFulfillment), d.Ref(stepFulfillment), "fulfillment"})
	}
	for i := range invoices {
		created, paid := invoiceEvent(i, "storm", "invoice.created"), invoiceEvent(i, "storm", "invoice.paid")
		events = append(events, created, paid)
		steps = append(steps, expectedStep{paid.StepKey(stepReceipt), paid.Ref(stepReceipt), "mail"})
	}
	for i := range purchases {
		d := purchase(i, "storm")
		events = append(events, d)
		steps = append(steps, expectedStep{d.StepKey(stepWelcome), d.Ref(stepWelcome), "mail"},
			expectedStep{d.StepKey(stepFulfillment), d.Ref(stepFulfillment), "fulfillment"})
	}
	deliveries := append(append([]delivery(nil), events...), events...) // every event twice
	rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

	instance := 0
	start := func() *proc {
		instance++
		app := fmt.Sprintf("e2e-storm-%d", instance)
		p := startReceiver(t, app, w.env(append([]string{"FULFILLMENT_URL", slowAPI.URL,
			"LEASE_DURATION", lease.String(), "REDRIVE_INTERVAL", "200ms"}, env...)...))
		p.logTail = 40
		return p
	}
	var cur urlBox
	p := start()
	cur.Set(p.URL)

	// The senders.
	ctx, cancel := context.WithTimeout(context.Background(), st.budget)
	defer cancel()
	queue := make(chan delivery)
	var (
		wg                  sync.WaitGroup
		attempts, connErrs  atomic.Int64
		status503, status5x atomic.Int64
		failures            = make(chan error, len(deliveries))
	)
	for range clients {
		wg.Go(func() {
			for d := range queue {
				atts, err := deliverUntilOK(ctx, d, cur.Get, stormRetry)
				attempts.Add(int64(len(atts)))
				for _, a := range atts {
					switch {
					case a.Err != nil:
						connErrs.Add(1)
					case a.Status == 503:
						status503.Add(1)
					case a.Status >= 500:
						status5x.Add(1)
					}
				}
				if err != nil {
					failures <- err
				}
			}
		})
	}
	sendersDone := make(chan struct{})
	go func() {
		defer close(sendersDone)
		for _, d := range deliveries {
			select {
			case queue <- d:
			case <-ctx.Done():
			}
		}
		close(queue)
		wg.Wait()
	}()

	// The killer.
	type attemptID struct {
		key   string
		token int64
	}
	interrupted := map[attemptID]bool{}
	killsDuringTraffic := 0
	for k := range kills {
		uptime := time.Duration(50+rng.IntN(351)) * time.Millisecond
		select {
		case <-time.After(uptime): // a random moment in the receiver's life
		case <-ctx.Done():
			t.Fatalf("storm ran out of time after %d kills", k)
		}
		select {
		case <-sendersDone:
		default:
			killsDuringTraffic++
		}
		p.Kill()
		// Once no session of the database is in a statement or a
		// transaction (but the test's own), whatever the killed
		// receiver had open has ended: rolled back, or committed.
		// Through a pooler, the server sessions outlive the receiver;
		// the pooler closes the one of a transaction left open.
		waitFor(t, 30*time.Second, "the killed receiver's transactions to end", func() bool {
			return count(t, w.DB, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
  AND state IS DISTINCT FROM 'idle'`) == 0
		})
		rows, err := w.DB.Query(context.Background(), `
SELECT event_key, claim_token FROM processed_events
WHERE kind = 'step' AND status = 'in_progress' AND claimed_at > '-infinity'`)
		if err != nil {
			t.Fatal(err)
		}
		held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (attemptID, error) {
			var a attemptID
			return a, r.Scan(&a.key, &a.token)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range held {
			interrupted[a] = true
		}
		p = start()
		cur.Set(p.URL)
	}

	select {
	case <-sendersDone:
	case <-ctx.Done():
		t.Fatalf("senders did not finish: %v", ctx.Err())
	}
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	w.waitSettled(t, 60*time.Second)

	// Every event's database effect, exactly once.
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE source = 'stripe' AND status = 'paid'`); n != checkouts {
		t.Errorf("paid Stripe orders = %d, want %d", n, checkouts)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE source = 'github_marketplace' AND status = 'paid' AND external_id LIKE 'account:%'`); n != purchases {
		t.Errorf("paid marketplace orders = %d, want %d", n, purchases)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM orders`); n != checkouts+purchases {
		t.Errorf("orders = %d, want %d", n, checkouts+purchases)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM invoices WHERE status = 'paid'`); n != invoices {
		t.Errorf("paid invoices = %d, want %d", n, invoices)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM invoices`); n != invoices {
		t.Errorf("invoices = %d, want %d", n, invoices)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND status = 'done'`); n != len(events) {
		t.Errorf("events done = %d, want %d", n, len(events))
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE status <> 'done'`); n != 0 {
		t.Errorf("%d claims left in progress or parked", n)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'step'`); n != len(steps) {
		t.Errorf("step claims = %d, want %d", n, len(steps))
	}

	// Every step at least once; repeated at most once per interrupted
	// attempt of that step.
	interruptedBy := map[string]int{}
	for a := range interrupted {
		interruptedBy[a.key]++
	}
	mails, calls := w.mailsByID(), w.fulfillmentsByKey()
	var dupMails, dupCalls, sentMails, sentCalls int
	var overBound []string
	for _, s := range steps {
		var n int
		if s.kind == "mail" {
			n = mails[messageID(s.ref)]
			sentMails += n
		} else {
			n = calls[idemKey(s.ref)]
			sentCalls += n
		}
		if n == 0 {
			t.Errorf("step %s never done", s.key)
			continue
		}
		dup := n - 1
		if s.kind == "mail" {
			dupMails += dup
		} else {
			dupCalls += dup
		}
		if dup > interruptedBy[s.key] {
			st, att := w.stepState(t, s.key)
			overBound = append(overBound, fmt.Sprintf("%s: sent %d times, %d attempts interrupted by a kill (claim %s after %d attempts)",
				s.key, n, interruptedBy[s.key], st, att))
		}
	}
	if sentMails != len(w.SMTP.Messages()) {
		t.Errorf("%d emails in all, %d of them for the expected steps", len(w.SMTP.Messages()), sentMails)
	}
	if sentCalls != len(w.API.Requests()) {
		t.Errorf("%d fulfillment calls in all, %d of them for the expected steps", len(w.API.Requests()), sentCalls)
	}
	sort.Strings(overBound)
	for _, s := range overBound {
		t.Errorf("repeated more often than kills landed inside it: %s", s)
	}
	if dupMails+dupCalls > len(interrupted) {
		t.Errorf("duplicates %d > interrupted step attempts %d", dupMails+dupCalls, len(interrupted))
	}
	t.Logf("storm: %d distinct events (%d checkouts, %d invoice events, %d marketplace purchases), %d deliveries by %d senders",
		len(events), checkouts, 2*invoices, purchases, len(deliveries), clients)
	t.Logf("storm: %d kills (%d while senders were still sending), %d step attempts interrupted inside a step",
		kills, killsDuringTraffic, len(interrupted))
	t.Logf("storm: %d attempts = %d retries (%d connection errors, %d answered 503, %d other 5xx)",
		attempts.Load(), attempts.Load()-int64(len(deliveries)), connErrs.Load(), status503.Load(), status5x.Load())
	t.Logf("storm: %d emails for %d email steps (%d duplicates by Message-ID); %d fulfillment calls for %d keys (%d duplicates by Idempotency-Key); duplicates %d <= interrupted attempts %d <= kills x concurrency",
		sentMails, len(mails), dupMails, sentCalls, len(calls), dupCalls, dupMails+dupCalls, len(interrupted))
}

// slowFulfillmentAPI puts 5 to 35 ms of latency in front of the world's
// fulfillment API, as a real one has, so that kills land inside that step
// too.
func slowFulfillmentAPI(t *testing.T, w *world, seed uint64) *httptest.Server {
	target, _ := url.Parse(w.API.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorHandler = func(rw http.ResponseWriter, _ *http.Request, _ error) {
		rw.WriteHeader(http.StatusBadGateway) // the caller is usually gone: killed
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 2))
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		d := time.Duration(5+rng.IntN(30)) * time.Millisecond
		mu.Unlock()
		select {
		case <-time.After(d): // the API's latency
		case <-r.Context().Done():
			return
		}
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}
