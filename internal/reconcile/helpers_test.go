package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// decodeStripe stands in for stripehook.Decode, which the reconciler is
// given in production: the envelope of a Stripe Event, keyed on its id.
func decodeStripe(body []byte) (webhooks.Event, error) {
	var env struct {
		ID         string `json:"id"`
		Object     string `json:"object"`
		Type       string `json:"type"`
		APIVersion string `json:"api_version"`
		Data       *struct {
			Object json.RawMessage `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return webhooks.Event{}, webhooks.Reject("malformed_json", err)
	}
	if env.ID == "" || env.Type == "" || env.Object != "event" || env.Data == nil || len(env.Data.Object) == 0 {
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("not a Stripe event with data.object"))
	}
	return webhooks.Event{Source: "stripe", Key: env.ID, ID: env.ID, Type: env.Type, APIVersion: env.APIVersion, Body: body}, nil
}

// claimingProcessor stands in for the core's processor: it claims the
// event in processed_events, body and all, as the real one does in the
// event's transaction, and answers processed, or duplicate when the key was
// claimed already. outcome, when it returns something, is answered instead,
// without a claim (a failure), or after it (parked, step_failed).
type claimingProcessor struct {
	pool *pgxpool.Pool

	mu      sync.Mutex
	events  []webhooks.Event
	outcome func(ev webhooks.Event) (webhooks.Outcome, bool)
	// apply, when set, makes the event's database writes in the claim's
	// transaction (see marketplaceWrites).
	apply func(ctx context.Context, tx pgx.Tx, ev webhooks.Event) error
}

func (p *claimingProcessor) Process(ctx context.Context, _ webhooks.Provider, ev webhooks.Event) webhooks.Result {
	p.mu.Lock()
	p.events = append(p.events, ev)
	outcome := p.outcome
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

const claimSQL = `
INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type,
                              api_version, body, outcome, via)
VALUES ($1, $2, 'done', 'event', now(), $3, $4, NULLIF($5, ''), $6, $7, $8)
ON CONFLICT DO NOTHING`

func (p *claimingProcessor) claim(ctx context.Context, ev webhooks.Event, outcome string) (bool, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, claimSQL, ev.Key, ev.Source, ev.ID, ev.Type, ev.APIVersion, ev.Body, outcome, string(ev.Via))
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", ev.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if p.apply != nil && outcome == "processed" {
		if err := p.apply(ctx, tx, ev); err != nil {
			return false, err
		}
	}
	return true, tx.Commit(ctx)
}

// processed is what the processor was given, in order.
func (p *claimingProcessor) processed() []webhooks.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]webhooks.Event(nil), p.events...)
}

func keysOf(evs []webhooks.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Key)
	}
	return out
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// openPool opens another pool on a database: another replica's.
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// testLog writes to the test's output, shown when it fails or with -v.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
