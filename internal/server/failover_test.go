package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/reconcile"
)

// TestPrimaryWatch: the first primary read is remembered; a failed read
// (no primary answers) changes nothing; a new timeline, and later another
// cluster, are each reported once, loudly, with what to run; a refusal
// ends the watch.
func TestPrimaryWatch(t *testing.T) {
	p1 := db.Primary{SystemID: 7, Timeline: 1}
	p2 := db.Primary{SystemID: 7, Timeline: 2}
	p3 := db.Primary{SystemID: 9, Timeline: 1}
	reads := []struct {
		p   db.Primary
		err error
	}{
		{err: errors.New("connection refused")},
		{p: p1}, {p: p1},
		{err: errors.New("connection refused")}, // the gap without a primary
		{p: p2}, {p: p2},
		{p: p3},
		{err: &pgconn.PgError{Code: "42501", Message: "permission denied for function pg_current_wal_lsn"}},
		{p: db.Primary{SystemID: 1, Timeline: 1}}, // never read: the watch has ended
	}
	var mu sync.Mutex
	i := 0
	var logs strings.Builder
	var changes [][2]db.Primary
	w := &primaryWatch{
		read: func(context.Context) (db.Primary, error) {
			mu.Lock()
			defer mu.Unlock()
			r := reads[min(i, len(reads)-1)]
			i++
			return r.p, r.err
		},
		every:    time.Millisecond,
		log:      slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil)),
		commands: []string{"server reconcile stripe --since 72h"},
		changes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "failovers_total", Help: "test"}),
		onChange: func(_ context.Context, from, to db.Primary) { changes = append(changes, [2]db.Primary{from, to}) },
	}
	done := make(chan struct{})
	go func() { w.run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the watch did not end after the database refused")
	}
	mu.Lock()
	defer mu.Unlock()
	if i != len(reads)-1 {
		t.Errorf("%d reads, want %d (none after the refusal)", i, len(reads)-1)
	}
	want := [][2]db.Primary{{p1, p2}, {p2, p3}}
	if len(changes) != 2 || changes[0] != want[0] || changes[1] != want[1] {
		t.Errorf("changes %v, want %v", changes, want)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(w.changes)
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 2 {
		t.Errorf("failovers counted %v (%v), want 2", mfs, err)
	}
	out := logs.String()
	for _, s := range []string{"level=ERROR msg=\"database fail-over: the primary changed: a standby was promoted",
		"run: server reconcile stripe --since 72h", "from=\"system 7 timeline 1\" to=\"system 7 timeline 2\"",
		"the database is another cluster", "fail-over detection off"} {
		if !strings.Contains(out, s) {
			t.Errorf("the log lacks %q:\n%s", s, out)
		}
	}
}

// TestFailoverCommands: one command per configured reconciler, with
// --since where it takes one.
func TestFailoverCommands(t *testing.T) {
	rs := []reconcile.Reconciler{{Name: "stripe", Flags: []string{"since", "resume"}}, {Name: "github-marketplace"},
		{Name: "paddle", Flags: []string{"since"}}}
	on := map[string]reconcile.Instance{"stripe": nil, "github-marketplace": nil}
	got := strings.Join(failoverCommands(rs, on), "; ")
	if want := "server reconcile github-marketplace; server reconcile stripe --since 72h"; got != want {
		t.Errorf("commands %q, want %q", got, want)
	}
}

// TestFailoverReconcile: after a fail-over, every configured reconciler runs
// once over FailoverLookback, recorded as the fail-over's; one another
// replica runs already is left to it, and a failure says to run it by
// hand.
func TestFailoverReconcile(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	runs := map[string]reconcile.Options{}
	inst := func(name string, err error) reconcile.Instance {
		return fakeInstance{run: func(_ context.Context, o reconcile.Options) (reconcile.Summary, error) {
			runs[name] = o
			return fakeSummary{}, err
		}}
	}
	s := &Server{log: slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil)), reconcilers: map[string]reconcile.Instance{
		"stripe": inst("stripe", nil), "paddle": inst("paddle", reconcile.ErrBusy), "github-marketplace": inst("github-marketplace", errors.New("GitHub is down")),
	}}
	s.failoverReconcile(context.Background())
	for _, name := range []string{"stripe", "paddle", "github-marketplace"} {
		if o := runs[name]; o.Since != FailoverLookback || o.Trigger != TriggerFailover {
			t.Errorf("%s ran with %+v, want --since %v, triggered by %s", name, o, FailoverLookback, TriggerFailover)
		}
	}
	for _, want := range []string{`msg="fail-over catch-up done" reconcile=stripe`,
		`msg="fail-over catch-up: another replica is running it" reconcile=paddle`,
		`level=ERROR msg="fail-over catch-up failed: run it by hand" reconcile=github-marketplace error="GitHub is down"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}

type fakeInstance struct {
	run func(context.Context, reconcile.Options) (reconcile.Summary, error)
}

func (f fakeInstance) Run(ctx context.Context, o reconcile.Options) (reconcile.Summary, error) {
	return f.run(ctx, o)
}
func (fakeInstance) Job() reconcile.Job { return reconcile.Job{} }

type fakeSummary struct{}

func (fakeSummary) String() string { return "1 found, 1 processed" }
func (fakeSummary) Missed() int    { return 1 }

type syncWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

// Write is called by the watch's goroutine while the test waits: the test
// reads only after the watch has ended, under the same lock as read.
func (s *syncWriter) Write(p []byte) (int, error) { return s.w.Write(p) }

// TestFailoverAlert: a change of primary is a cause of the alerts'
// monitor, with the catch-up commands; the catch-up itself runs only with
// RECONCILE_INTERVAL.
func TestFailoverAlert(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Hour} {
		reg := prometheus.NewRegistry()
		mon := &alerts.Monitor{DB: pgtest.NewPool(t), Metrics: alerts.NewMetrics(reg), Log: slog.New(slog.DiscardHandler)}
		ran := false
		s := &Server{log: slog.New(slog.DiscardHandler), monitor: mon, reconcilers: map[string]reconcile.Instance{
			"stripe": fakeInstance{run: func(context.Context, reconcile.Options) (reconcile.Summary, error) {
				ran = true
				return fakeSummary{}, nil
			}}}}
		s.cfg.ReconcileInterval = interval
		if _, err := mon.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
		if v := condition(t, reg, alerts.CauseFailover); v != 0 {
			t.Fatalf("before any fail-over, the condition is %v", v)
		}
		s.onFailover([]string{"server reconcile stripe --since 72h"})(context.Background(),
			db.Primary{SystemID: 7, Timeline: 1}, db.Primary{SystemID: 7, Timeline: 2})
		if _, err := mon.Once(context.Background()); err != nil {
			t.Fatal(err)
		}
		if v := condition(t, reg, alerts.CauseFailover); v != 1 {
			t.Errorf("RECONCILE_INTERVAL=%v: after a fail-over, the condition is %v, want 1", interval, v)
		}
		if ran != (interval > 0) {
			t.Errorf("RECONCILE_INTERVAL=%v: catch-up ran %v", interval, ran)
		}
	}
}

// condition is the value of webhook_alert_conditions{cause} in reg.
func condition(t *testing.T, reg *prometheus.Registry, cause alerts.Cause) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == "webhook_alert_conditions" && l.GetName() == "cause" && l.GetValue() == string(cause) {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no webhook_alert_conditions{cause=%q}", cause)
	return 0
}
