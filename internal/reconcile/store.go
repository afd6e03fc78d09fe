package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/db"
)

// Store is reconciliation's own state in PostgreSQL (migration 000004): the
// per-source lock, the cursors, the record of runs; and the read-only
// queries it makes of the claims and the orders.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a store over pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// lockSQL takes the source's advisory lock for the session, without
// waiting. The key space is the one internal/orders uses for its
// transaction locks (hashtextextended of a prefixed name), where the
// "reconcile:" prefix is ours alone.
const (
	lockSQL   = `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`
	unlockSQL = `SELECT pg_advisory_unlock(hashtextextended($1, 0))`
)

// Lock takes the lock that lets one run at a time reconcile source, across
// every replica, or returns ErrBusy. The lock is a PostgreSQL session lock,
// held on a session acquired beside the pool (db.AcquireSession: one of the
// pool's connections, or over DATABASE_SESSION_URL when the pool has one,
// since a transaction-mode pooler would hand the session to another client
// between transactions) until release is called: release unlocks it at
// once, so the next run may start as soon as it returns. If the process
// dies, the session ends and the lock with it.
func (s *Store) Lock(ctx context.Context, source string) (release func(), err error) {
	sess, err := db.AcquireSession(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", source, err)
	}
	key := "reconcile:" + source
	var ok bool
	if err := sess.Conn().QueryRow(ctx, lockSQL, key).Scan(&ok); err != nil || !ok {
		if err != nil {
			sess.Close()
			return nil, fmt.Errorf("lock %s: %w", source, err)
		}
		sess.Release()
		return nil, ErrBusy
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := sess.Conn().Exec(ctx, unlockSQL, key); err != nil {
			// Never give back a session that may still hold the lock:
			// closing it releases the lock.
			sess.Close()
			return
		}
		sess.Release()
	}, nil
}

const cursorSQL = `
SELECT event_id, event_created FROM reconcile_cursors WHERE source = $1 AND scope = $2`

// Cursor returns the cursor runs of source with the filters scope left,
// and whether there is one.
func (s *Store) Cursor(ctx context.Context, source, scope string) (Cursor, bool, error) {
	var c Cursor
	err := s.pool.QueryRow(ctx, cursorSQL, source, scope).Scan(&c.ID, &c.Created)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Cursor{}, false, nil
	case err != nil:
		return Cursor{}, false, fmt.Errorf("read %s cursor: %w", source, err)
	}
	return c, true, nil
}

const saveCursorSQL = `
INSERT INTO reconcile_cursors (source, scope, event_id, event_created, run_id, updated_at)
VALUES ($1, $2, $3, $4, NULLIF($5, 0), now())
ON CONFLICT (source, scope) DO UPDATE
SET event_id = EXCLUDED.event_id, event_created = EXCLUDED.event_created,
    run_id = EXCLUDED.run_id, updated_at = now()`

// SaveCursor records where the run runID stopped. It moves the cursor
// wherever the run is, backwards included: --resume continues where the
// last run stopped, whatever window that run was given.
func (s *Store) SaveCursor(ctx context.Context, source, scope string, c Cursor, runID int64) error {
	if _, err := s.pool.Exec(ctx, saveCursorSQL, source, scope, c.ID, c.Created, runID); err != nil {
		return fmt.Errorf("save %s cursor: %w", source, err)
	}
	return nil
}

const startRunSQL = `
INSERT INTO reconcile_runs (source, triggered_by) VALUES ($1, $2) RETURNING id`

// StartRun records the start of a run and returns its id.
func (s *Store) StartRun(ctx context.Context, source, trigger string) (int64, error) {
	var id int64
	if err := s.pool.QueryRow(ctx, startRunSQL, source, trigger).Scan(&id); err != nil {
		return 0, fmt.Errorf("record %s run: %w", source, err)
	}
	return id, nil
}

