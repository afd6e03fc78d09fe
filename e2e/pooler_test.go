package e2e

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/pgbouncer"
	"github.com/paywebhooks/receiver/internal/pgtest"
)

// The receiver behind PgBouncer 1.18 in transaction mode, as Debian ships
// it: DATABASE_URL is the pooler (with no statement mode of its own: the
// receiver picks one), DATABASE_POOLER=transaction, DATABASE_SESSION_URL
// the database directly. Every guarantee holds as on a direct connection.

// pooled is a world whose receivers reach the database through a
// transaction-mode PgBouncer.
type pooled struct {
	*world
	PoolerURL string // DATABASE_URL: the pooler, with no default_query_exec_mode
	bouncer   *pgbouncer.Bouncer
}

// newPooledWorld starts a PgBouncer in transaction mode in front of a new
// database: migrated (a clone of pgtest's template) or, with empty, with no
// schema at all, for receivers to migrate as they start.
func newPooledWorld(t *testing.T, empty bool) *pooled {
	t.Helper()
	if _, err := pgbouncer.Find(); err != nil {
		t.Fatalf("%v (make test installs it: scripts/ensure-pgbouncer.sh)", err)
	}
	direct := pgtest.NewDB(t)
	if empty {
		direct = emptyDatabase(t)
	}
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	var log logWriter
	b, err := pgbouncer.Start(context.Background(), pgbouncer.Options{Upstream: direct, PoolSize: 10, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgbouncer's log:\n%s", log.String())
		}
		_ = b.Stop()
	})
	w := &world{DBURL: direct, DB: openPool(t, direct), SMTP: mailtest.NewServer(t), API: fulfillmenttest.NewServer(t)}
	return &pooled{world: w, PoolerURL: b.PlainURL(strings.TrimPrefix(u.Path, "/")), bouncer: b}
}

// env is the receiver's environment behind the pooler.
func (p *pooled) env(overrides ...string) map[string]string {
	return p.world.env(append([]string{"DATABASE_URL", p.PoolerURL, "DATABASE_POOLER", "transaction",
		"DATABASE_SESSION_URL", p.DBURL}, overrides...)...)
}

