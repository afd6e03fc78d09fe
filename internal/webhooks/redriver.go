package webhooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/reqlog"
)

// RedriveOnce finishes steps whose lease has run out (their worker died) or
// was given back after a failure and whose back-off has passed, up to limit
// of them, without any delivery. GitHub never retries a failed delivery and
// Stripe stops after three days, so the receiver cannot wait for the sender.
//
// It keeps RedriveParallelism steps running at once, each under its own
// lease taken with the same compare-and-set as a delivery's, so several
// replicas may run it at once and a step still runs once at a time: it
// fetches the next page of due steps as soon as the last one is dispatched,
// so a slow step holds one slot, not the whole batch. It returns how many
// steps it ran and how many of those failed.
func (p *Processor) RedriveOnce(ctx context.Context, limit int) (ran, failed int, err error) {
	var nran, nfailed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	sem := make(chan struct{}, p.opts.RedriveParallelism)
	finished := make(chan struct{}, p.opts.RedriveParallelism) // a step has ended: a slot is free
	var wg sync.WaitGroup
	seen := map[string]bool{} // dispatched by this pass: a page may list a step whose take has not run yet
	dispatched := 0
	for dispatched < limit && ctx.Err() == nil {
		rows, err := p.pool.Query(ctx, dueStepsSQL, p.opts.Lease.Milliseconds(), min(p.opts.RedriveParallelism, limit-dispatched))
		var keys []string
		if err == nil {
			keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			mu.Lock()
			firstErr = cmp(firstErr, dbError("find steps to redrive", err))
			mu.Unlock()
			break
		}
		fresh := 0
		for _, key := range keys {
			if seen[key] || ctx.Err() != nil {
				continue
			}
			seen[key] = true
			fresh++
			dispatched++
			sem <- struct{}{}
			wg.Go(func() {
				defer func() {
					<-sem
					select {
					case finished <- struct{}{}:
					default:
					}
				}()
				ls, ok, _, err := takeStep(ctx, p.pool, key, p.opts.Lease)
				if err != nil {
					mu.Lock()
					firstErr = cmp(firstErr, err)
					mu.Unlock()
					return
				}
				if !ok {
					return // another replica or a delivery took it first
				}
				p.metrics.LeaseReclaims.Inc()
				nran.Add(1)
				// The step's span is the root of a trace of its own, linked
				// to the transaction that planned the step.
				sctx := withRunner(reqlog.With(ctx, "source", ls.Source, "event_key", ls.EventKey, "redriver", true), "redriver")
				if err := p.runStep(sctx, ls); err != nil && !errors.Is(err, errStepParked) {
					nfailed.Add(1)
				}
			})
		}
		if fresh == 0 {
			// Nothing new is due (what the page listed runs here): stop
			// when nothing runs, else ask again once a step has ended.
			if len(sem) == 0 {
				break
			}
			select {
			case <-finished:
			case <-ctx.Done():
			}
		}
	}
	wg.Wait()
	return int(nran.Load()), int(nfailed.Load()), firstErr
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// Redrive runs RedriveOnce every interval until ctx ends. A full batch may
// mean more are due: it goes again at once.
func (p *Processor) Redrive(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	batch := max(50, 4*p.opts.RedriveParallelism)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			ran, failed, err := p.RedriveOnce(ctx, batch)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					p.log.Warn("redriver run failed", "error", err)
				}
				p.metrics.RedriverRuns.WithLabelValues("error").Inc()
			case ran == 0:
				p.metrics.RedriverRuns.WithLabelValues("idle").Inc()
			default:
				p.log.Info("redriver run", "steps", ran, "failed", failed)
				p.metrics.RedriverRuns.WithLabelValues("worked").Inc()
			}
			if err != nil || ran < batch || ctx.Err() != nil {
				break
			}
		}
	}
}

// RedriveStep runs one step now, if its lease can be taken (an operator's
// "run now"): its back-off is ignored, a fresh lease of another worker is
// not. It reports whether the step ran.
func (p *Processor) RedriveStep(ctx context.Context, key string) (bool, error) {
	if _, err := p.pool.Exec(ctx, `
UPDATE processed_events SET claimed_at = '-infinity', next_attempt_at = NULL
WHERE event_key = $1 AND kind = 'step' AND status = 'in_progress' AND `+leaseExpired("$2"),
		key, p.opts.Lease.Milliseconds()); err != nil {
		return false, dbError("redrive step "+key, err)
	}
	ls, ok, st, err := takeStep(ctx, p.pool, key, p.opts.Lease)
	if err != nil || !ok {
		if err == nil && st.Status == "" {
			err = fmt.Errorf("step %s: %w", key, ErrNotFound)
		}
		return false, err
	}
	p.metrics.LeaseReclaims.Inc()
	err = p.runStep(withRunner(reqlog.With(ctx, "source", ls.Source, "event_key", ls.EventKey, "operator", true), "operator"), ls)
	if errors.Is(err, errStepParked) {
		err = nil
	}
	return true, err
}
