package webhooks_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers/stripe/invoices"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// roundTrips counts the writes a pool makes to its sockets: each is a
// round trip to the server (a batch travels in one write; so do a prepare,
// a deallocate, a query).
type roundTrips struct{ n, bytes atomic.Int64 }

type countingConn struct {
	net.Conn
	c *roundTrips
}

func (c countingConn) Write(b []byte) (int, error) {
	c.c.n.Add(1)
	c.c.bytes.Add(int64(len(b)))
	return c.Conn.Write(b)
}

func (c *roundTrips) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return countingConn{conn, c}, nil
}

// invoiceProvider writes an invoice and plans nothing: a database-only
// event, as invoice.created is.
type invoiceProvider struct{}

func (invoiceProvider) Plan(ev *webhooks.Event, p *webhooks.Plan) error {
	invoices.EnsurePending(p, invoices.Invoice{StripeInvoiceID: "in_" + ev.ID, AmountDue: 100, Currency: "usd"})
	return nil
}

// TestNewEventOneRoundTrip: a new database-only event costs one round trip
// (its claim, body, writes and commit travel together), a copy of it two
// (its transaction, which writes nothing, then the read of its event's
// claims), and a new event with two steps one, plus one per step to record
// it; and a copy costs the next events nothing (no statement re-prepared).
// A copy the sender marks as a resend costs one round trip, without its
// body: the read of the event's claims.
func TestNewEventOneRoundTrip(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	const copyTrips = 2
	count := &roundTrips{}
	cfg.ConnConfig.DialFunc = count.dial
	cfg.MaxConns = 1 // one connection: its statement cache is warm after the first event of each shape
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	proc := webhooks.NewProcessor(pool, kinds(r.smtp.Addr(), r.api.URL()), webhooks.NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), webhooks.Options{Lease: 5 * time.Minute})
	ctx := context.Background()
	// Bodies of 4 KB, as real events are: whether a body travels shows in
	// the bytes written.
	const bodySize = 4096
	ev := func(id string) webhooks.Event {
		body := fmt.Appendf(nil, `{"id":%q,"pad":%q}`, id, strings.Repeat("x", bodySize))
		return webhooks.Event{Source: "test", Key: id, ID: id, Type: "test.paid", Body: body}
	}
	var sent int64 // bytes written by the last measure
	process := func(name string, prov planner, e webhooks.Event, want webhooks.Outcome, trips int64) {
		t.Helper()
		before, bytes := count.n.Load(), count.bytes.Load()
		if res := proc.Process(ctx, planOnly{prov}, e); res.Outcome != want {
			t.Fatalf("%s: %+v, want %s", name, res, want)
		}
		sent = count.bytes.Load() - bytes
		if got := count.n.Load() - before; got != trips {
			t.Errorf("%s: %d round trips, want %d", name, got, trips)
		}
	}
	measure := func(name string, prov planner, id string, want webhooks.Outcome, trips int64) {
		t.Helper()
		process(name, prov, ev(id), want, trips)
	}
	resent := func(name string, prov planner, id string, want webhooks.Outcome, trips int64) {
		t.Helper()
		e := ev(id)
		e.Resent = true
		process(name, prov, e, want, trips)
	}
	// Warm the statement cache with one event of each shape, and a copy.
	for _, w := range []struct {
		prov planner
		id   string
	}{{invoiceProvider{}, "evt_warm1"}, {invoiceProvider{}, "evt_warm1"}, {testProvider{}, "evt_warm2"}} {
		proc.Process(ctx, planOnly{w.prov}, ev(w.id))
	}
	warm := ev("evt_warm1")
	warm.Resent = true
	proc.Process(ctx, planOnly{invoiceProvider{}}, warm)
	t.Run("NewDatabaseOnlyEvent", func(t *testing.T) {
		measure("new invoice event", invoiceProvider{}, "evt_inv", webhooks.OutcomeProcessed, 1)
	})
	t.Run("CopyOfFinishedEvent", func(t *testing.T) {
		measure("copy", invoiceProvider{}, "evt_inv", webhooks.OutcomeDuplicate, copyTrips)
	})
	t.Run("ResentCopyOfFinishedEvent", func(t *testing.T) {
		measure("copy", invoiceProvider{}, "evt_inv", webhooks.OutcomeDuplicate, copyTrips)
		copyBytes := sent
		resent("resent copy", invoiceProvider{}, "evt_inv", webhooks.OutcomeDuplicate, 1)
		t.Logf("bytes written: copy %d, resent copy %d (body %d)", copyBytes, sent, bodySize)
		if sent >= bodySize || copyBytes < bodySize {
			t.Errorf("bytes written: copy %d, resent copy %d: want the body (%d bytes) sent by the copy only", copyBytes, sent, bodySize)
		}
	})
	t.Run("ResentNewEvent", func(t *testing.T) {
		// The hint was wrong: one round trip more, and processed.
		resent("resent new event", invoiceProvider{}, "evt_inv_r", webhooks.OutcomeProcessed, 2)
		resent("resent copy", invoiceProvider{}, "evt_inv_r", webhooks.OutcomeDuplicate, 1)
	})
	t.Run("NewEventWithTwoSteps", func(t *testing.T) {
		measure("new paid event", testProvider{}, "evt_paid", webhooks.OutcomeProcessed, 1+2)
	})
	t.Run("NewEventAfterCopies", func(t *testing.T) {
		measure("copy", testProvider{}, "evt_paid", webhooks.OutcomeDuplicate, copyTrips)
		measure("copy", invoiceProvider{}, "evt_inv", webhooks.OutcomeDuplicate, copyTrips)
		measure("new invoice event", invoiceProvider{}, "evt_inv2", webhooks.OutcomeProcessed, 1)
		measure("new paid event", testProvider{}, "evt_paid2", webhooks.OutcomeProcessed, 1+2)
	})
}

