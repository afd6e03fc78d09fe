package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/pglocal"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/server"
)

// A primary and its streaming standby, each a private PostgreSQL started by
// the test, and a receiver whose DATABASE_URL names both
// (target_session_attrs=read-write). Under load, the primary is stopped as
// a crash stops it (pg_ctl stop -m immediate) and the standby promoted.

// replicated is a primary, its standby and the URL that names both.
type replicated struct {
	primary, standby *pglocal.Cluster
	URL              string // database receiver on both hosts, the primary first
}

// startReplicated starts a primary with the database receiver and a standby
// made from it, streaming; with sync, the primary's commits wait for the
// standby (synchronous_standby_names, synchronous_commit=on).
func startReplicated(t *testing.T, sync bool) *replicated {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := func() string {
		d, err := os.MkdirTemp("", "e2e-pg-") // not t.TempDir(): postgres could not reach it (we are root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	settings := []string{"synchronous_commit=on"}
	primary, err := pglocal.Start(ctx, pglocal.Options{Dir: dir(), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.StopImmediate() })
	if err := primary.CreateDatabase(ctx, "receiver"); err != nil {
		t.Fatal(err)
	}
	standby, err := pglocal.StartStandby(ctx, primary, pglocal.Options{Dir: dir(), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.StopImmediate() })
	admin := openPool(t, primary.URL("postgres"))
	waitFor(t, time.Minute, "the standby to stream", func() bool {
		return count(t, admin, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`) == 1
	})
	if sync {
		for _, sql := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, time.Minute, "the standby to be synchronous", func() bool {
			return count(t, admin, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`) == 1
		})
	}
	admin.Close()
	u, _ := url.Parse(primary.URL("receiver"))
	u.Host = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", primary.Port(), standby.Port())
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return &replicated{primary: primary, standby: standby, URL: u.String()}
}

// load sends new checkouts at a steady rate, each by a sender of its own
// that retries it until it is answered 2xx, as Stripe does, and records
// every attempt. Each event is also added to a fake Stripe API, as
// delivered (Stripe counts a 2xx as delivered).
type load struct {
	mu       sync.Mutex
	events   []*sent
	attempts []attempt
	stop     chan struct{}
	senders  sync.WaitGroup
	errs     []error
}

// sent is one event of the load and what its sender saw.
type sent struct {
	d       delivery
	created time.Time
	acked   time.Time // the end of its first 2xx; zero until then
}

// startLoad sends one new checkout every interval to url until stopLoad.
func startLoad(ctx context.Context, t *testing.T, target string, api *stripetest.Server, prefix string, every time.Duration) *load {
	l := &load{stop: make(chan struct{})}
	rp := retryPolicy{MaxRetryAfter: 300 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, MaxAttempts: 100000}
	l.senders.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			created := time.Now()
			e := &sent{d: checkoutAt(n, prefix, created), created: created}
			if _, err := api.AddRaw(e.d.Body, true); err != nil {
				t.Error(err)
			}
			l.mu.Lock()
			l.events = append(l.events, e)
			l.mu.Unlock()
			erp := rp
			erp.OnAttempt = func(a attempt) {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.attempts = append(l.attempts, a)
				if a.Err == nil && a.Status/100 == 2 && e.acked.IsZero() {
					e.acked = a.End
				}
			}
			l.senders.Go(func() {
				if _, err := deliverUntilOK(ctx, e.d, func() string { return target }, erp); err != nil {
					l.mu.Lock()
					l.errs = append(l.errs, err)
					l.mu.Unlock()
				}
			})
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return l
}

// ackedSince counts the events first acknowledged after t.
func (l *load) ackedSince(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if !e.acked.IsZero() && e.acked.After(t) {
			n++
		}
	}
	return n
}

// attemptsAfter returns the attempts made so far that started after from.
func (l *load) attemptsAfter(from time.Time) []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []attempt
	for _, a := range l.attempts {
		if a.Start.After(from) {
			out = append(out, a)
		}
	}
	return out
}

// finish stops sending new events and waits for every sender to have its
// event acknowledged.
func (l *load) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.senders.Wait()
	for _, err := range l.errs {
		t.Error(err)
	}
}

