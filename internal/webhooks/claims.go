package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paywebhooks/receiver/internal/telemetry"
)

// This file holds the claim SQL: the event's claim, the step leases and
// every compare-and-set that moves them. Whoever changes it keeps three
// rules: a claim commits with the writes it guards; every move of a step
// after it is taken is compare-and-set on claim_token and the status it
// leaves; a take never matches a done, parked or skipped row.

// Querier is what the claim SQL needs: a pool, a connection and a
// transaction satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// errLeaseLost is returned when a compare-and-set on a step's claim finds
// that the claim is no longer ours: its lease ran out and another worker
// took it, or it was finished or parked meanwhile.
var errLeaseLost = errors.New("lease lost to another worker")

// ErrNotFound is returned for a key with no stored event.
var ErrNotFound = errors.New("event not found")

// ErrAmbiguous is returned for a provider's event id that several stored
// events share, where it is not itself an event's key: GitHub's delivery
// GUID, sent again with another body or to another hook, names each of
// them. The error lists their keys (up to maxAmbiguous): name one by its
// key.
var ErrAmbiguous = errors.New("several events have this id")

// maxAmbiguous bounds the keys an ErrAmbiguous lists.
const maxAmbiguous = 10

// ambiguousSQL lists the events whose provider's id is $1 (and not their
// key), oldest first.
const ambiguousSQL = `
SELECT event_key FROM processed_events
WHERE kind = 'event' AND event_id = $1 AND event_id <> event_key
ORDER BY claimed_at, event_key LIMIT $2`

