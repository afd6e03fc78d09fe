package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds what an operator needs: list events by state, show one
// with every claim, replay what was parked, and prune what is done.

// Event states as operators see them, derived from the event's claims.
const (
	StateDone       = "done"        // the event and every step are done
	StateInProgress = "in_progress" // a step is leased or waiting for its lease to run out
	StateFailed     = "failed"      // a step failed and waits for a retry or the redriver
	StateParked     = "parked"      // the event or a step waits for an operator
)

// Summary is one event in a listing.
type Summary struct {
	Key        string    `json:"key"`
	Source     string    `json:"source"`
	Type       string    `json:"type"`
	EventID    string    `json:"event_id"`
	APIVersion string    `json:"api_version,omitempty"`
	Outcome    string    `json:"outcome"`
	State      string    `json:"state"`
	Steps      int       `json:"steps"`
	StepsDone  int       `json:"steps_done"`
	ReceivedAt time.Time `json:"received_at"`
}

// Filter narrows a listing; zero fields match everything.
type Filter struct {
	Source    string
	Type      string
	State     string
	OlderThan time.Duration
	Since     time.Duration // received within this long ago
	Limit     int
}

// stateSQL derives an event's state from its claims (aliased p).
const stateSQL = `CASE
    WHEN bool_or(p.status = 'parked') THEN 'parked'
    WHEN bool_or(p.status = 'in_progress' AND p.last_error IS NOT NULL) THEN 'failed'
    WHEN bool_or(p.status = 'in_progress') THEN 'in_progress'
    ELSE 'done' END`

// List returns stored events, newest first.
func List(ctx context.Context, q querier, f Filter) ([]Summary, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	sql := `
SELECT w.event_key, w.source, w.event_type, w.event_id, coalesce(w.api_version, ''), w.outcome,
       ` + stateSQL + ` AS state,
       count(p.event_key) FILTER (WHERE p.kind = 'step'),
       count(p.event_key) FILTER (WHERE p.kind = 'step' AND p.status = 'done'),
       w.received_at
FROM webhook_events w
LEFT JOIN processed_events p ON p.event_key = w.event_key OR p.parent_key = w.event_key
WHERE ($1 = '' OR w.source = $1)
  AND ($2 = '' OR w.event_type = $2)
  AND ($3 = 0 OR w.received_at < now() - $3 * interval '1 millisecond')
  AND ($4 = 0 OR w.received_at >= now() - $4 * interval '1 millisecond')
GROUP BY w.event_key
HAVING $5 = '' OR ` + stateSQL + ` = $5
ORDER BY w.received_at DESC, w.event_key
LIMIT $6`
	rows, err := q.Query(ctx, sql, f.Source, f.Type, f.OlderThan.Milliseconds(), f.Since.Milliseconds(), f.State, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) {
		var s Summary
		err := r.Scan(&s.Key, &s.Source, &s.Type, &s.EventID, &s.APIVersion, &s.Outcome, &s.State,
			&s.Steps, &s.StepsDone, &s.ReceivedAt)
		return s, err
	})
}

// Claim is one row of processed_events, for operators.
type Claim struct {
	Key           string     `json:"key"`
	Kind          string     `json:"kind"`
	Step          string     `json:"step,omitempty"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	ClaimToken    int64      `json:"claim_token"`
	LastError     string     `json:"last_error,omitempty"`
	ClaimedAt     *time.Time `json:"claimed_at,omitempty"` // nil when the lease was given back
	CompletedAt   *time.Time `json:"completed_at,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// Detail is one event with its stored body and every claim.
type Detail struct {
	Summary
	Error  string  `json:"error,omitempty"`
	Body   []byte  `json:"-"`
	Claims []Claim `json:"claims"`
}

// ErrEventNotFound is returned for a key with no stored event.
var ErrEventNotFound = errors.New("event not found")

// Show returns the event stored under key (or whose provider event id is
// key), or ErrEventNotFound.
func Show(ctx context.Context, q querier, key string) (Detail, error) {
	var d Detail
	err := q.QueryRow(ctx, `
SELECT event_key, source, event_type, event_id, coalesce(api_version, ''), outcome, coalesce(error, ''), body, received_at
FROM webhook_events WHERE event_key = $1 OR event_id = $1
ORDER BY event_key = $1 DESC LIMIT 1`, key).
		Scan(&d.Key, &d.Source, &d.Type, &d.EventID, &d.APIVersion, &d.Outcome, &d.Error, &d.Body, &d.ReceivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Detail{}, fmt.Errorf("%w: %s", ErrEventNotFound, key)
	}
	if err != nil {
		return Detail{}, fmt.Errorf("show %s: %w", key, err)
	}
	rows, err := q.Query(ctx, `
SELECT event_key, kind, coalesce(step, ''), status, attempts, claim_token, coalesce(last_error, ''),
       CASE WHEN claimed_at = '-infinity' THEN NULL ELSE claimed_at END, completed_at, next_attempt_at
FROM processed_events WHERE event_key = $1 OR parent_key = $1
ORDER BY kind, event_key`, d.Key)
	if err != nil {
		return Detail{}, fmt.Errorf("show claims of %s: %w", d.Key, err)
	}
	d.Claims, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claim, error) {
		var c Claim
		err := r.Scan(&c.Key, &c.Kind, &c.Step, &c.Status, &c.Attempts, &c.ClaimToken, &c.LastError,
			&c.ClaimedAt, &c.CompletedAt, &c.NextAttemptAt)
		return c, err
	})
	if err != nil {
		return Detail{}, fmt.Errorf("show claims of %s: %w", d.Key, err)
	}
	d.State = StateDone
	for _, c := range d.Claims {
		if c.Kind == "step" {
			d.Steps++
			if c.Status == StatusDone {
				d.StepsDone++
			}
		}
		d.State = worse(d.State, c)
	}
	return d, nil
}

