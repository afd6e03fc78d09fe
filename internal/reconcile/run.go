package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Running is one run of a reconciler, as every reconciler keeps it: bounded
// (Bound), one replica at a time (the source's lock), and recorded in
// reconcile_runs; a dry run is bounded only, holds no lock and leaves no
// record.
type Running struct {
	store   *Store
	source  string
	name    string // "reconcile <source>", for errors
	dryRun  bool
	trigger string
	id      int64
	log     *slog.Logger
	end     []func()
}

// Begin starts a run of source with o (TriggerCLI when o.Trigger is empty)
// within limits: it returns the run's context and the run, or ErrBusy when
// another run of source holds the lock. Call End when done.
func Begin(ctx context.Context, store *Store, source string, o Options, limits Limits, log *slog.Logger) (context.Context, *Running, error) {
	r := &Running{store: store, source: source, name: "reconcile " + strings.ReplaceAll(source, "_", " "), dryRun: o.DryRun, trigger: o.Trigger, log: log}
	if r.trigger == "" {
		r.trigger = TriggerCLI
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	ctx, unbound := Bound(ctx, limits)
	r.end = append(r.end, unbound)
	if !o.DryRun {
		release, err := store.Lock(ctx, source)
		if err != nil {
			r.End()
			return ctx, nil, err
		}
		r.end = append(r.end, release)
	}
	return ctx, r, nil
}

// Start records the run in reconcile_runs (not a dry run's).
func (r *Running) Start(ctx context.Context) error {
	if r.dryRun {
		return nil
	}
	id, err := r.store.StartRun(ctx, r.source, r.trigger)
	if err != nil {
		return Cause(ctx, err)
	}
	r.id = id
	return nil
}

// ID is the run's id in reconcile_runs; 0 for a dry run.
func (r *Running) ID() int64 { return r.id }

// Finish ends the work of the run with its summary and err: err becomes the
// bound that stopped the run, if one did (ErrStopped), and, when the
// summary left unresolved items (failed, counted by the tally's
// Unresolved, and named one and many), wraps ErrIncomplete. The result is
// recorded with the summary, on a context of its own: the record outlives
// a cancelled or stopped run.
func (r *Running) Finish(ctx context.Context, sum Summary, tally Tally, failed int, one, many string, err error) error {
	err = Cause(ctx, err)
	if errors.Is(err, ErrStopped) {
		err = fmt.Errorf("%s: %w", r.name, err)
	}
	if err == nil && failed > 0 {
		err = fmt.Errorf("%s: %s not processed: %w", r.name, webhooks.Plural(failed, one, many), ErrIncomplete)
	}
	if !r.dryRun && r.id != 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if ferr := r.store.FinishRun(sctx, r.id, tally, sum, err); ferr != nil {
			r.log.Error(r.name+": record run", "error", ferr)
		}
	}
	return err
}

// End releases the lock and the bound.
func (r *Running) End() {
	for i := len(r.end) - 1; i >= 0; i-- {
		r.end[i]()
	}
}