// failover is what one fail-over did, as the senders saw it.
type failover struct {
	w          *world
	p          *proc
	rep        *replicated
	api        *stripetest.Server
	l          *load
	detached   time.Time     // async: the standby stopped receiving WAL
	killed     time.Time     // the primary stopped
	promoted   time.Time     // pg_promote called
	firstOK    time.Time     // the end of the first 2xx after the promotion
	readyAgain time.Time     // /readyz 200 after the promotion
	gap        []attempt     // attempts made with no primary: started after killed, ended before promoted
	newPrimary *pgxpool.Pool // the promoted standby
	// env is the receiver's whole environment: the one operator commands
	// are run with.
	env map[string]string
}

// runFailover runs the receiver on a primary and its standby under load at
// 20 events per second, loses the primary, promotes the standby, and waits
// until every sender has had its event acknowledged. With sync false, the
// standby first stops receiving WAL, so that the commits the primary
// acknowledges from then on are lost with it. The receiver runs without the
// variables named by without (its fulfillment API checks no signature).
func runFailover(t *testing.T, sync bool, prefix string, without ...string) *failover {
	t.Helper()
	f := &failover{rep: startReplicated(t, sync)}
	const key = "rk_test_failover_0123456789"
	f.api = stripetest.New(t, key)
	f.w = &world{DBURL: f.rep.URL, SMTP: mailtest.NewServer(t), API: fulfillmenttest.NewServer(t)}
	f.env = f.w.env("STRIPE_API_KEY", key, "STRIPE_API_BASE", f.api.URL)
	for _, name := range without {
		delete(f.env, name)
	}
	f.p = startReceiver(t, "receiver", f.env)
	f.p.logTail = 60

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	start := time.Now()
	f.l = startLoad(ctx, t, f.p.URL, f.api, prefix, 50*time.Millisecond)
	waitFor(t, time.Minute, "30 events acknowledged", func() bool { return f.l.ackedSince(start) >= 30 })
	if !sync {
		if err := f.rep.standby.StopWALReceiver(ctx); err != nil {
			t.Fatal(err)
		}
		f.detached = time.Now()
		waitFor(t, time.Minute, "15 events acknowledged by the primary alone", func() bool { return f.l.ackedSince(f.detached) >= 15 })
	}

	f.killed = time.Now()
	if err := f.rep.primary.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	// As an orchestrator would: promote once the primary is found gone.
	waitFor(t, time.Minute, "/readyz 503 without a primary", func() bool { return f.p.readyz() == 503 })
	waitFor(t, time.Minute, "40 deliveries answered without a primary", func() bool { return len(f.l.attemptsAfter(f.killed)) >= 40 })
	// The standby takes writes from some moment inside Promote, which
	// returns once it has seen that: the gap ends when Promote is called.
	f.promoted = time.Now()
	if err := f.rep.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.l.attemptsAfter(f.killed) {
		if a.End.Before(f.promoted) {
			f.gap = append(f.gap, a)
		}
	}
	waitFor(t, time.Minute, "a 2xx after the promotion", func() bool {
		for _, a := range f.l.attemptsAfter(f.killed) {
			if a.Err == nil && a.Status/100 == 2 && a.End.After(f.promoted) {
				f.firstOK = a.End
				return true
			}
		}
		return false
	})
	waitFor(t, time.Minute, "/readyz 200 after the promotion", func() bool { return f.p.readyz() == 200 })
	f.readyAgain = time.Now()
	waitFor(t, time.Minute, "40 events acknowledged after the promotion", func() bool { return f.l.ackedSince(f.promoted) >= 40 })
	f.l.finish(t)
	if t.Failed() {
		t.FailNow()
	}
	f.newPrimary = openPool(t, f.rep.standby.URL("receiver"))
	f.w.DB = f.newPrimary
	// The receiver noticed, and says what to run.
	f.p.waitLog(t, "database fail-over: the primary changed", 4*server.PrimaryCheckEvery)
	f.p.waitLog(t, "server reconcile stripe --since 72h", time.Second)
	return f
}

// lost are the events acknowledged 2xx whose order the new primary does not
// have.
func (f *failover) lost(t *testing.T) []*sent {
	t.Helper()
	var out []*sent
	for _, e := range f.l.events {
		if !e.acked.IsZero() && count(t, f.newPrimary, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, e.d.ID) == 0 {
			out = append(out, e)
		}
	}
	return out
}