// Ambiguous returns the ErrAmbiguous of id, with the keys of the events
// it names.
func Ambiguous(ctx context.Context, q Querier, id string) error {
	rows, err := q.Query(ctx, ambiguousSQL, id, maxAmbiguous+1)
	if err != nil {
		return fmt.Errorf("list the events of %s: %w", id, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list the events of %s: %w", id, err)
	}
	more := ""
	if len(keys) > maxAmbiguous {
		keys, more = keys[:maxAmbiguous], ", …"
	}
	return fmt.Errorf("%w: %s names %d events (%s%s): name one by its key", ErrAmbiguous, id, len(keys), strings.Join(keys, ", "), more)
}

// dbError turns what pgx returns into the package's own errors, once, at
// the boundary: no rows becomes ErrNotFound; anything else is wrapped with
// what was being done.
func dbError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// StepKey is the claim key of a step: the event's key and the step's name,
// so that every row of an event shares its key as a prefix.
func StepKey(eventKey, step string) string { return eventKey + "/" + step }

// leaseExpired is the one lease-expiry predicate: the lease of a step taken
// at claimed_at has run out (its worker died) or was given back (claimed_at
// = '-infinity'). param is the placeholder of the lease in milliseconds.
func leaseExpired(param string) string {
	return `claimed_at < now() - ` + param + ` * interval '1 millisecond'`
}

// eventRows selects every row of the event whose key is param, its own and
// its steps', as one range of the primary key (keys compare bytewise: '/'
// sorts just before '0').
func eventRows(param string) string { return eventRowsOf("event_key", param) }

// eventRowsOf is eventRows for the key column col.
func eventRowsOf(col, key string) string {
	return col + ` >= ` + key + ` AND ` + col + ` < ` + key + ` || '0' AND (` + col + ` = ` + key +
		` OR starts_with(` + col + `, ` + key + ` || '/'))`
}

// claimSQL is the dedupe claim of the single-transaction pattern, with the
// event riding on it: receiver_claim (migrations/000025) runs INSERT … ON
// CONFLICT DO NOTHING on the key (and, for providers that set one, the body
// hash). When it inserts, it marks the transaction as the claim's holder
// (the transaction-local setting that the SQL function receiver_claimed()
// reads, and that every write and step of the event is conditional on) and
// returns the mark; a copy's claim inserts nothing, marks nothing and
// returns NULL, so the rest of its transaction does nothing. The mark is
// set by the RETURNING list of the row inserted, in the INSERT itself (a
// CTE around it cost PostgreSQL a CTE scan to plan and run per event). It
// is a function so that a pooler that prepares nothing has PostgreSQL
// parse and plan a call, not an INSERT into a table of seven indexes, per
// event; the function's plan is kept for the connection.
const claimSQL = `SELECT receiver_claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// reclaimSQL is the claim of an operator's replay of a parked event: the
// parked claim row is taken back, in the transaction of the replay's
// writes, so that a replay that fails leaves it parked with its body.
// Its arguments are reclaimArgs'.
const reclaimSQL = `
UPDATE processed_events
SET status = $2, completed_at = CASE WHEN $2 = 'done' THEN now() END, outcome = $3,
    last_error = NULLIF($4, '')
WHERE event_key = $1 AND kind = 'event' AND status = 'parked'
RETURNING set_config('receiver.claim', 'yes', true)`

func reclaimArgs(ev Event, status ClaimStatus, outcome Outcome, lastError string) []any {
	return []any{ev.Key, string(status), string(outcome), lastError}
}

func claimArgs(ev Event, status ClaimStatus, outcome Outcome, lastError string) []any {
	via := ev.Via
	if via == "" {
		via = ViaDelivery
	}
	return []any{ev.Key, ev.Source, string(status), ev.ID, ev.Type, ev.APIVersion, ev.Body, ev.BodyHash,
		string(outcome), string(via), lastError}
}

// MaxSteps bounds the steps one event may plan (the processor refuses a
// plan with more), so that reading an event's claims is bounded too.
const MaxSteps = 100

// readClaimsSQL reads the claims of an event, as committed: how a copy of
// an event learns what became of it. It is one scan of the primary key
// over the event's range (its own row, "<key>", then its steps',
// "<key>/<step>"), in key order and bounded by MaxSteps; scanEventClaims
// drops any other key the range holds (one that extends the event's key
// with a byte below '0' other than '/').
//
// The range's bounds are the parameter behind a sub-select, which
// PostgreSQL evaluates once at execution: neither a generic nor a custom
// plan can see the key, so the two plans are the same and the statement is
// planned once per connection. (With the bounds written against the
// parameter itself, as eventRows does, the custom plan for a known key is
// so much cheaper than a generic one that PostgreSQL plans the statement
// anew at every execution: about twice its cost.) Under the limit, an
// index scan is the plan once the table is large.
var readClaimsSQL = `
SELECT event_key, kind, status, coalesce(step, ''), coalesce(step_kind, ''), payload
FROM processed_events
WHERE event_key >= (SELECT $1::text) AND event_key < (SELECT $1::text || '0')
ORDER BY event_key
LIMIT ` + strconv.Itoa(MaxSteps+1)

// holderSQL finds the event whose body hash is $1 (unique, indexed).
const holderSQL = `SELECT event_key FROM processed_events WHERE body_hash = $1 AND kind = 'event'`

// eventClaims are an event's own claim and its steps' claims.
type eventClaims struct {
	Status ClaimStatus // the event's own claim; "" when it has none
	Steps  []storedStep
}

type storedStep struct {
	Key     string
	Status  ClaimStatus
	Name    string
	Kind    string
	Payload json.RawMessage
}

// scanEventClaims reads the rows of readClaimsSQL for the event key.
func scanEventClaims(rows pgx.Rows, key string) (eventClaims, error) {
	defer rows.Close()
	var ec eventClaims
	for rows.Next() {
		var ss storedStep
		var kind string
		if err := rows.Scan(&ss.Key, &kind, &ss.Status, &ss.Name, &ss.Kind, &ss.Payload); err != nil {
			return eventClaims{}, err
		}
		if ss.Key != key && !(len(ss.Key) > len(key) && ss.Key[len(key)] == '/' && ss.Key[:len(key)] == key) {
			continue // another event's key in the range
		}
		if kind == "event" {
			ec.Status = ss.Status
			continue
		}
		ec.Steps = append(ec.Steps, ss)
	}
	return ec, rows.Err()
}

// leasedStep is a step claim held by this worker: Token is the
// compare-and-set value that completion and give-back must match.
type leasedStep struct {
	Key         string
	EventKey    string
	Source      string
	Name        string
	Kind        string
	Payload     json.RawMessage
	Token       int64
	Attempts    int
	Traceparent string
}

// takeSQL is the lease taken back: a step whose lease ran out or was given
// back is taken by whoever asks first, which bumps claim_token (so the
// previous holder's completion no longer matches) and attempts. A done,
// parked or skipped step is never taken. When the step cannot be taken,
// the same statement reads its state (as of the statement's start).
var takeSQL = `
WITH took AS (
    UPDATE processed_events
    SET claimed_at = now(), claim_token = claim_token + 1, attempts = attempts + 1
    WHERE event_key = $1 AND kind = 'step' AND status = 'in_progress' AND ` + leaseExpired("$2") + `
    RETURNING claim_token, attempts, coalesce(step, ''), coalesce(step_kind, ''), payload,
              coalesce(parent_key, ''), source, coalesce(traceparent, ''), status, claimed_at
)
SELECT true, * FROM took
UNION ALL
SELECT false, 0, 0, '', '', NULL, '', '', '', status, greatest(claimed_at, 'epoch')
FROM processed_events WHERE event_key = $1 AND NOT EXISTS (SELECT FROM took)`

// stepState is a step claim as read back when its lease could not be taken.
type stepState struct {
	Status    ClaimStatus
	ClaimedAt time.Time
}

// queueTake queues a take of the step's lease on b; scanTake reads its
// result.
func queueTake(b *pgx.Batch, key string, lease time.Duration) {
	b.Queue(takeSQL, key, lease.Milliseconds())
}

func scanTake(row pgx.Row, key string) (leasedStep, bool, stepState, error) {
	ls := leasedStep{Key: key}
	var took bool
	var st stepState
	err := row.Scan(&took, &ls.Token, &ls.Attempts, &ls.Name, &ls.Kind, &ls.Payload, &ls.EventKey, &ls.Source,
		&ls.Traceparent, &st.Status, &st.ClaimedAt)
	if err != nil {
		return leasedStep{}, false, stepState{}, dbError("take step "+key, err)
	}
	if !took {
		return leasedStep{}, false, st, nil
	}
	return ls, true, stepState{}, nil
}

// takeStep tries to take the lease on a step. It returns ok=false and the
// stored state when another worker holds a fresh lease, or the step is
// done, parked or skipped.
func takeStep(ctx context.Context, q Querier, key string, lease time.Duration) (leasedStep, bool, stepState, error) {
	return scanTake(q.QueryRow(ctx, takeSQL, key, lease.Milliseconds()), key)
}

// completeStep marks the step done, if the claim is still ours, and
// records the attempt.
func completeStep(ctx context.Context, q Querier, ls leasedStep, at attempt) error {
	return finishStep(ctx, q, ls, ClaimDone, "", at)
}

// skipStep records that the step cannot run (why), if the claim is still
// ours, and the attempt. A skipped step is final until an operator replays
// it.
func skipStep(ctx context.Context, q Querier, ls leasedStep, why string, at attempt) error {
	return finishStep(ctx, q, ls, ClaimSkipped, why, at)
}

// finishSQL moves a step held under claim_token $2 to done or skipped and,
// in the same statement, records the attempt: with the outcome of the move
// when it matched, as lease_lost when the claim was no longer ours.
const finishSQL = `
WITH moved AS (
    UPDATE processed_events
    SET status = $3, completed_at = now(), last_error = NULLIF($4, ''), next_attempt_at = NULL
    WHERE event_key = $1 AND claim_token = $2 AND status = 'in_progress'
    RETURNING status
), recorded AS (
    INSERT INTO step_attempts (step_key, attempt, claim_attempt, started_at, duration_ms, outcome,
                               error_class, error, status_code, runner)
    VALUES ($1, $2, $5::int, $6::timestamptz, $7::float8, coalesce((SELECT status FROM moved), 'lease_lost'),
            NULLIF($8::text, ''), NULLIF($9::text, ''), NULLIF($10::int, 0), NULLIF($11::text, ''))
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM moved`

func finishStep(ctx context.Context, q Querier, ls leasedStep, status ClaimStatus, why string, at attempt) error {
	args := append([]any{ls.Key, ls.Token, string(status), why}, at.args(ls, why, nil)...)
	var moved int
	if err := q.QueryRow(ctx, finishSQL, args...).Scan(&moved); err != nil {
		return dbError("record step "+ls.Key+" "+string(status), err)
	}
	if moved != 1 {
		return errLeaseLost
	}
	return nil
}

// releaseSQL gives a step's lease back (or parks it) and, in the same
// statement, records the failed attempt: failed or parked as the step was
// left, lease_lost when the claim was no longer ours.
const releaseSQL = `
WITH moved AS (
    UPDATE processed_events
    SET claimed_at = '-infinity', last_error = $3,
        next_attempt_at = now() + $4 * interval '1 millisecond',
        status = CASE WHEN $6 OR attempts >= $5 THEN 'parked' ELSE 'in_progress' END
    WHERE event_key = $1 AND claim_token = $2 AND status = 'in_progress'
    RETURNING status
), recorded AS (
    INSERT INTO step_attempts (step_key, attempt, claim_attempt, started_at, duration_ms, outcome,
                               error_class, error, status_code, runner)
    VALUES ($1, $2, $7::int, $8::timestamptz, $9::float8,
            coalesce((SELECT CASE status WHEN 'parked' THEN 'parked' ELSE 'failed' END FROM moved), 'lease_lost'),
            NULLIF($10::text, ''), NULLIF($11::text, ''), NULLIF($12::int, 0), NULLIF($13::text, ''))
    ON CONFLICT DO NOTHING
)
SELECT status FROM moved`

// releaseStep gives the lease back after a failed attempt, so that the next
// retry need not wait for the lease to run out; the redriver waits until
// next_attempt_at. With park set, or once maxAttempts are spent, the step is
// parked for an operator instead. The attempt is recorded by the same
// statement. It returns the status the step was left in.
func releaseStep(ctx context.Context, q Querier, ls leasedStep, cause error, backoff time.Duration, maxAttempts int, park bool, at attempt) (ClaimStatus, error) {
	var status ClaimStatus
	args := append([]any{ls.Key, ls.Token, cause.Error(), backoff.Milliseconds(), maxAttempts, park},
		at.args(ls, "", cause)...)
	err := q.QueryRow(ctx, releaseSQL, args...).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errLeaseLost
	}
	if err != nil {
		return "", dbError("release step "+ls.Key, err)
	}
	return status, nil
}

// attempt is one attempt of a step, as step_attempts records it with the
// statement that completes or gives back the step's lease.
type attempt struct {
	start  time.Time
	runner string // "redriver", "operator", "replay"; "": the delivery that planned the step
	status int    // what the other side answered a success with (Answered); 0: not said
}

// MaxAttemptError bounds the error text an attempt's record keeps.
const MaxAttemptError = 300

// args are the attempt's columns after the step's own parameters: the
// claim's attempt count, start, duration, and for a failure its class,
// its text (email addresses redacted, at most MaxAttemptError characters)
// and the answer's status where the error gives one (StatusCode), or for a
// success where the kind said it (Answered). why is a skip's reason.
func (a attempt) args(ls leasedStep, why string, cause error) []any {
	text, class, status := why, "", a.status
	if cause != nil {
		text, class, status = cause.Error(), telemetry.ErrorClass(cause), StatusCode(cause)
	}
	return []any{ls.Attempts, a.start, float64(time.Since(a.start)) / float64(time.Millisecond),
		class, Redact(text, MaxAttemptError), status, a.runner}
}

// reopenSteps gives back, for a replay, the steps of an event with the
// keys given (parked ones, and skipped ones this process can now run),
// with their attempts reset, so that the replay takes them. Their
// next_attempt_at is one lease away: the replay's take does not wait for
// it, the redriver does, so that the replay runs what it reopened (and
// reports what became of it) instead of finding it done by a redriver
// that took it first; if the replay fails before it takes them, the
// redriver runs them a lease later, as it would a dead worker's.
func reopenSteps(ctx context.Context, q Querier, keys []string, lease time.Duration) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `
UPDATE processed_events
SET status = 'in_progress', claimed_at = '-infinity', attempts = 0, completed_at = NULL,
    next_attempt_at = now() + $2 * interval '1 millisecond'
WHERE event_key = ANY ($1) AND kind = 'step' AND status IN ('parked', 'skipped')`, keys, lease.Milliseconds())
	return dbError("reopen steps", err)
}

// dueStepsSQL finds steps whose lease has run out or was given back and
// whose back-off has passed: the redriver's work, oldest first.
var dueStepsSQL = `
SELECT event_key FROM processed_events
WHERE kind = 'step' AND status = 'in_progress' AND ` + leaseExpired("$1") + `
  AND (next_attempt_at IS NULL OR next_attempt_at <= now())
ORDER BY claimed_at
LIMIT $2`
