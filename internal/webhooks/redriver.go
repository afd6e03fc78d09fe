package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/paywebhooks/receiver/internal/reqlog"
)

// RedriveOnce finishes steps whose lease has run out (their worker died) or
// was given back after a failure and whose back-off has passed, up to limit
// of them, without any delivery. GitHub never retries a failed delivery and
// Stripe stops after three days, so the receiver cannot wait for the sender.
//
// Several replicas may run it at once: each step is taken with the same
// lease claim as a delivery, so only one of them runs it at a time.
// It returns how many steps it ran and how many of those failed.
func (p *Processor) RedriveOnce(ctx context.Context, limit int) (ran, failed int, err error) {
	const sql = `
SELECT event_key, source, parent_key, payload FROM processed_events
WHERE kind = 'step' AND status = 'in_progress'
  AND claimed_at < now() - $1 * interval '1 millisecond'
  AND (next_attempt_at IS NULL OR next_attempt_at <= now())
ORDER BY claimed_at
LIMIT $2`
	rows, err := p.pool.Query(ctx, sql, p.opts.Lease.Milliseconds(), limit)
	if err != nil {
		return 0, 0, fmt.Errorf("find steps to redrive: %w", err)
	}
	type due struct {
		key, source, eventKey string
		step                  Step
	}
	var todo []due
	for rows.Next() {
		var d due
		var payload []byte
		if err := rows.Scan(&d.key, &d.source, &d.eventKey, &payload); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("find steps to redrive: %w", err)
		}
		if err := json.Unmarshal(payload, &d.step); err != nil {
			slog.Error("redriver: step payload unreadable", "step_key", d.key, "error", err)
			continue
		}
		todo = append(todo, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("find steps to redrive: %w", err)
	}

	for _, d := range todo {
		ls, ok, _, err := claimStep(ctx, p.pool, d.source, d.eventKey, d.step, p.opts.Lease)
		if err != nil {
			return ran, failed, err
		}
		if !ok {
			continue // another replica or a delivery took it first
		}
		p.metrics.LeaseReclaims.Inc()
		sctx := reqlog.With(ctx, slog.Default().With("source", d.source, "event_key", d.eventKey, "redriver", true))
		ran++
		if err := p.runStep(sctx, ls); err != nil && !errors.Is(err, errStepParked) {
			failed++
		}
	}
	return ran, failed, nil
}

// Redrive runs RedriveOnce every interval until ctx ends.
func (p *Processor) Redrive(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			ran, failed, err := p.RedriveOnce(ctx, 50)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					slog.Warn("redriver run failed", "error", err)
				}
				p.metrics.RedriverRuns.WithLabelValues("error").Inc()
			case ran == 0:
				p.metrics.RedriverRuns.WithLabelValues("idle").Inc()
			default:
				slog.Info("redriver run", "steps", ran, "failed", failed)
				p.metrics.RedriverRuns.WithLabelValues("worked").Inc()
			}
			// A full batch may mean more are due: go again at once.
			if err != nil || ran < 50 || ctx.Err() != nil {
				break
			}
		}
	}
}
