package server_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// TestPeriodicReconcilerTwoReplicas: two replicas with RECONCILE_INTERVAL
// catch up on the events Stripe could not deliver, once (no event twice),
// and between them reconcile once per interval, not once per replica.
func TestPeriodicReconcilerTwoReplicas(t *testing.T) {
	const key = "rk_test_periodic_0123456789"
	dbURL := pgtest.NewDB(t)
	api := stripetest.New(t, key)
	now := time.Now().Truncate(time.Second)
	for i, id := range []string{"in_p1", "in_p2", "in_p3"} {
		api.Add("invoice.created", now.Add(time.Duration(i-50)*time.Minute/10), map[string]any{"id": id,
			"object": "invoice", "amount_due": 100, "currency": "usd"}, false)
	}
	const interval = time.Second
	env := map[string]string{"DATABASE_URL": dbURL, "HTTP_ADDR": "127.0.0.1:0", "MAIL_DIR": t.TempDir(),
		"STRIPE_API_KEY": key, "STRIPE_API_BASE": api.URL, "RECONCILE_INTERVAL": interval.String()}
	cfg, err := wiring.Load(func(k string) string { return env[k] }, providers.All())
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	started := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		srv, err := server.New(context.Background(), cfg, providers.List(), wiring.StepKinds(cfg, providers.List()), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer srv.Close()
			if err := srv.Run(ctx, nil); err != nil {
				t.Error(err)
			}
		})
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	count := func(sql string) int {
		var n int
		if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for count(`SELECT count(*) FROM invoices`) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the periodic reconciler never caught up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	first := time.Now()
	for time.Since(first) < 8*interval {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	wg.Wait()
	elapsed := time.Since(started)
	runs := count(`SELECT count(*) FROM reconcile_runs WHERE source = 'stripe' AND triggered_by = 'periodic'`)
	// A replica skips a job another started less than 0.9 interval ago.
	if max := int(float64(elapsed)/(0.9*float64(interval))) + 2; runs > max {
		t.Errorf("%d periodic runs in about %s by two replicas, want at most %d: once per interval, not per replica", runs, elapsed.Round(time.Second), max)
	}
	if n := count(`SELECT count(*) FROM processed_events WHERE kind = 'event' AND via = 'reconcile'`); n != 3 {
		t.Errorf("events reconciled = %d, want 3, once each", n)
	}
	t.Logf("%d periodic runs by two replicas over about %s", runs, elapsed.Round(time.Second))
}
