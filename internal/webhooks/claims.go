package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Claim statuses, as stored in processed_events.status.
const (
	StatusInProgress = "in_progress"
	StatusDone       = "done"
	StatusParked     = "parked"
)

// Outcomes of an event, as stored in webhook_events.outcome.
const (
	outcomeProcessed = "processed"
	outcomeIgnored   = "ignored"
	outcomeParked    = "parked"
)

// errLeaseLost is returned when a compare-and-set on a step's claim finds
// that the claim is no longer ours: its lease ran out and another worker
// took it, or it was finished or parked meanwhile.
var errLeaseLost = errors.New("lease lost to another worker")

// querier is what the claim SQL needs; a pool, a connection and a
// transaction satisfy it.
type querier = Tx

// StepKey is the claim key of a step: the event's key and the step's name,
// so that every row of an event shares its key as a prefix.
func StepKey(eventKey, step string) string { return eventKey + "/" + step }

// claimEvent is the dedupe claim of the single-transaction pattern: it
// commits, or rolls back, with the event's own writes. status is done for a
// processed or ignored event and parked for one that could not be read.
func claimEvent(ctx context.Context, q querier, ev Event, status, lastError string) (bool, error) {
	const sql = `
INSERT INTO processed_events (event_key, source, status, kind, completed_at, last_error)
VALUES ($1, $2, $3, 'event', CASE WHEN $3 = 'done' THEN now() END, NULLIF($4, ''))
ON CONFLICT (event_key) DO NOTHING
RETURNING event_key`
	var key string
	err := q.QueryRow(ctx, sql, ev.Key, ev.Source, status, lastError).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim event %s: %w", ev.Key, err)
	}
	return true, nil
}

// claimAndStoreSQL is the dedupe claim of the single-transaction pattern
// (INSERT … ON CONFLICT (event_key) DO NOTHING RETURNING) with the stored
// raw body riding on it: the body is written only when the claim is.
const claimAndStoreSQL = `
WITH claim AS (
    INSERT INTO processed_events (event_key, source, status, kind, completed_at)
    VALUES ($1, $2, 'done', 'event', now())
    ON CONFLICT (event_key) DO NOTHING
    RETURNING event_key
)
INSERT INTO webhook_events (event_key, source, event_id, event_type, api_version, body, outcome)
SELECT event_key, $2, $3, $4, NULLIF($5, ''), $6, $7 FROM claim
ON CONFLICT (event_key) DO UPDATE SET outcome = EXCLUDED.outcome, error = NULL
RETURNING event_key`

// eventTx is an event's transaction on one pooled connection. Its BEGIN
// travels to the server with the claim, and its COMMIT with the last
// writes, so the transaction costs no round trip of its own.
type eventTx struct {
	conn *pgxpool.Conn
}

// beginClaim opens the event's transaction and claims the event in it.
// BEGIN, the claim and a read of the event's claims travel to the server
// together, so a new event pays no round trip for its transaction and a
// copy of a known event learns its state from the same round trip. When
// the event was claimed before, claimed is false, the transaction is closed,
// and claims holds the event's claims as committed.
func beginClaim(ctx context.Context, pool *pgxpool.Pool, ev Event) (tx *eventTx, claimed bool, claims eventClaims, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, eventClaims{}, fmt.Errorf("claim event %s: %w", ev.Key, err)
	}
	tx = &eventTx{conn: conn}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(claimAndStoreSQL, ev.Key, ev.Source, ev.ID, ev.Type, ev.APIVersion, ev.Body, outcomeProcessed)
	b.Queue(readClaimsSQL, ev.Key)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	var key string
	if err == nil {
		err = br.QueryRow().Scan(&key)
		claimed = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			claims, err = scanEventClaims(rows)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		tx.rollback()
		return nil, false, eventClaims{}, fmt.Errorf("claim event %s: %w", ev.Key, err)
	case !claimed:
		tx.rollback()
		return nil, false, claims, nil
	}
	return tx, true, eventClaims{}, nil
}