// worse folds one claim into an event's state, as stateSQL does.
func worse(state string, c Claim) string {
	rank := map[string]int{StateDone: 0, StateInProgress: 1, StateFailed: 2, StateParked: 3}
	s := StateDone
	switch {
	case c.Status == StatusParked:
		s = StateParked
	case c.Status == StatusInProgress && c.LastError != "":
		s = StateFailed
	case c.Status == StatusInProgress:
		s = StateInProgress
	}
	if rank[s] > rank[state] {
		return s
	}
	return state
}

// Replay runs the event stored under key again through the processor, from
// its stored body, honouring every claim: done steps and writes stay as
// they are. What was parked is opened again first: a parked event's claim
// is removed (its transaction wrote nothing) and parked steps are given
// back with their attempts reset, so the replay takes them.
func (p *Processor) Replay(ctx context.Context, providers map[string]Provider, key string) (Result, error) {
	d, err := Show(ctx, p.pool, key)
	if err != nil {
		return Result{}, err
	}
	prov, ok := providers[d.Source]
	if !ok {
		return Result{}, fmt.Errorf("replay %s: no provider for source %q", d.Key, d.Source)
	}
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
DELETE FROM processed_events WHERE event_key = $1 AND kind = 'event' AND status = 'parked'`, d.Key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
UPDATE processed_events
SET status = 'in_progress', claimed_at = '-infinity', attempts = 0, next_attempt_at = NULL
WHERE parent_key = $1 AND status = 'parked'`, d.Key)
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("reopen %s: %w", d.Key, err)
	}
	ev := Event{Source: d.Source, Key: d.Key, ID: d.EventID, Type: d.Type, APIVersion: d.APIVersion, Body: d.Body}
	return p.Process(ctx, prov, ev), nil
}

// ParkedSince returns the keys of events that have anything parked and
// were received within since, at most limit of them.
func ParkedSince(ctx context.Context, q querier, since time.Duration, limit int) ([]string, error) {
	parked, err := List(ctx, q, Filter{State: StateParked, Since: since, Limit: limit})
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(parked))
	for i, s := range parked {
		keys[i] = s.Key
	}
	return keys, nil
}

// PruneResult counts what Prune deleted.
type PruneResult struct {
	Events int64 // events deleted, with their stored bodies
	Claims int64 // claim rows deleted (events' and steps')
}

// Prune deletes, for one source, every event whose claims are all done and
// older than olderThan, with its steps' claims and its stored body, in
// batches of batchSize. Nothing in_progress or parked is ever deleted.
// progress, if not nil, is called after each batch.
func Prune(ctx context.Context, q querier, source string, olderThan time.Duration, batchSize int, progress func(PruneResult)) (PruneResult, error) {
	const sql = `
WITH victims AS (
    SELECT e.event_key FROM processed_events e
    WHERE e.kind = 'event' AND e.source = $1 AND e.status = 'done'
      AND e.claimed_at < now() - $2 * interval '1 millisecond'
      AND NOT EXISTS (SELECT 1 FROM processed_events s WHERE s.parent_key = e.event_key AND s.status <> 'done')
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), claims AS (
    DELETE FROM processed_events p USING victims v
    WHERE p.event_key = v.event_key OR p.parent_key = v.event_key
    RETURNING 1
), bodies AS (
    DELETE FROM webhook_events w USING victims v WHERE w.event_key = v.event_key
)
SELECT (SELECT count(*) FROM victims), (SELECT count(*) FROM claims)`
	var total PruneResult
	for {
		var events, claims int64
		if err := q.QueryRow(ctx, sql, source, olderThan.Milliseconds(), batchSize).Scan(&events, &claims); err != nil {
			return total, fmt.Errorf("prune %s: %w", source, err)
		}
		total.Events += events
		total.Claims += claims
		if progress != nil && events > 0 {
			progress(total)
		}
		if events < int64(batchSize) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