// check asserts what holds after any fail-over: no 2xx while no primary
// answered, a 2xx soon after the promotion, the receiver still up.
func (f *failover) check(t *testing.T) {
	t.Helper()
	for _, a := range f.gap {
		if a.Err == nil && a.Status/100 == 2 {
			t.Errorf("a delivery made with no primary (%s to %s) was answered %d", a.Start.Format(time.StampMilli), a.End.Format(time.StampMilli), a.Status)
		}
	}
	if len(f.gap) == 0 {
		t.Error("no delivery attempt fell between the primary's loss and the promotion")
	}
	if f.firstOK.Sub(f.promoted) > f.promoted.Sub(f.killed)+10*time.Second {
		t.Errorf("the first 2xx came %v after the promotion, the gap itself was %v", f.firstOK.Sub(f.promoted), f.promoted.Sub(f.killed))
	}
	if !f.p.alive() {
		t.Fatalf("the receiver exited: %v", f.p.waitErr)
	}
}

// figures is the log line of a fail-over.
func (f *failover) figures(lost int) string {
	acked := 0
	for _, e := range f.l.events {
		if !e.acked.IsZero() {
			acked++
		}
	}
	status := map[int]int{}
	for _, a := range f.gap {
		status[a.Status]++
	}
	return fmt.Sprintf("%d events sent at 20/s, %d acknowledged 2xx, %d lost by the promotion; %v without a primary "+
		"(%d attempts then, by status %v, none 2xx); first 2xx %v after the promotion, /readyz 200 %v after it",
		len(f.l.events), acked, lost, f.promoted.Sub(f.killed).Round(time.Millisecond), len(f.gap), status,
		f.firstOK.Sub(f.promoted).Round(time.Millisecond), f.readyAgain.Sub(f.promoted).Round(time.Millisecond))
}

// TestFailoverSynchronous: with a synchronous standby, no delivery
// acknowledged 2xx is lost by the fail-over, none is acknowledged while no
// primary answers, and the receiver serves again within seconds of the
// promotion, without a restart. An event acknowledged before the primary
// was lost has each of its steps done once, never again.
func TestFailoverSynchronous(t *testing.T) {
	f := runFailover(t, true, "fosync")
	f.check(t)
	lost := f.lost(t)
	for _, e := range lost {
		t.Errorf("%s was acknowledged %s and is not on the new primary", e.d.ID, e.acked.Format(time.StampMilli))
	}
	f.w.waitSettled(t, time.Minute)
	mails, calls := f.w.mailsByID(), f.w.fulfillmentsByKey()
	again := 0
	for _, e := range f.l.events {
		if n := count(t, f.newPrimary, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, e.d.ID); n != 1 {
			t.Errorf("%s: %d orders, want 1", e.d.ID, n)
		}
		m, c := mails[messageID(e.d.Ref(stepConfirmation))], calls[idemKey(e.d.Ref(stepFulfillment))]
		switch {
		case m == 0 || c == 0:
			t.Errorf("%s: %d emails, %d fulfillment calls; want both done", e.d.ID, m, c)
		case e.acked.Before(f.killed) && (m != 1 || c != 1):
			t.Errorf("%s, acknowledged before the fail-over: %d emails, %d fulfillment calls; want 1 each", e.d.ID, m, c)
		}
		again += m - 1 + c - 1
	}
	t.Logf("synchronous fail-over: %s; %d steps run again (events in flight at the loss)", f.figures(len(lost)), again)
}