// commit queues the statements of b, then COMMIT, and sends them at once.
// A connection left inside a transaction is closed on release, which rolls
// the transaction back, so every failure here leaves nothing behind.
func (t *eventTx) commit(ctx context.Context, b *pgx.Batch) error {
	defer t.release()
	b.Queue("COMMIT")
	br := t.conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	var err error
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("commit: %w", err)
	case tag.String() != "COMMIT":
		// PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK.
		return fmt.Errorf("commit: transaction rolled back (%s)", tag)
	}
	return nil
}

// rollback ends the transaction without its writes. It does nothing once
// the transaction has ended.
func (t *eventTx) rollback() {
	if t.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
	t.release()
}

func (t *eventTx) release() {
	t.conn.Release()
	t.conn = nil
}

// storeEvent keeps the verified raw body, once per event.
func storeEvent(ctx context.Context, q querier, ev Event, outcome, errText string) error {
	const sql = `
INSERT INTO webhook_events (event_key, source, event_id, event_type, api_version, body, outcome, error)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7, NULLIF($8, ''))
ON CONFLICT (event_key) DO UPDATE
    SET outcome = EXCLUDED.outcome, error = EXCLUDED.error`
	if _, err := q.Exec(ctx, sql, ev.Key, ev.Source, ev.ID, ev.Type, ev.APIVersion, ev.Body, outcome, errText); err != nil {
		return fmt.Errorf("store event %s: %w", ev.Key, err)
	}
	return nil
}

// leasedStep is a step claim held by this worker: token is the compare-and-set
// value that completion and give-back must match.
type leasedStep struct {
	Key      string
	EventKey string
	Source   string
	Step     Step
	Token    int64
	Attempts int
}

// queueStepClaim plans a step inside the event's transaction, already
// leased to the worker running that transaction (token 1). If the worker
// dies after the commit, the lease runs out and the step is taken back.
// The lease starts at clock_timestamp(), not now(): now() is when the
// transaction began, and a transaction that waited on a lock longer than
// the lease would commit leases already run out under a live worker.
func queueStepClaim(b *pgx.Batch, ev Event, s Step) (leasedStep, error) {
	payload, err := json.Marshal(s)
	if err != nil {
		return leasedStep{}, fmt.Errorf("encode step %s: %w", s.Name, err)
	}
	key := StepKey(ev.Key, s.Name)
	b.Queue(`
INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, payload, claim_token, attempts, claimed_at)
VALUES ($1, $2, 'in_progress', 'step', $3, $4, $5, 1, 1, clock_timestamp())
ON CONFLICT (event_key) DO NOTHING`, key, ev.Source, ev.Key, s.Name, payload)
	return leasedStep{Key: key, EventKey: ev.Key, Source: ev.Source, Step: s, Token: 1, Attempts: 1}, nil
}

// claimSQL is the lease: it inserts the step's claim, or takes it back from
// a worker whose lease has run out (or that gave it back, which sets
// claimed_at to -infinity). A done or parked step is never taken back, and
// every take bumps claim_token, so the previous holder's completion no
// longer matches.
const claimSQL = `
INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, payload, claim_token, attempts)
VALUES ($1, $2, 'in_progress', 'step', $3, $4, $5, 1, 1)
ON CONFLICT (event_key) DO UPDATE
    SET status = 'in_progress', claimed_at = now(),
        claim_token = processed_events.claim_token + 1,
        attempts = processed_events.attempts + 1
    WHERE processed_events.status = 'in_progress'
      AND processed_events.claimed_at < now() - $6 * interval '1 millisecond'
RETURNING claim_token, attempts, payload`

// stepState is a step claim as read back when the lease could not be taken.
type stepState struct {
	Status    string
	ClaimedAt time.Time
}

