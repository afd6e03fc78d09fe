package reconcile_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pgbouncer"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
)

func TestStoreLock(t *testing.T) {
	pool := pgtest.NewPool(t)
	a := reconcile.NewStore(pool)
	b := reconcile.NewStore(reconciletest.OpenPool(t, pool.Config().ConnString())) // another replica
	ctx := context.Background()

	release, err := a.Lock(ctx, sourceA)
	if err != nil {
		t.Fatal(err)
	}
	if err := tryLock(b, sourceA); !errors.Is(err, reconcile.ErrBusy) {
		t.Errorf("second lock: %v, want ErrBusy", err)
	}
	if err := tryLock(a, sourceA); !errors.Is(err, reconcile.ErrBusy) {
		t.Errorf("second lock from the same pool: %v, want ErrBusy", err)
	}
	other, err := b.Lock(ctx, sourceB)
	if err != nil {
		t.Errorf("another source's lock: %v", err)
	} else {
		other()
	}
	release()
	again, err := b.Lock(ctx, sourceA)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()

	t.Run("ReleasedWhenTheSessionDies", func(t *testing.T) {
		dying := reconciletest.OpenPool(t, pool.Config().ConnString())
		releaseDead, err := reconcile.NewStore(dying).Lock(ctx, sourceA)
		if err != nil {
			t.Fatal(err)
		}
		// The holder's session ends (its process died, or the network
		// dropped it): PostgreSQL releases the lock.
		reconciletest.MustExec(t, pool, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.pid <> pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
		deadline := time.Now().Add(10 * time.Second)
		for {
			release, err := a.Lock(ctx, sourceA)
			if err == nil {
				release()
				break
			}
			if !errors.Is(err, reconcile.ErrBusy) || time.Now().After(deadline) {
				t.Fatalf("lock after the holder's session ended: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		releaseDead() // closes a connection already dead
	})
	t.Run("ConcurrentReplicas", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		got, busy := 0, 0
		hold := make(chan struct{})
		for range 8 {
			replica := reconcile.NewStore(reconciletest.OpenPool(t, pool.Config().ConnString()))
			wg.Add(1)
			go func() {
				defer wg.Done()
				release, err := replica.Lock(ctx, "race")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					got++
					go func() { <-hold; release() }()
				case errors.Is(err, reconcile.ErrBusy):
					busy++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		close(hold)
		if got != 1 || busy != 7 {
			t.Errorf("%d holders, %d busy; want 1 and 7", got, busy)
		}
	})
}

// TestStoreLockBehindPooler: replicas whose pool is a transaction-mode
// PgBouncer take the lock on a session of their own, over the session URL:
// one holds it, the others are busy, and its release frees it at once.
// Through the pooler itself, the lock would stay with whichever server
// connection took it, past the release, and the next client to land on
// that connection would hold it too.
func TestStoreLockBehindPooler(t *testing.T) {
	if _, err := pgbouncer.Find(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	direct := pgtest.NewDB(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgbouncer.Start(ctx, pgbouncer.Options{Upstream: direct, PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	q := u.Query()
	q.Set("application_name", "reconcile-session")
	u.RawQuery = q.Encode()
	replica := func() *reconcile.Store {
		pool, err := db.Open(ctx, b.URL(strings.TrimPrefix(u.Path, "/")), 4, db.WithSession(u.String()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return reconcile.NewStore(pool)
	}
	a, other := replica(), replica()
	watch := reconciletest.OpenPool(t, direct)

	for round := range 3 {
		release, err := a.Lock(ctx, sourceA)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		holder := reconciletest.Count(t, watch, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'reconcile-session'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
		if holder != 1 {
			t.Errorf("round %d: %d advisory locks held by a session of the session URL, want 1", round, holder)
		}
		if err := tryLock(other, sourceA); !errors.Is(err, reconcile.ErrBusy) {
			t.Errorf("round %d: another replica's lock: %v, want ErrBusy", round, err)
		}
		release()
		if err := tryLock(other, sourceA); err != nil {
			t.Errorf("round %d: another replica's lock after the release: %v", round, err)
		}
	}
	// This database's locks: other packages' tests share the cluster.
	if n := reconciletest.Count(t, watch, `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); n != 0 {
		t.Errorf("%d advisory locks left after every release", n)
	}
}

// tryLock takes the lock and gives it back at once.
func tryLock(s *reconcile.Store, source string) error {
	release, err := s.Lock(context.Background(), source)
	if err == nil {
		release()
	}
	return err
}

func TestStoreKnown(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := reconcile.NewStore(pool)
	reconciletest.MustExec(t, pool, `INSERT INTO processed_events (event_key, source, status, kind, via) VALUES
		('evt_a', 'alpha', 'done', 'event', 'delivery'),
		('evt_b', 'alpha', 'parked', 'event', 'reconcile'),
		('evt_a/email.receipt', 'alpha', 'in_progress', 'step', NULL)`)
	known, err := s.Known(context.Background(), []string{"evt_a", "evt_b", "evt_c", "evt_a/email.receipt"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"evt_a": true, "evt_b": true}, known); diff != "" {
		t.Errorf("known (-want +got):\n%s", diff)
	}
	if known, err := s.Known(context.Background(), nil); err != nil || len(known) != 0 {
		t.Errorf("no keys: %v %v", known, err)
	}
}

func TestStoreRunsAndCursors(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := reconcile.NewStore(pool)
	ctx := context.Background()
	if _, ok, err := s.Cursor(ctx, sourceA, ""); ok || err != nil {
		t.Errorf("cursor of an empty table: %t %v", ok, err)
	}
	id, err := s.StartRun(ctx, sourceA, reconcile.TriggerCLI)
	if err != nil {
		t.Fatal(err)
	}
	c := reconcile.Cursor{ID: "evt_1", Created: time.Unix(1700000000, 0)}
	if err := s.SaveCursor(ctx, sourceA, "", c, id); err != nil {
		t.Fatal(err)
	}
	back := reconcile.Cursor{ID: "evt_0", Created: time.Unix(1600000000, 0)}
	if err := s.SaveCursor(ctx, sourceA, "failed_only", back, id); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Cursor(ctx, sourceA, "")
	if err != nil || !ok || !got.Equal(c) {
		t.Errorf("cursor %+v %t %v, want %+v", got, ok, err, c)
	}
	if err := s.FinishRun(ctx, id, reconcile.Tally{Found: 3, Missed: 1}, map[string]int{"found": 3}, nil); err != nil {
		t.Fatal(err)
	}
	failed, _ := s.StartRun(ctx, sourceA, reconcile.TriggerPeriodic)
	if err := s.FinishRun(ctx, failed, reconcile.Tally{}, nil, errors.New("api: 500")); err != nil {
		t.Fatal(err)
	}
	running, _ := s.StartRun(ctx, sourceB, reconcile.TriggerPeriodic)
	runs, err := s.Runs(ctx, sourceA, 10)
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %+v %v", runs, err)
	}
	if runs[0].ID != failed || runs[0].Result != "error" || runs[0].Error != "api: 500" ||
		runs[1].Result != "ok" || runs[1].Tally.Missed != 1 || string(runs[1].Summary) != `{"found": 3}` {
		t.Errorf("runs %+v", runs)
	}
	m, _ := s.Runs(ctx, sourceB, 10)
	if len(m) != 1 || m[0].ID != running || m[0].Result != "running" || !m[0].FinishedAt.IsZero() {
		t.Errorf("running run %+v", m)
	}
	if n, err := s.PruneRuns(ctx, time.Now().Add(time.Minute)); err != nil || n != 3 {
		t.Errorf("pruned %d, %v", n, err)
	}
}

func TestRunnerAndMetrics(t *testing.T) {
	pool := pgtest.NewPool(t)
	store := reconcile.NewStore(pool)
	reg := prometheus.NewRegistry()
	metrics := reconcile.NewMetrics(reg)
	reg.MustRegister(reconcile.NewCollector(pool, reconciletest.Log(t)))
	ctx := context.Background()

	// A job that records its runs as the real ones do.
	job := func(source string, tally reconcile.Tally, err error) reconcile.Job {
		return reconcile.Job{Source: source, Run: func(ctx context.Context) (reconcile.Tally, error) {
			if errors.Is(err, reconcile.ErrBusy) {
				return reconcile.Tally{}, err
			}
			id, e := store.StartRun(ctx, source, reconcile.TriggerPeriodic)
			if e != nil {
				return reconcile.Tally{}, e
			}
			return tally, errors.Join(err, store.FinishRun(ctx, id, tally, nil, err))
		}}
	}
	r := &reconcile.Runner{Interval: time.Hour, Metrics: metrics, Store: store, Log: reconciletest.Log(t), Jobs: []reconcile.Job{
		job(sourceA, reconcile.Tally{Found: 10, Missed: 3}, nil),
		job(sourceB, reconcile.Tally{Found: 4, Missed: 2, Unresolved: 1}, errors.New("api: 502")),
		job("busy", reconcile.Tally{}, reconcile.ErrBusy),
	}}
	r.Once(ctx)
	r.Once(ctx) // within the interval: the jobs that ran are not run again (another replica would skip them too)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// name{label values, by label name} → value
	values := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetGauge() != nil:
				values[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				values[key] = m.GetCounter().GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"webhook_reconcile_runs_total{ok,alpha}":      1,
		"webhook_reconcile_runs_total{recent,alpha}":  1,
		"webhook_reconcile_runs_total{error,beta}":    1,
		"webhook_reconcile_runs_total{recent,beta}":   1,
		"webhook_reconcile_runs_total{busy,busy}":     2,
		"webhook_reconcile_missed_total{alpha}":       3,
		"webhook_reconcile_missed_total{beta}":        2,
		"webhook_reconcile_last_run_missed{alpha}":    3,
		"webhook_reconcile_last_run_unresolved{beta}": 1,
	} {
		if got, ok := values[key]; !ok || got != want {
			t.Errorf("%s = %v (present: %t), want %v", key, got, ok, want)
		}
	}
	last := values["webhook_reconcile_last_success_timestamp_seconds{alpha}"]
	if d := time.Since(time.Unix(int64(last), 0)); d < 0 || d > time.Minute {
		t.Errorf("last success of alpha %v (%v ago)", last, d)
	}
	if _, ok := values["webhook_reconcile_last_success_timestamp_seconds{beta}"]; ok {
		t.Error("a last success for a source whose runs all failed")
	}

	t.Run("RunStopsWithTheContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{}, 10)
		r := &reconcile.Runner{Interval: 10 * time.Millisecond, Log: reconciletest.Log(t), Jobs: []reconcile.Job{{Source: "x",
			Run: func(context.Context) (reconcile.Tally, error) { ran <- struct{}{}; return reconcile.Tally{}, nil }}}}
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		<-ran
		<-ran
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// The framework's tests reconcile two made-up sources.
const sourceA, sourceB = "alpha", "beta"