// LastStarted is when the last run of source triggered by trigger began
// (ok is false when there is none).
func (s *Store) LastStarted(ctx context.Context, source, trigger string) (at time.Time, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `
SELECT started_at FROM reconcile_runs WHERE source = $1 AND triggered_by = $2 ORDER BY started_at DESC LIMIT 1`,
		source, trigger).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("last %s run: %w", source, err)
	}
	return at, true, nil
}

const finishRunSQL = `
UPDATE reconcile_runs
SET finished_at = now(), result = $2, found = $3, missed = $4, unresolved = $5, summary = $6, error = NULLIF($7, '')
WHERE id = $1`

// Tally is what a run found, as recorded and counted in the metrics.
type Tally struct {
	Found      int // events, or accounts and orders, looked at
	Missed     int // events that had never been delivered, or discrepancies between GitHub and the orders
	Unresolved int // findings left for an operator
}

// FinishRun records the end of a run: ok when runErr is nil.
func (s *Store) FinishRun(ctx context.Context, id int64, t Tally, summary any, runErr error) error {
	result, msg := "ok", ""
	if runErr != nil {
		result, msg = "error", runErr.Error()
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return fmt.Errorf("record run %d: %w", id, err)
	}
	// The summary goes as JSON text: a []byte would be sent as bytea text
	// ("\x7b…") in pgx's exec mode, which a user may name behind a pooler.
	if _, err := s.pool.Exec(ctx, finishRunSQL, id, result, t.Found, t.Missed, t.Unresolved, string(b), msg); err != nil {
		return fmt.Errorf("record run %d: %w", id, err)
	}
	return nil
}

const pruneRunsSQL = `DELETE FROM reconcile_runs WHERE started_at < $1`

// PruneRuns deletes the record of runs started before t.
func (s *Store) PruneRuns(ctx context.Context, t time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, pruneRunsSQL, t)
	if err != nil {
		return 0, fmt.Errorf("prune reconcile runs: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Run is one recorded run.
type Run struct {
	ID         int64
	Source     string
	Trigger    string
	StartedAt  time.Time
	FinishedAt time.Time // zero while running, or if the process died
	Result     string    // running, ok, error
	Tally      Tally
	Summary    json.RawMessage
	Error      string
}

const runsSQL = `
SELECT id, source, triggered_by, started_at, finished_at, result, found, missed, unresolved,
       coalesce(summary, 'null'::jsonb), coalesce(error, '')
FROM reconcile_runs WHERE source = $1 ORDER BY started_at DESC, id DESC LIMIT $2`

// Runs returns the last runs of source, newest first.
func (s *Store) Runs(ctx context.Context, source string, limit int) ([]Run, error) {
	rows, err := s.pool.Query(ctx, runsSQL, source, limit)
	if err != nil {
		return nil, fmt.Errorf("read %s runs: %w", source, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Run, error) {
		var r Run
		var finished *time.Time
		err := row.Scan(&r.ID, &r.Source, &r.Trigger, &r.StartedAt, &finished, &r.Result,
			&r.Tally.Found, &r.Tally.Missed, &r.Tally.Unresolved, &r.Summary, &r.Error)
		if finished != nil {
			r.FinishedAt = *finished
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s runs: %w", source, err)
	}
	return runs, nil
}

// knownSQL finds the event claims among keys (one index probe each).
const knownSQL = `
SELECT event_key FROM processed_events WHERE event_key = ANY($1::text[]) AND kind = 'event'`

// Known implements Claims: which of keys have an event claim, whatever its
// state (done, parked), and however it came (delivery, reconcile).
func (s *Store) Known(ctx context.Context, keys []string) (map[string]bool, error) {
	known := make(map[string]bool, len(keys))
	if len(keys) == 0 {
		return known, nil
	}
	rows, err := s.pool.Query(ctx, knownSQL, keys)
	if err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	for _, k := range found {
		known[k] = true
	}
	return known, nil
}