// emptyDatabase creates a database with no schema, dropped when the test
// ends, and returns its URL.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	admin := pgtest.AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = cryptorand.Read(b[:])
	name := "e2e_empty_" + hex.EncodeToString(b[:])
	execAdmin := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := execAdmin(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := execAdmin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// TestPoolerReplicas: three receivers start at once on an empty database
// behind the pooler (each migrates, over DATABASE_SESSION_URL, under
// golang-migrate's lock); checkouts, GitHub purchases and paid invoices are
// then sprayed at all three at once. Each event has exactly one effect and
// each email and fulfillment call is made exactly once; no receiver logs a
// prepared-statement or advisory-lock error. A receiver told of the pooler
// without a session URL refuses to start.
func TestPoolerReplicas(t *testing.T) {
	const checkouts, invoices, purchases = 30, 10, 10
	p := newPooledWorld(t, true)

	t.Run("NoSessionURL", func(t *testing.T) {
		env := p.env()
		delete(env, "DATABASE_SESSION_URL")
		r := runServerCmd(t, env)
		if r.Code != 1 || !strings.Contains(r.Stderr, "DATABASE_SESSION_URL is required with DATABASE_POOLER=transaction") {
			t.Errorf("without DATABASE_SESSION_URL: exit %d, stderr %s", r.Code, r.Stderr)
		}
	})

	env := p.env("LEASE_DURATION", "5m", "REDRIVE_INTERVAL", "200ms")
	var replicas []*proc
	for i := range 3 { // at once: each migrates the empty database as it starts
		replicas = append(replicas, spawnProc(t, fmt.Sprintf("pooled-%d", i+1), serverBin, nil, env))
	}
	for _, r := range replicas {
		r.waitStarted(t)
	}
	var wg sync.WaitGroup
	latest, err := db.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v := count(t, p.DB, `SELECT version FROM schema_migrations`); v != int(latest) {
		t.Fatalf("schema version %d after three replicas started, want %d", v, latest)
	}

	var events []delivery
	var mailSteps, callSteps []string // what each step's Message-ID or Idempotency-Key derives from
	for i := range checkouts {
		d := checkout(i, "pooled")
		events = append(events, d)
		mailSteps, callSteps = append(mailSteps, d.Ref(stepConfirmation)), append(callSteps, d.Ref(stepFulfillment))
	}
	for i := range invoices {
		paid := invoiceEvent(i, "pooled", "invoice.paid")
		events = append(events, invoiceEvent(i, "pooled", "invoice.created"), paid)
		mailSteps = append(mailSteps, paid.Ref(stepReceipt))
	}
	for i := range purchases {
		d := purchase(i, "pooled")
		events = append(events, d)
		mailSteps, callSteps = append(mailSteps, d.Ref(stepWelcome)), append(callSteps, d.Ref(stepFulfillment))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rp := retryPolicy{MaxRetryAfter: 100 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 1000}
	sem := make(chan struct{}, 12)
	errs := make(chan error, 3*len(events))
	var mu sync.Mutex
	statuses := map[int]int{}
	rp.OnAttempt = func(a attempt) {
		mu.Lock()
		statuses[a.Status]++
		mu.Unlock()
	}
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
	p.waitSettled(t, 60*time.Second)

	if n := count(t, p.DB, `SELECT count(*) FROM orders`); n != checkouts+purchases {
		t.Errorf("orders = %d, want %d", n, checkouts+purchases)
	}
	if n := count(t, p.DB, `SELECT count(*) FROM invoices WHERE status = 'paid'`); n != invoices {
		t.Errorf("paid invoices = %d, want %d", n, invoices)
	}
	if n := count(t, p.DB, `SELECT count(*) FROM processed_events WHERE status <> 'done'`); n != 0 {
		t.Errorf("%d claims not done", n)
	}
	mails, calls := p.mailsByID(), p.fulfillmentsByKey()
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
	for _, r := range replicas {
		for _, bad := range []string{"prepared statement", "pg_advisory_unlock", "you don't own a lock", "SQLSTATE 26000", "SQLSTATE 42P05"} {
			if r.out.contains(bad) {
				t.Errorf("%s logged %q", r.name, bad)
			}
		}
	}
	mu.Lock()
	t.Logf("pooled replicas: %d events x 3 replicas through PgBouncer (transaction mode); attempts by status %v; "+
		"%d orders, %d emails, %d fulfillment calls (want %d, %d, %d)", len(events), statuses,
		count(t, p.DB, `SELECT count(*) FROM orders`), len(p.SMTP.Messages()), len(p.API.Requests()),
		checkouts+purchases, len(mailSteps), len(callSteps))
	mu.Unlock()

	t.Run("Migrate", func(t *testing.T) {
		// The operator's command goes over the session URL too.
		r := runServerCmd(t, p.env(), "migrate", "up")
		if r.Code != 0 || !strings.Contains(r.Stdout, fmt.Sprintf("schema version %d", latest)) {
			t.Errorf("migrate up behind the pooler: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})
}

// TestPoolerKillStorm is TestKillStorm, smaller, through the pooler: the
// receiver SIGKILLed and restarted at random moments while eight senders
// retry; every effect exactly once, every step at least once and repeated
// at most as often as a kill landed inside it.
func TestPoolerKillStorm(t *testing.T) {
	p := newPooledWorld(t, false)
	killStorm(t, p.world, storm{checkouts: 100, invoices: 25, purchases: 25, clients: 8, kills: 20, budget: 150 * time.Second},
		"DATABASE_URL", p.PoolerURL, "DATABASE_POOLER", "transaction", "DATABASE_SESSION_URL", p.DBURL)
}

// logWriter keeps what is written to it, for a failed test's log.
type logWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
