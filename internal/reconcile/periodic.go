package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Job is one source's periodic reconciliation.
type Job struct {
	Source string
	// Run reconciles once. It returns ErrBusy when another replica holds
	// the source's lock.
	Run func(ctx context.Context) (Tally, error)
}

// DefaultLookback is how far back a periodic Stripe job looks the first
// time, when no run has left a cursor: catching up on older events is an
// operator's decision (`server reconcile stripe --since`), since they may
// predate the receiver.
const DefaultLookback = time.Hour

// DefaultSettle is how long a periodic job leaves recent events (or
// Marketplace changes) to their delivery.
const DefaultSettle = 2 * time.Minute

// Runner runs jobs every Interval (RECONCILE_INTERVAL), in every replica;
// each job's lock makes one replica at a time do the work, and the others
// count a "busy" run.
type Runner struct {
	Interval time.Duration
	Jobs     []Job
	Metrics  *Metrics     // nil: no metrics
	Store    *Store       // nil: runs are not pruned
	Log      *slog.Logger // nil: slog.Default()
	// Retention is how long runs are kept in reconcile_runs; 0: 30 days.
	Retention time.Duration
}

// Run runs the jobs until ctx is done, the first time after a random part
// of the interval (so that replicas started together do not all try at
// once), then every Interval. It returns nil when ctx is done.
func (r *Runner) Run(ctx context.Context) error {
	if r.Interval <= 0 || len(r.Jobs) == 0 {
		return nil
	}
	first := time.Duration(rand.Int64N(int64(r.Interval)/4 + 1))
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		r.Once(ctx)
		t.Reset(r.Interval)
	}
}

// Once runs every job once, counting each run, and prunes old runs.
func (r *Runner) Once(ctx context.Context) {
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	for _, j := range r.Jobs {
		if ctx.Err() != nil {
			return
		}
		// Every replica runs the jobs every Interval: a job another replica
		// started less than an interval ago is not run again, so a source
		// is reconciled once per interval, not once per replica.
		if r.Store != nil {
			if last, ok, err := r.Store.LastStarted(ctx, j.Source, TriggerPeriodic); err == nil && ok && time.Since(last) < r.Interval*9/10 {
				if r.Metrics != nil {
					r.Metrics.Runs.WithLabelValues(j.Source, "recent").Inc()
				}
				continue
			}
		}
		t, err := j.Run(ctx)
		result := "ok"
		switch {
		case errors.Is(err, ErrBusy):
			result = "busy"
			log.Info("reconcile: another replica is running it", "source", j.Source)
		case err != nil && ctx.Err() != nil:
			return // shutting down: not a failed run
		case err != nil:
			result = "error"
			log.Error("reconcile", "source", j.Source, "error", err)
		}
		if r.Metrics != nil {
			r.Metrics.Runs.WithLabelValues(j.Source, result).Inc()
			if result != "busy" && t.Missed > 0 {
				r.Metrics.Missed.WithLabelValues(j.Source).Add(float64(t.Missed))
			}
		}
	}
	if r.Store != nil {
		keep := r.Retention
		if keep <= 0 {
			keep = 30 * 24 * time.Hour
		}
		if _, err := r.Store.PruneRuns(ctx, time.Now().Add(-keep)); err != nil {
			log.Warn("reconcile: prune runs", "error", err)
		}
	}
}
