// Package reconciletest holds what the tests of every provider's catch-up
// share: a processor that claims events as the core does, without running
// them, and small database helpers.
package reconciletest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// ClaimingProcessor stands in for the core's processor: it claims the
// event in processed_events, body and all, as the real one does in the
// event's transaction, and answers processed, or duplicate when the key was
// claimed already. Outcome, when it returns something, is answered instead,
// without a claim (a failure), or after it (parked, step_failed).
type ClaimingProcessor struct {
	Pool *pgxpool.Pool

	mu      sync.Mutex
	events  []webhooks.Event
	Outcome func(ev webhooks.Event) (webhooks.Outcome, bool)
	// Apply, when set, makes the event's database writes in the claim's
	// transaction (see marketplaceWrites).
	Apply func(ctx context.Context, tx pgx.Tx, ev webhooks.Event) error
}

func (p *ClaimingProcessor) Process(ctx context.Context, _ webhooks.Provider, ev webhooks.Event) webhooks.Result {
	p.mu.Lock()
	p.events = append(p.events, ev)
	outcome := p.Outcome
	p.mu.Unlock()
	if outcome != nil {
		if o, ok := outcome(ev); ok {
			switch o {
			case webhooks.OutcomeError:
				return webhooks.Result{Outcome: o, Err: errors.New("database unavailable (test)")}
			case webhooks.OutcomeParked, webhooks.OutcomeStepFailed:
				if _, err := p.claim(ctx, ev, string(webhooks.OutcomeParked)); err != nil {
					return webhooks.Result{Outcome: webhooks.OutcomeError, Err: err}
				}
			}
			return webhooks.Result{Outcome: o}
		}
	}
	claimed, err := p.claim(ctx, ev, "processed")
	switch {
	case err != nil:
		return webhooks.Result{Outcome: webhooks.OutcomeError, Err: err}
	case !claimed:
		return webhooks.Result{Outcome: webhooks.OutcomeDuplicate}
	}
	return webhooks.Result{Outcome: webhooks.OutcomeProcessed}
}

// claimSQL is the receiver's own claim (receiver_claim, migrations/000025),
// of an event done at once: NULL where the event was claimed before.
const claimSQL = `SELECT receiver_claim($1, $2, 'done', $3, $4, $5, $6, NULL, $7, $8, '')`

func (p *ClaimingProcessor) claim(ctx context.Context, ev webhooks.Event, outcome string) (bool, error) {
	tx, err := p.Pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	var mark *string
	if err := tx.QueryRow(ctx, claimSQL, ev.Key, ev.Source, ev.ID, ev.Type, ev.APIVersion, ev.Body, outcome,
		string(ev.Via)).Scan(&mark); err != nil {
		return false, fmt.Errorf("claim %s: %w", ev.Key, err)
	}
	if mark == nil {
		return false, nil
	}
	if p.Apply != nil && outcome == "processed" {
		if err := p.Apply(ctx, tx, ev); err != nil {
			return false, err
		}
	}
	return true, tx.Commit(ctx)
}

// Processed is what the processor was given, in order.
func (p *ClaimingProcessor) Processed() []webhooks.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]webhooks.Event(nil), p.events...)
}

// KeysOf are the keys of evs.
func KeysOf(evs []webhooks.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Key)
	}
	return out
}

// MustExec runs sql or fails the test.
func MustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Count is the integer sql returns.
func Count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// OpenPool opens another pool on a database: another replica's.
func OpenPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Log writes to the test's output, shown when it fails or with -v.
func Log(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
