package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/reconcile"
)

// PrimaryCheckEvery is how often the receiver reads the identity of its
// primary (db.ReadPrimary) to notice a fail-over.
const PrimaryCheckEvery = 5 * time.Second

// FailoverLookback is the --since of the catch-up a fail-over calls for:
// an event whose commit the fail-over lost may have been delivered just
// before it and created long before (Stripe retries an event for up to
// three days), and the providers' listings go by creation.
const FailoverLookback = 72 * time.Hour

// TriggerFailover is recorded (reconcile_runs.triggered_by) for the runs
// a fail-over starts.
const TriggerFailover = "failover"

// primaryWatch notices that the primary changed under a running receiver:
// a standby promoted (a new timeline), or another cluster altogether (a
// new system identifier). With asynchronous replication the last commits
// acknowledged by the old primary may be missing from the new one, and a
// delivery acknowledged 2xx is never sent again: the providers' catch-up
// brings those events back. The watch says so loudly, with what to run,
// counts it, and calls onChange (the server runs the catch-up at once when
// RECONCILE_INTERVAL is set).
type primaryWatch struct {
	read     func(context.Context) (db.Primary, error)
	every    time.Duration
	log      *slog.Logger
	commands []string // what an operator runs after a fail-over
	changes  prometheus.Counter
	onChange func(ctx context.Context, from, to db.Primary)
}

// run checks the primary every w.every until ctx ends. A check that fails
// (no primary answers) changes nothing; one the database refuses (the
// functions withheld from the receiver's role) ends the watch, said once.
func (w *primaryWatch) run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	var known db.Primary
	for {
		rctx, cancel := context.WithTimeout(ctx, w.every)
		p, err := w.read(rctx)
		cancel()
		var pgErr *pgconn.PgError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.InsufficientPrivilege || pgErr.Code == pgerrcode.UndefinedFunction):
			w.log.Warn("fail-over detection off: the database refuses to say which primary it is", "error", err)
			return
		case err != nil:
		case known == db.Primary{}:
			known = p
			w.log.Info("database primary", "primary", p.String())
		case p != known:
			w.changed(ctx, known, p)
			known = p
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// changed reports a change of primary.
func (w *primaryWatch) changed(ctx context.Context, from, to db.Primary) {
	what := "a standby was promoted (or the database was recovered to a point in time)"
	if from.SystemID != to.SystemID {
		what = "the database is another cluster"
	}
	todo := "no catch-up is configured (a provider's API key is unset: see `server reconcile --help`): such events cannot be brought back"
	if len(w.commands) > 0 {
		todo = "run: " + strings.Join(w.commands, "; ")
	}
	w.log.Error("database fail-over: the primary changed: "+what+"; with asynchronous replication, deliveries "+
		"acknowledged shortly before it may be lost, and their senders will not send them again; "+todo,
		"from", from.String(), "to", to.String())
	if w.changes != nil {
		w.changes.Inc()
	}
	if w.onChange != nil {
		w.onChange(ctx, from, to)
	}
}

// failoverCommands are the catch-up commands an operator runs after a
// fail-over, one per configured reconciler.
func failoverCommands(rs []reconcile.Reconciler, on map[string]reconcile.Instance) []string {
	var cmds []string
	for _, r := range rs {
		if _, ok := on[r.Name]; !ok {
			continue
		}
		c := "server reconcile " + r.Name
		if r.Takes("since") {
			c += fmt.Sprintf(" --since %dh", int(FailoverLookback.Hours()))
		}
		cmds = append(cmds, c)
	}
	slices.Sort(cmds)
	return cmds
}

// setupFailoverWatch watches the primary; when it changes, it raises the
// fail-over alert and, with RECONCILE_INTERVAL, runs every configured
// reconciler once, over FailoverLookback (one replica at a time: the
// others find the lock taken).
func (s *Server) setupFailoverWatch(rs []reconcile.Reconciler) {
	w := &primaryWatch{
		read:     func(ctx context.Context) (db.Primary, error) { return db.ReadPrimary(ctx, s.pool) },
		every:    PrimaryCheckEvery,
		log:      s.log,
		commands: failoverCommands(rs, s.reconcilers),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paywebhooks_database_failovers_total",
			Help: "Changes of the database's primary (a promotion, or another cluster) seen by this process: reconcile after each.",
		}),
	}
	s.registry.MustRegister(w.changes)
	w.onChange = s.onFailover(w.commands)
	s.background = append(s.background, w.run)
}

// onFailover is what the receiver does when its primary changes, besides
// the log line: the alert (a cause of the monitor's), and the catch-up when
// RECONCILE_INTERVAL is set and a reconciler is configured (commands).
func (s *Server) onFailover(commands []string) func(ctx context.Context, from, to db.Primary) {
	reconciles := s.cfg.ReconcileInterval > 0 && len(commands) > 0
	return func(ctx context.Context, from, to db.Primary) {
		if s.heartbeat != nil { // the new primary may have lost its last record
			s.heartbeat.Poke()
		}
		if s.monitor != nil {
			s.monitor.NoteFailover(alerts.Failover{At: time.Now(), From: from.String(), To: to.String(),
				Another: from.SystemID != to.SystemID, Commands: commands, Reconciles: reconciles, Lookback: FailoverLookback})
		}
		if reconciles {
			s.failoverReconcile(ctx)
		}
	}
}

// failoverReconcile runs every configured reconciler once over
// FailoverLookback, recorded as triggered by the fail-over; a source
// another replica is catching up on already is left to it.
func (s *Server) failoverReconcile(ctx context.Context) {
	names := make([]string, 0, len(s.reconcilers))
	for name := range s.reconcilers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sum, err := s.reconcilers[name].Run(ctx, reconcile.Options{Since: FailoverLookback, Trigger: TriggerFailover})
		switch {
		case errors.Is(err, reconcile.ErrBusy):
			s.log.Info("fail-over catch-up: another replica is running it", "reconcile", name)
		case err != nil:
			s.log.Error("fail-over catch-up failed: run it by hand", "reconcile", name, "error", err)
		default:
			s.log.Warn("fail-over catch-up done", "reconcile", name, "summary", sum.String(), "missed", sum.Missed())
		}
	}
}