// claimStep tries to take the lease on a step. It returns ok=false and the
// stored state when another worker holds a fresh lease, or the step is done
// or parked.
func claimStep(ctx context.Context, q querier, source, eventKey string, s Step, lease time.Duration) (leasedStep, bool, stepState, error) {
	payload, err := json.Marshal(s)
	if err != nil {
		return leasedStep{}, false, stepState{}, fmt.Errorf("encode step %s: %w", s.Name, err)
	}
	key := StepKey(eventKey, s.Name)
	ls := leasedStep{Key: key, EventKey: eventKey, Source: source}
	var stored []byte
	err = q.QueryRow(ctx, claimSQL, key, source, eventKey, s.Name, payload, lease.Milliseconds()).
		Scan(&ls.Token, &ls.Attempts, &stored)
	if err == nil {
		if err := json.Unmarshal(stored, &ls.Step); err != nil {
			return leasedStep{}, false, stepState{}, fmt.Errorf("decode step %s: %w", key, err)
		}
		return ls, true, stepState{}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return leasedStep{}, false, stepState{}, fmt.Errorf("claim step %s: %w", key, err)
	}
	// RETURNING cannot tell done from a fresh lease held by someone else.
	var st stepState
	err = q.QueryRow(ctx, `SELECT status, claimed_at FROM processed_events WHERE event_key = $1`, key).
		Scan(&st.Status, &st.ClaimedAt)
	if err != nil {
		return leasedStep{}, false, stepState{}, fmt.Errorf("read step %s: %w", key, err)
	}
	return leasedStep{}, false, st, nil
}

// completeStep marks the step done, if the claim is still ours.
func completeStep(ctx context.Context, q querier, ls leasedStep) error {
	tag, err := q.Exec(ctx, `
UPDATE processed_events
SET status = 'done', completed_at = now(), last_error = NULL, next_attempt_at = NULL
WHERE event_key = $1 AND claim_token = $2 AND status = 'in_progress'`, ls.Key, ls.Token)
	if err != nil {
		return fmt.Errorf("complete step %s: %w", ls.Key, err)
	}
	if tag.RowsAffected() != 1 {
		return errLeaseLost
	}
	return nil
}

// releaseStep gives the lease back after a failed attempt, so that the next
// retry need not wait for the lease to run out; the redriver waits until
// next_attempt_at. With park set, or once maxAttempts are spent, the step is
// parked for an operator instead. It returns the status the step was left in.
func releaseStep(ctx context.Context, q querier, ls leasedStep, cause error, backoff time.Duration, maxAttempts int, park bool) (string, error) {
	var status string
	err := q.QueryRow(ctx, `
UPDATE processed_events
SET claimed_at = '-infinity', last_error = $3,
    next_attempt_at = now() + $4 * interval '1 millisecond',
    status = CASE WHEN $6 OR attempts >= $5 THEN 'parked' ELSE 'in_progress' END
WHERE event_key = $1 AND claim_token = $2 AND status = 'in_progress'
RETURNING status`, ls.Key, ls.Token, cause.Error(), backoff.Milliseconds(), maxAttempts, park).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errLeaseLost
	}
	if err != nil {
		return "", fmt.Errorf("release step %s: %w", ls.Key, err)
	}
	return status, nil
}

// eventClaims reads an event's own claim and its steps' claims.
type eventClaims struct {
	Status string // the event's own claim status
	Steps  []storedStep
}

type storedStep struct {
	Key    string
	Status string
	Step   Step
}

// readClaimsSQL reads an event's own claim and its steps' claims with two
// index scans (the primary key, the parent index), not a bitmap OR.
const readClaimsSQL = `
SELECT event_key, kind, status, payload FROM processed_events WHERE event_key = $1
UNION ALL
SELECT event_key, kind, status, payload FROM processed_events WHERE parent_key = $1`

func scanEventClaims(rows pgx.Rows) (eventClaims, error) {
	defer rows.Close()
	var ec eventClaims
	for rows.Next() {
		var key, kind, status string
		var payload []byte
		if err := rows.Scan(&key, &kind, &status, &payload); err != nil {
			return eventClaims{}, err
		}
		if kind == "event" {
			ec.Status = status
			continue
		}
		ss := storedStep{Key: key, Status: status}
		if err := json.Unmarshal(payload, &ss.Step); err != nil {
			return eventClaims{}, fmt.Errorf("decode step %s: %w", key, err)
		}
		ec.Steps = append(ec.Steps, ss)
	}
	return ec, rows.Err()
}
