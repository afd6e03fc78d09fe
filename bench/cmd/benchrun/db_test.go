package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/bench/pgbench"
	"github.com/paywebhooks/receiver/bench/snippetdb"
	"github.com/paywebhooks/receiver/internal/pgtest"
)

// These tests run the harness's SQL against the current migrations, so that
// a schema change that breaks the benchmark shows in make test.

func TestMain(m *testing.M) { pgtest.Main(m) }

func testBench(t *testing.T, dbs ...string) *bench {
	b := &bench{o: options{concurrency: 2, rows: 3000, growBody: "small", redriveParallelism: 8},
		rep: newReport(options{}), urls: map[string]string{}, tmp: t.TempDir()}
	for _, name := range dbs {
		b.urls[name] = pgtest.NewDB(t)
	}
	return b
}

func query[T any](t *testing.T, url, sql string, args ...any) T {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func TestBulkLoadFillsTheNewColumns(t *testing.T) {
	ctx := context.Background()
	for _, body := range []string{"small", "full"} {
		t.Run(body, func(t *testing.T) {
			b := testBench(t, "recv", "grown")
			b.o.growBody = body
			b.invoiceBody = string(testInvoiceBody)
			if err := b.bulkLoad(ctx); err != nil {
				t.Fatal(err)
			}
			u := b.url("grown")
			if n := query[int64](t, u, `SELECT count(*) FROM processed_events`); n != 3000 {
				t.Errorf("%d rows, want 3000", n)
			}
			if n := query[int64](t, u, `SELECT count(*) FROM processed_events WHERE kind = 'event'
  AND body IS NOT NULL AND event_id = event_key AND event_type IS NOT NULL AND api_version IS NOT NULL
  AND outcome = 'processed' AND via = 'delivery' AND status = 'done' AND completed_at IS NOT NULL`); n != 2000 {
				t.Errorf("%d complete event rows, want 2000", n)
			}
			if n := query[int64](t, u, `SELECT count(*) FROM processed_events s JOIN processed_events e ON e.event_key = s.parent_key
  WHERE s.kind = 'step' AND s.event_key = e.event_key || '/' || s.step AND s.step_kind IS NOT NULL AND s.payload IS NOT NULL
    AND e.event_type = 'checkout.session.completed'`); n != 1000 {
				t.Errorf("%d step rows under a checkout event, want 1000", n)
			}
			// The receiver's range read finds an event and its steps.
			key := query[string](t, u, `SELECT parent_key FROM processed_events WHERE kind = 'step' LIMIT 1`)
			if n := query[int64](t, u, `SELECT count(*) FROM processed_events
  WHERE event_key >= $1 AND event_key < $1 || '0' AND (event_key = $1 OR starts_with(event_key, $1 || '/'))`, key); n != 3 {
				t.Errorf("the range of %s holds %d rows, want 3", key, n)
			}
			bodyLen := query[float64](t, u, `SELECT avg(octet_length(body)) FROM processed_events WHERE kind = 'event'`)
			if (body == "full") != (bodyLen > 5000) {
				t.Errorf("%s bodies are %.0f bytes", body, bodyLen)
			}
		})
	}
}

// testInvoiceBody is a stand-in for loadgen -print-body: what bulkLoad needs
// of it is an "id" to replace.
var testInvoiceBody = []byte(`{
  "id": "evt_1TestTestTestTestTestTestT",
  "object": "event",
  "data": {"object": {"id": "in_1x", "customer_email": "o'hara@example.com", "pad": "` + strings.Repeat("x", 5200) + `"}},
  "type": "invoice.created"
}`)

// TestDrainSeedsAndWaits seeds a backlog as phase 6 does and drains it with
// a stand-in redriver: waitDrained must end once every key was called and
// every row is done.
func TestDrainSeedsAndWaits(t *testing.T) {
	ctx := context.Background()
	b := testBench(t, "drain")
	const steps = 60
	if err := b.seedBacklog(ctx, "evt_drain1_", steps); err != nil {
		t.Fatal(err)
	}
	u := b.url("drain")
	if n := query[int64](t, u, `SELECT count(*) FROM processed_events s JOIN processed_events e ON e.event_key = s.parent_key
  JOIN orders o ON o.id = (s.payload->'order'->>'id')::bigint
  WHERE s.kind = 'step' AND s.status = 'in_progress' AND s.claimed_at = '-infinity' AND s.step_kind = 'fulfillment'
    AND s.claim_token = 1 AND s.attempts = 1 AND e.kind = 'event' AND o.status = 'paid'`); n != steps {
		t.Fatalf("%d seeded steps, want %d", n, steps)
	}
	api, err := startFulfillmentAPI(20 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer api.close()

	// The stand-in redriver: 6 workers, each step called once and done.
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, _ := pool.Query(ctx, `SELECT event_key FROM processed_events WHERE kind = 'step' AND status = 'in_progress'`)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	work := make(chan string, len(keys))
	for _, k := range keys {
		work <- k
	}
	close(work)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for k := range work {
				req, _ := http.NewRequest(http.MethodPost, api.url()+"/fulfillments", strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", "fulfil-"+k)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
				_, _ = pool.Exec(ctx, `UPDATE processed_events SET status = 'done', completed_at = now() WHERE event_key = $1`, k)
			}
		})
	}
	r := drainResult{steps: steps, started: time.Now()}
	if err := b.waitDrained(ctx, api, "evt_drain1_", &r, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	st := api.stats()
	if r.done != steps || st.distinct != steps || st.repeated != 0 || st.peak < 2 || st.peak > 6 || r.rate() <= 0 {
		t.Fatalf("done %d, api %+v, rate %.1f", r.done, st, r.rate())
	}
	// 60 steps of 20 ms on 6 workers take at least 0.2 s: at most 300/s
	// (and less on a busy machine).
	if r.rate() > 330 {
		t.Errorf("rate %.1f steps/s, more than 6 workers can do", r.rate())
	}
}

// TestPgbenchScriptsRun runs every pgbench script for a second against the
// current schema.
func TestPgbenchScriptsRun(t *testing.T) {
	bin, err := findPgbench("/nonexistent")
	if err != nil {
		t.Skip(err)
	}
	b := testBench(t, "pgb", "pgbsnip")
	snippetTables(t, b.url("pgbsnip"))
	b.pgbenchBin = bin
	b.invoiceBody = string(testInvoiceBody)
	for _, sc := range []pgbench.Script{pgbench.ReceiverNew, pgbench.MinimalNew, pgbench.SnippetNew, pgbench.SnippetNewTx} {
		s, err := b.pgbench(context.Background(), pgbenchDB(sc), sc, 2, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", sc.File, err)
		}
		if s.rate <= 0 || s.n <= 0 || s.cpu.Client <= 0 {
			t.Errorf("%s: %+v", sc.File, s)
		}
	}
	u := b.url("pgb")
	if n := query[int64](t, b.url("pgbsnip"), `SELECT count(*) FROM processed_events p JOIN invoices i ON i.stripe_invoice_id = 'in_pg' || substr(p.event_key, 7)
  WHERE p.event_key LIKE 'evt_pg%'`); n == 0 {
		t.Error("(c) and (c1) stored no claims with their invoices on the snippet's tables")
	}
	// (a) remembers each event's customer, a new one each time.
	if n := query[int64](t, u, `SELECT count(*) FROM customers c JOIN processed_events p ON p.event_key = c.provider_event_id
  WHERE c.customer_id = 'cus_pga' || substr(p.event_key, 8)`); n == 0 {
		t.Error("(a) remembered no customer")
	}
	if n := query[int64](t, u, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'evt_pga%'
  AND octet_length(body) = $1 AND event_type = 'invoice.created' AND via = 'delivery'`, len(testInvoiceBody)); n == 0 {
		t.Error("(a) stored no body")
	}
	if n := query[int64](t, u, `SELECT count(*) FROM processed_events p JOIN invoices i ON i.stripe_invoice_id = 'in_pgm' || substr(p.event_key, 8)
  WHERE p.event_key LIKE 'evt_pgm%'`); n == 0 {
		t.Error("(b) stored no event with its invoice")
	}
	if p99, err := b.pgbenchRateP99(context.Background(), "pgb", pgbench.ReceiverNew, 2, 50, time.Second); err != nil || p99 <= 0 {
		t.Errorf("pgbench -R: p99 %.1f ms, %v", p99, err)
	}
}

// snippetTables makes the test database at url the snippet's: its own two
// tables instead of the receiver's.
func snippetTables(t *testing.T, url string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `DROP TABLE processed_events, invoices CASCADE`); err != nil {
		t.Fatal(err)
	}
	if err := snippetdb.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	var cols int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM information_schema.columns WHERE table_name = 'processed_events'`).Scan(&cols); err != nil || cols != 5 {
		t.Fatalf("the snippet's processed_events has %d columns (%v)", cols, err)
	}
}

// TestDropIndexes drops receiver indexes by name from a migrated database,
// and fails on a name that is not one of them.
func TestDropIndexes(t *testing.T) {
	ctx := context.Background()
	b := testBench(t, "brecv")
	u := b.url("brecv")
	const count = `SELECT count(*) FROM pg_indexes WHERE indexname IN ('processed_events_received_idx', 'invoices_customer_email_idx')`
	if n := query[int64](t, u, count); n != 2 {
		t.Fatalf("%d of the two indexes before, want 2", n)
	}
	if err := b.dropIndexes(ctx, "brecv", []string{"processed_events_received_idx", "invoices_customer_email_idx"}); err != nil {
		t.Fatal(err)
	}
	if n := query[int64](t, u, count); n != 0 {
		t.Errorf("%d of the two indexes left, want 0", n)
	}
	if n := query[int64](t, u, `SELECT count(*) FROM pg_indexes WHERE indexname = 'processed_events_pkey'`); n != 1 {
		t.Error("an index not named was dropped")
	}
	if err := b.dropIndexes(ctx, "brecv", []string{"no_such_idx"}); err == nil {
		t.Error("an index that does not exist was dropped without an error")
	}
}

// TestAblateOncePerDatabase: phase 2's baseline starts again on phase 1's
// database, which has dropped the indexes already; a name no database has
// still fails.
func TestAblateOncePerDatabase(t *testing.T) {
	ctx := context.Background()
	b := testBench(t, "brecv", "bburst")
	b.o.baseDropIndexes = []string{"processed_events_received_idx"}
	for i := range 2 {
		if err := b.ablate(ctx, "brecv"); err != nil {
			t.Fatalf("start %d on brecv: %v", i+1, err)
		}
	}
	if n := query[int64](t, b.url("brecv"), `SELECT count(*) FROM pg_indexes WHERE indexname = 'processed_events_received_idx'`); n != 0 {
		t.Errorf("brecv kept the index (%d)", n)
	}
	if n := query[int64](t, b.url("bburst"), `SELECT count(*) FROM pg_indexes WHERE indexname = 'processed_events_received_idx'`); n != 1 {
		t.Errorf("bburst, not started yet, lost the index (%d)", n)
	}
	b.o.baseDropIndexes = []string{"no_such_idx"}
	if err := b.ablate(ctx, "bburst"); err == nil {
		t.Error("a name no database has was accepted")
	}
}