// TestFailoverAsynchronous: with an asynchronous standby that fell behind,
// the fail-over loses commits the old primary had acknowledged; `server
// reconcile stripe --since` against Stripe's Events API (which lists
// delivered events too) brings back every one of them, once: one order
// each, and their steps, which had run before the loss, run once more
// with the same Message-ID and Idempotency-Key. A second run finds nothing.
// The receiver runs as a team that has not adopted signed fulfillment calls
// does (every variable set, FULFILLMENT_SECRET not), and the catch-up and
// `events replay KEY` are run with exactly its environment: they run,
// having found the shell to be the running receiver's (issue 34); their
// transcripts are logged.
func TestFailoverAsynchronous(t *testing.T) {
	f := runFailover(t, false, "foasync", "FULFILLMENT_SECRET")
	f.check(t)
	lost := f.lost(t)
	if len(lost) == 0 {
		t.Fatal("the standby stopped receiving WAL before the primary was lost, yet no acknowledged event is missing")
	}
	// (A lost event may have been acknowledged a little before the WAL
	// receiver stopped: the commits it had not yet received, replication
	// being asynchronous, are lost too.)
	mails, calls := f.w.mailsByID(), f.w.fulfillmentsByKey()
	for _, e := range lost {
		if m, c := mails[messageID(e.d.Ref(stepConfirmation))], calls[idemKey(e.d.Ref(stepFulfillment))]; m != 1 || c != 1 {
			t.Errorf("%s, acknowledged then lost: %d emails, %d fulfillment calls before the catch-up; want 1 each", e.d.ID, m, c)
		}
	}

	// The receiver records itself on the new primary (its last record
	// before the fail-over may be among the commits lost), at once when it
	// notices the promotion.
	waitFor(t, time.Minute, "the receiver's record on the new primary", func() bool {
		return count(t, f.newPrimary, `SELECT count(*) FROM receivers WHERE stopped_at IS NULL AND seen_at > $1`, f.promoted) == 1
	})
	env := f.env
	r := runLogged(t, env, "reconcile", "stripe", "--since", "30m")
	if r.Code != 0 {
		t.Fatalf("reconcile stripe: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "this shell's configuration is the running receivers' (1 receiver)") {
		t.Errorf("reconcile stripe with the server's environment did not find it the running receiver's:\n%s", r.Stderr)
	}
	processed := regexp.MustCompile(`(\d+) processed`).FindStringSubmatch(r.Stdout)
	if processed == nil || processed[1] != strconv.Itoa(len(lost)) {
		t.Errorf("reconcile stripe processed %v, want the %d lost events:\n%s", processed, len(lost), r.Stdout)
	}
	f.w.waitSettled(t, time.Minute)
	replay := runLogged(t, env, "events", "replay", lost[0].d.Key)
	if replay.Code != 0 || !strings.Contains(replay.Stdout, lost[0].d.Key+": duplicate") {
		t.Errorf("events replay %s (lost, then brought back): exit %d; want 0, a duplicate", lost[0].d.Key, replay.Code)
	}
	mails, calls = f.w.mailsByID(), f.w.fulfillmentsByKey()
	isLost := map[string]bool{}
	for _, e := range lost {
		isLost[e.d.ID] = true
	}
	rerun := 0
	for _, e := range f.l.events {
		if n := count(t, f.newPrimary, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, e.d.ID); n != 1 {
			t.Errorf("%s: %d orders after the catch-up, want 1", e.d.ID, n)
		}
		m, c := mails[messageID(e.d.Ref(stepConfirmation))], calls[idemKey(e.d.Ref(stepFulfillment))]
		switch {
		case isLost[e.d.ID] && (m != 2 || c != 2):
			t.Errorf("%s, lost and brought back: %d emails, %d fulfillment calls; want each once more (2) under the same Message-ID and Idempotency-Key", e.d.ID, m, c)
		case !isLost[e.d.ID] && (m == 0 || c == 0):
			t.Errorf("%s: %d emails, %d fulfillment calls; want both done", e.d.ID, m, c)
		case !isLost[e.d.ID] && (m > 2 || c > 2):
			// An event whose claim reached the standby may have lost the
			// records of its steps' completion, acknowledged just before
			// the standby stopped receiving: those steps run once more,
			// under the same keys, never more.
			t.Errorf("%s, not lost: %d emails, %d fulfillment calls; want at most one more each", e.d.ID, m, c)
		case !isLost[e.d.ID] && m+c > 2:
			rerun++
		}
	}
	again := runLogged(t, env, "reconcile", "stripe", "--since", "30m")
	if again.Code != 0 || !strings.Contains(again.Stdout, " 0 processed") {
		t.Errorf("a second reconcile: exit %d\n%s%s", again.Code, again.Stdout, again.Stderr)
	}
	t.Logf("asynchronous fail-over: %s; reconcile stripe --since 30m: %s; %d events kept whose steps' completion was lost ran them once more",
		f.figures(len(lost)), strings.TrimSpace(lastLine(r.Stdout)), rerun)
}

// TestCommitOutcomeUnknown: a connection lost while its COMMIT waits (here
// for a synchronous standby that never answers, and the server session
// then terminated) leaves the commit's fate unknown to the receiver, which
// answers 5xx; the commit did land. The sender's retry finds the event
// claimed, waits out the lease of the lost attempt (503), and finishes it:
// one order, one email, one fulfillment call.
func TestCommitOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := pglocal.Start(ctx, pglocal.Options{Dir: dir, Settings: []string{"synchronous_commit=on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StopImmediate() })
	if err := c.CreateDatabase(ctx, "receiver"); err != nil {
		t.Fatal(err)
	}
	w := &world{DBURL: c.URL("receiver"), SMTP: mailtest.NewServer(t), API: fulfillmenttest.NewServer(t)}
	w.DB = openPool(t, w.DBURL)
	p := startReceiver(t, "receiver", w.env())
	reload := func(sql string) {
		t.Helper()
		for _, s := range []string{sql, `SELECT pg_reload_conf()`} {
			if _, err := w.DB.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := w.DB.Exec(ctx, `CREATE TABLE sync_probe (x int)`); err != nil {
		t.Fatal(err)
	}
	reload(`ALTER SYSTEM SET synchronous_standby_names = 'ghost'`) // a standby that never comes
	t.Cleanup(func() { _, _ = w.DB.Exec(ctx, `ALTER SYSTEM RESET synchronous_standby_names`) })
	// pg_reload_conf only signals: commits wait for the standby once the
	// checkpointer has read the setting. Until a probe's commit is seen
	// waiting, the delivery's might not (it did not once, on a loaded
	// machine), so probe until one waits, then end it.
	waitFor(t, time.Minute, "a probe's commit to wait for the synchronous standby", func() bool {
		done := make(chan error, 1)
		go func() {
			_, err := w.DB.Exec(ctx, `INSERT INTO sync_probe VALUES (1)`)
			done <- err
		}()
		waiting := func() bool {
			return count(t, w.DB, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`) > 0
		}
		seen := false
		for end := time.Now().Add(5 * time.Second); !seen && time.Now().Before(end); {
			select {
			case <-done:
				return false // it committed without waiting: not in effect yet
			default:
			}
			if seen = waiting(); !seen {
				time.Sleep(pollEvery)
			}
		}
		count(t, w.DB, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
		<-done
		return seen
	})

	d := checkout(1, "unknown")
	first := make(chan response, 1)
	go func() {
		res, err := post(ctx, p.URL, d)
		if err != nil {
			res.Body = err.Error()
		}
		first <- res
	}()
	// The event's transaction has committed on the server and waits for
	// the standby; its connection is then lost.
	waitFor(t, time.Minute, "the event's commit to wait for the synchronous standby", func() bool {
		return count(t, w.DB, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`) == 1
	})
	if n := count(t, w.DB, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`); n != 1 {
		t.Fatalf("terminated %d sessions", n)
	}
	res := <-first
	if res.Status/100 != 5 {
		t.Fatalf("the delivery whose commit's outcome is unknown: %d %s, want 5xx", res.Status, res.Body)
	}
	reload(`ALTER SYSTEM RESET synchronous_standby_names`)
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, d.ID); n != 1 {
		t.Fatalf("%d orders: the commit was expected to have landed", n)
	}
	if n := len(w.API.Requests()) + len(w.SMTP.Messages()); n != 0 {
		t.Fatalf("%d steps ran after a commit the receiver could not confirm", n)
	}
	var statuses []int
	rp := retryPolicy{MaxRetryAfter: 500 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, MaxAttempts: 1000,
		OnAttempt: func(a attempt) { statuses = append(statuses, a.Status) }}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := deliverUntilOK(rctx, d, func() string { return p.URL }, rp); err != nil {
		t.Fatal(err)
	}
	w.waitSettled(t, 30*time.Second)
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, d.ID); n != 1 {
		t.Errorf("orders = %d, want 1", n)
	}
	if m, c := w.mailsByID()[messageID(d.Ref(stepConfirmation))], w.fulfillmentsByKey()[idemKey(d.Ref(stepFulfillment))]; m != 1 || c != 1 {
		t.Errorf("%d emails, %d fulfillment calls; want 1 each", m, c)
	}
	t.Logf("unknown commit outcome: first answer %d; the retries were answered %v", res.Status, statuses)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
