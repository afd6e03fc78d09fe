package webhooks_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/invoices"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// roundTrips counts what a pool sends to the server: every query outside a
// batch is a round trip, and so is every batch (its statements travel
// together).
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if ctx.Value(inBatch{}) == nil {
		c.n.Add(1)
	}
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return context.WithValue(ctx, inBatch{}, true)
}
func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

type inBatch struct{}

// invoiceProvider writes an invoice and plans nothing: a database-only
// event, as invoice.created is.
type invoiceProvider struct{}

func (invoiceProvider) Plan(ev *webhooks.Event, p *webhooks.Plan) error {
	invoices.EnsurePending(p, invoices.Invoice{StripeInvoiceID: "in_" + ev.ID, AmountDue: 100, Currency: "usd"})
	return nil
}

// TestNewEventOneRoundTrip: a new database-only event costs one round trip
// (its claim, body, writes and commit travel together), a copy of it one
// more, and a new event with two steps one, plus one per step to record it.
func TestNewEventOneRoundTrip(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	count := &roundTrips{}
	cfg.ConnConfig.Tracer = count
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
	ev := func(id string) webhooks.Event {
		return webhooks.Event{Source: "test", Key: id, ID: id, Type: "test.paid", Body: []byte(fmt.Sprintf(`{"id":%q}`, id))}
	}
	measure := func(name string, prov planner, id string, want webhooks.Outcome, trips int64) {
		t.Helper()
		before := count.n.Load()
		if res := proc.Process(ctx, planOnly{prov}, ev(id)); res.Outcome != want {
			t.Fatalf("%s: %+v, want %s", name, res, want)
		}
		if got := count.n.Load() - before; got != trips {
			t.Errorf("%s: %d round trips, want %d", name, got, trips)
		}
	}
	// Warm the statement cache with one event of each shape, and a copy.
	for _, w := range []struct {
		prov planner
		id   string
	}{{invoiceProvider{}, "evt_warm1"}, {invoiceProvider{}, "evt_warm1"}, {testProvider{}, "evt_warm2"}} {
		proc.Process(ctx, planOnly{w.prov}, ev(w.id))
	}
	t.Run("NewDatabaseOnlyEvent", func(t *testing.T) {
		measure("new invoice event", invoiceProvider{}, "evt_inv", webhooks.OutcomeProcessed, 1)
	})
	t.Run("CopyOfFinishedEvent", func(t *testing.T) {
		measure("copy", invoiceProvider{}, "evt_inv", webhooks.OutcomeDuplicate, 1)
	})
	t.Run("NewEventWithTwoSteps", func(t *testing.T) {
		measure("new paid event", testProvider{}, "evt_paid", webhooks.OutcomeProcessed, 1+2)
	})
}

type planner interface {
	Plan(*webhooks.Event, *webhooks.Plan) error
}

// planOnly is a provider made of a Plan: Process never verifies.
type planOnly struct{ p planner }

func (planOnly) Verify(http.Header, []byte, time.Time) (webhooks.Event, error) { return webhooks.Event{}, nil }
func (o planOnly) Plan(ev *webhooks.Event, p *webhooks.Plan) error { return o.p.Plan(ev, p) }