type planner interface {
	Plan(*webhooks.Event, *webhooks.Plan) error
}

// planOnly is a provider made of a Plan: Process never verifies.
type planOnly struct{ p planner }

func (planOnly) Verify(http.Header, []byte, time.Time) (webhooks.Event, error) {
	return webhooks.Event{}, nil
}
func (o planOnly) Plan(ev *webhooks.Event, p *webhooks.Plan) error { return o.p.Plan(ev, p) }

// TestStatementsPlannedOnce: PostgreSQL plans each statement of an event's
// transaction, and the read of a resend's claims, once per connection and
// then reuses the plan (pg_prepared_statements counts a generic plan per
// execution), instead of planning it anew at every execution as it does
// for a statement whose best plan depends on its parameters.
func TestStatementsPlannedOnce(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // the statements and pg_prepared_statements on one connection
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	proc := webhooks.NewProcessor(pool, webhooks.StepKinds{}, webhooks.NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), webhooks.Options{})
	ctx := context.Background()
	// On a small table any plan is cheap; at 50,000 rows a plan that
	// cannot see the key's range is no longer one.
	if _, err := pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, event_type, body)
SELECT 'evt_fill_' || g, 'test', 'done', 'event', 'test.paid', '{}' FROM generate_series(1, 50000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE processed_events`); err != nil {
		t.Fatal(err)
	}
	const events = 20
	for i := range events {
		id := fmt.Sprintf("evt_plan_%02d", i)
		e := webhooks.Event{Source: "test", Key: id, ID: id, Type: "test.paid", Body: []byte(`{}`)}
		for _, resent := range []bool{false, false, true} { // new, copy, resent copy
			e.Resent = resent
			if res := proc.Process(ctx, planOnly{invoiceProvider{}}, e); res.Outcome == webhooks.OutcomeError {
				t.Fatal(res.Err)
			}
		}
	}
	rows, err := pool.Query(ctx, `
SELECT left(regexp_replace(statement, '\s+', ' ', 'g'), 60), generic_plans, custom_plans
FROM pg_prepared_statements WHERE statement !~ 'pg_prepared_statements'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var stmt string
		var generic, custom int64
		if err := rows.Scan(&stmt, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		n++
		t.Logf("%-60s generic %3d custom %3d", stmt, generic, custom)
		// PostgreSQL tries 5 custom plans before it compares.
		if custom > 5 {
			t.Errorf("%s: planned anew %d times in %d events", stmt, custom, events)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("%d prepared statements, want the claim, the claims read and the invoice's", n)
	}
}

// manySteps plans more steps than an event may have.
type manySteps struct{}

func (manySteps) Plan(ev *webhooks.Event, p *webhooks.Plan) error {
	for i := range webhooks.MaxSteps + 1 {
		p.Step(webhooks.Step{Name: fmt.Sprintf("s%d", i), Kind: "fulfillment", Payload: []byte(`{}`)})
	}
	return nil
}

// TestTooManySteps: a plan of more than MaxSteps steps (which the read of
// an event's claims could not see whole) is refused, and nothing is written.
func TestTooManySteps(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	e := r.event("evt_many")
	res := r.proc.Process(context.Background(), planOnly{manySteps{}}, e)
	if res.Outcome != webhooks.OutcomeError || res.Err == nil || !strings.Contains(res.Err.Error(), "more than the 100") {
		t.Fatalf("%+v, want an error naming the bound", res)
	}
	var n int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM processed_events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written (%v), want none", n, err)
	}
}

// TestClaimsOfThisEventOnly: the read of an event's claims scans the
// primary key from its key, where another event's key that extends it
// ("evt_pre-x" after "evt_pre") may lie; that event's state is not taken
// for this one's.
func TestClaimsOfThisEventOnly(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, event_type, body, last_error)
VALUES ('evt_pre-x', 'test', 'parked', 'event', 'test.paid', '{}', 'parked on purpose'),
       ('evt_pre.y', 'test', 'parked', 'event', 'test.paid', '{}', 'parked on purpose')`); err != nil {
		t.Fatal(err)
	}
	e := r.event("evt_pre")
	if res := r.proc.Process(ctx, planOnly{invoiceProvider{}}, e); res.Outcome != webhooks.OutcomeProcessed {
		t.Fatalf("new: %+v", res)
	}
	for _, resent := range []bool{false, true} {
		e.Resent = resent
		if res := r.proc.Process(ctx, planOnly{invoiceProvider{}}, e); res.Outcome != webhooks.OutcomeDuplicate {
			t.Errorf("copy (resent %v): %+v, want duplicate", resent, res)
		}
	}
}
