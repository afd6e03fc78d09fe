// Package ops is what operators do with the receiver, from the command line
// (`server events …`) and from the console alike: list, search and show
// events with every claim, replay what was parked, run a step now, and
// prune what is done. Neither holds SQL of its own: the operator queries
// are here, the claim machinery they drive is internal/webhooks'.
//
// # Operators read through owners
//
// This package knows the receiver's own tables (processed_events,
// step_attempts, reconcile_runs) and no business table. What an event's
// page shows of orders, invoices, refunds, subscriptions and disputes,
// and what a search finds through them, each domain package says of its
// own rows as an Owner (records.go), with its SQL beside the SQL that
// writes them; the owners are a plain list the wiring hands down
// (wiring.Owners: the receiver's own, then each provider line's Owners),
// never looked up. So a new table is visible to operators once its owner
// joins that list, this package unedited. The alerts kept are read
// through an AlertLog (internal/alerts' Log) the same way. This package
// imports internal/webhooks and no domain package (TestLayering in
// internal/registry holds it).
package ops

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Summary is one event in a listing.
type Summary struct {
	Key        string         `json:"key"`
	Source     string         `json:"source"`
	Type       string         `json:"type"`
	EventID    string         `json:"event_id"`
	APIVersion string         `json:"api_version,omitempty"`
	Outcome    string         `json:"outcome"`
	Via        string         `json:"via"`
	State      webhooks.State `json:"state"`
	Steps      int            `json:"steps"`
	StepsDone  int            `json:"steps_done"` // done or skipped
	ReceivedAt time.Time      `json:"received_at"`
}

// Word is the one word the console and the CLI show for the event's
// state: its State, or "ignored" for a done event of a type the receiver
// does not act on.
func (s Summary) Word() string {
	if s.State == webhooks.StateDone && s.Outcome == string(webhooks.OutcomeIgnored) {
		return string(webhooks.OutcomeIgnored)
	}
	return string(s.State)
}

// Filter narrows a listing; zero fields match everything.
type Filter struct {
	Source    string
	Type      string
	State     webhooks.State
	OlderThan time.Duration // received longer ago than this
	Since     time.Duration // received within this long ago
	From, To  time.Time     // received in [From, To); zero: unbounded
	// Query is any id an operator holds, or a customer's email: the
	// listing is the events it finds (see search.go).
	Query string
	// Specs are the providers, and Owners the owners of the business rows
	// a query looks up (Owner.Search).
	Specs  []webhooks.Spec
	Owners []Owner
	// After continues a listing after this event (keyset pagination): the
	// events that follow it, older, in the listing's order.
	After *Cursor
	Limit int
}

// Cursor is a position in a listing: the last event of a page.
type Cursor struct {
	ReceivedAt time.Time
	Key        string
}

// Page is one page of a listing and, when more follow, where the next
// one starts.
type Page struct {
	Events []Summary
	Next   *Cursor
}

// stateSQL derives an event's state from its claims (aliased p), worst
// first, as webhooks.States orders them.
const stateSQL = `CASE
    WHEN bool_or(p.status = 'parked') THEN 'parked'
    WHEN bool_or(p.status = 'in_progress' AND p.last_error IS NOT NULL) THEN 'failed'
    WHEN bool_or(p.status = 'in_progress') THEN 'in_progress'
    WHEN bool_or(p.status = 'resolved') THEN 'resolved'
    ELSE 'done' END`

// stateOf is the state of the event whose key is the expression key,
// derived from its claims: one range scan of the primary key.
func stateOf(key string) string {
	return `(SELECT ` + stateSQL + `
    FROM processed_events p
    WHERE p.event_key >= ` + key + ` AND p.event_key < ` + key + ` || '0'
      AND (p.event_key = ` + key + ` OR starts_with(p.event_key, ` + key + ` || '/')))`
}

// waitingKeysSQL lists the events that wait for anything: a parked claim
// or a step not done (few, from the attention index). A
// standalone step (an alert's) has no parent and is no event's.
const waitingKeysSQL = `
    SELECT coalesce(parent_key, event_key) AS key FROM processed_events WHERE status = 'parked'
    UNION SELECT parent_key FROM processed_events
    WHERE kind = 'step' AND status = 'in_progress' AND parent_key IS NOT NULL`

// summarySQL reads events (aliased e, from the FROM clause the caller
// appends) with their state, derived from every row of the event: one
// range scan of the primary key each.
const summarySQL = `
SELECT e.event_key, e.source, coalesce(e.event_type, ''), coalesce(e.event_id, e.event_key),
       coalesce(e.api_version, ''), coalesce(e.outcome, ''), coalesce(e.via, 'delivery'),
       s.state, s.steps, s.steps_done, e.claimed_at
FROM %s
CROSS JOIN LATERAL (
    SELECT ` + stateSQL + ` AS state,
           count(*) FILTER (WHERE p.kind = 'step') AS steps,
           count(*) FILTER (WHERE p.kind = 'step' AND p.status IN ('done', 'skipped')) AS steps_done
    FROM processed_events p
    WHERE p.event_key >= e.event_key AND p.event_key < e.event_key || '0'
      AND (p.event_key = e.event_key OR starts_with(p.event_key, e.event_key || '/'))
) s
`

func scanSummary(r pgx.CollectableRow) (Summary, error) {
	var s Summary
	err := r.Scan(&s.Key, &s.Source, &s.Type, &s.EventID, &s.APIVersion, &s.Outcome, &s.Via,
		&s.State, &s.Steps, &s.StepsDone, &s.ReceivedAt)
	return s, err
}

// List returns stored events, newest first (the first page of ListPage).
func List(ctx context.Context, q webhooks.Querier, f Filter) ([]Summary, error) {
	p, err := ListPage(ctx, q, f)
	return p.Events, err
}

// ListPage returns a page of stored events, newest first, and where the
// next page starts. Pages are keyset-paginated on (received, key), which
// the received index (or, with a source, the source index) serves in
// order, so page 1 000 costs what page 1 does. A state filter starts from
// the claims in that state (the attention index: status, then claimed_at), and
// a query from the rows it finds (search.go), so that neither walks the
// done events however many there are.
func ListPage(ctx context.Context, q webhooks.Querier, f Filter) (Page, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	var b sqlBuilder
	// The page is chosen first, from the event rows alone, and only its
	// events' states are derived: a state's cost is a handful of rows,
	// but the planner, which cannot know that, would otherwise walk every
	// event in order to derive as few as it can.
	var with []string
	where := []string{"e.kind = 'event'"}
	if query := strings.TrimSpace(f.Query); query != "" {
		with = append(with, "hit AS MATERIALIZED ("+searchSQL(&b, query, f.Specs, f.Owners)+")")
		where = append(where, "e.event_key IN (SELECT key FROM hit)")
	}
	switch f.State {
	case webhooks.StateParked: // parked is the worst state: any parked claim makes it
		with = append(with, `st AS MATERIALIZED (`+webhooks.ParkedEventsSQL+`)`)
		where = append(where, "e.event_key IN (SELECT key FROM st)")
	case webhooks.StateFailed, webhooks.StateInProgress:
		with = append(with, `st AS MATERIALIZED (
    SELECT k.key FROM (
        SELECT DISTINCT parent_key AS key FROM processed_events
        WHERE kind = 'step' AND status = 'in_progress' AND parent_key IS NOT NULL) k
    WHERE `+stateOf("k.key")+` = `+b.arg(string(f.State))+`)`)
		where = append(where, "e.event_key IN (SELECT key FROM st)")
	case webhooks.StateResolved: // from the attention index: events an operator closed
		with = append(with, `st AS MATERIALIZED (
    SELECT k.key FROM (
        SELECT event_key AS key FROM processed_events WHERE status = 'resolved' AND kind = 'event') k
    WHERE `+stateOf("k.key")+` = `+b.arg(string(f.State))+`)`)
		where = append(where, "e.event_key IN (SELECT key FROM st)")
	case webhooks.StateDone:
		with = append(with, `st AS MATERIALIZED (`+waitingKeysSQL+`)`)
		where = append(where, "e.event_key NOT IN (SELECT key FROM st)", "e.status <> 'resolved'")
	}
	if f.Source != "" {
		where = append(where, "e.source = "+b.arg(f.Source))
	}
	if f.Type != "" {
		where = append(where, "e.event_type = "+b.arg(f.Type))
	}
	if f.OlderThan > 0 {
		where = append(where, "e.claimed_at < now() - "+b.arg(f.OlderThan.Milliseconds())+" * interval '1 millisecond'")
	}
	if f.Since > 0 {
		where = append(where, "e.claimed_at >= now() - "+b.arg(f.Since.Milliseconds())+" * interval '1 millisecond'")
	}
	if !f.From.IsZero() {
		where = append(where, "e.claimed_at >= "+b.arg(f.From))
	}
	if !f.To.IsZero() {
		where = append(where, "e.claimed_at < "+b.arg(f.To))
	}
	if f.After != nil {
		where = append(where, "(e.claimed_at, e.event_key) < ("+b.arg(f.After.ReceivedAt)+"::timestamptz, "+
			b.arg(f.After.Key)+"::text COLLATE \"C\")")
	}
	const order = "\nORDER BY e.claimed_at DESC, e.event_key DESC"
	page := "(SELECT e.* FROM processed_events e\nWHERE " + strings.Join(where, "\n  AND ") + order +
		"\nLIMIT " + b.arg(f.Limit+1) + ") e"
	sql := fmt.Sprintf(summarySQL, page) + order
	if len(with) > 0 {
		sql = "WITH " + strings.Join(with, ",\n") + "\n" + sql
	}
	var events []Summary
	err := withoutJIT(ctx, q, func(q webhooks.Querier) error {
		rows, err := q.Query(ctx, sql, b.args...)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, scanSummary)
		return err
	})
	if err != nil {
		return Page{}, fmt.Errorf("list events: %w", err)
	}
	p := Page{Events: events}
	if len(events) > f.Limit {
		p.Events = events[:f.Limit]
		last := p.Events[f.Limit-1]
		p.Next = &Cursor{ReceivedAt: last.ReceivedAt, Key: last.Key}
	}
	return p, nil
}

// withoutJIT runs f in a transaction of its own with JIT compilation off,
// when q can begin one (a pool, a connection, a transaction). A listing's
// plan is estimated far above what it costs: the planner cannot know that
// an event's rows are a handful of keys of the primary key's range, and
// puts 10 000 rows in each. On such estimates PostgreSQL compiles the
// query with LLVM, which costs 300 ms to 2 s for a query that runs in 2 ms
// (measured at 1 M events).
func withoutJIT(ctx context.Context, q webhooks.Querier, f func(webhooks.Querier) error) error {
	b, ok := q.(interface {
		Begin(context.Context) (pgx.Tx, error)
	})
	if !ok {
		return f(q)
	}
	return pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
			return err
		}
		return f(tx)
	})
}

// sqlBuilder numbers the arguments of a query built from optional parts.
type sqlBuilder struct{ args []any }

func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// Claim is one row of processed_events, for operators.
type Claim struct {
	Key           string     `json:"key"`
	Kind          string     `json:"kind"`
	Step          string     `json:"step,omitempty"`
	StepKind      string     `json:"step_kind,omitempty"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	ClaimToken    int64      `json:"claim_token"`
	LastError     string     `json:"last_error,omitempty"`
	ClaimedAt     *time.Time `json:"claimed_at,omitempty"` // nil when the lease was given back
	CompletedAt   *time.Time `json:"completed_at,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// What the step's attempts send outside, the same on every attempt:
	// a fulfillment call's Idempotency-Key, an email's Message-ID.
	// Refs are what the step sends outside that is the same on every
	// attempt (its Message-ID, its Idempotency-Key), as its kind says
	// (Detail.AddRefs).
	Refs    []webhooks.Ref `json:"refs,omitempty"`
	Payload []byte         `json:"-"`
	// History is every attempt of a step, oldest first (none for the
	// event's own claim).
	History []Attempt `json:"history,omitempty"`
}

// Attempt is one attempt of a step, as step_attempts recorded it with the
// completion or give-back of its lease.
type Attempt struct {
	// N is the attempt's number over the step's life (its lease token):
	// a replay resets the claim's attempts, never this.
	N int64 `json:"attempt"`
	// Outcome is done, failed, parked, skipped or lease_lost (it ran, but
	// its lease had been taken meanwhile); two more are not recorded but
	// read from the claim: running (the lease is held now) and unrecorded
	// (its worker died, or lost the database, before it could record it;
	// or the attempt was made before attempts were recorded).
	Outcome    string        `json:"outcome"`
	StartedAt  *time.Time    `json:"started_at,omitempty"`
	Duration   time.Duration `json:"-"`
	DurationMS float64       `json:"duration_ms,omitempty"`
	// ErrorClass and Error are a failure's class (timeout,
	// *fulfillment.StatusError, …) and its text, short, with email
	// addresses redacted; a skip's reason is its Error.
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	// Status is what the other side answered, where it did: the API's
	// HTTP status, the SMTP reply code.
	Status int `json:"status,omitempty"`
	// Runner is who ran it when it was not the delivery that planned the
	// step: redriver, operator, replay.
	Runner string `json:"runner,omitempty"`
}

// Resolution is what an operator said when closing a parked event.
type Resolution struct {
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	// Reopened: a replay reopened the event since; the resolution is
	// history.
	Reopened bool `json:"reopened,omitempty"`
}

// Detail is one event with its stored body and every claim.
type Detail struct {
	Summary
	Error      string      `json:"error,omitempty"`
	Reason     string      `json:"reason,omitempty"` // why an ignored event was ignored, when its provider said
	Resolution *Resolution `json:"resolution,omitempty"`
	Body       []byte      `json:"-"`
	Claims     []Claim     `json:"claims"`
}

// AddRefs sets the Refs of every step of d, as the kinds of this process
// describe them (webhooks.Referrer): a kind this process does not run
// shows none.
func (d *Detail) AddRefs(kinds webhooks.StepKinds) {
	for i, c := range d.Claims {
		if c.Kind == "step" {
			d.Claims[i].Refs = kinds.Refs(c.StepKind, c.Key, c.Payload)
		}
	}
}

// ErrNotFound is returned for a key with no stored event.
var ErrNotFound = webhooks.ErrNotFound

// Show returns the event stored under key (its key, or the provider's
// event id where that differs), or an error matching ErrNotFound, or
// webhooks.ErrAmbiguous for an id that several events share.
func Show(ctx context.Context, q webhooks.Querier, key string) (Detail, error) {
	var d Detail
	rows, err := q.Query(ctx, fmt.Sprintf(summarySQL, "processed_events e")+`
WHERE e.kind = 'event' AND (e.event_key = $1 OR (e.event_id = $1 AND e.event_id <> e.event_key))
ORDER BY e.event_key = $1 DESC LIMIT 2`, key)
	if err != nil {
		return Detail{}, fmt.Errorf("show %s: %w", key, err)
	}
	found, err := pgx.CollectRows(rows, scanSummary)
	switch {
	case err != nil:
		return Detail{}, fmt.Errorf("show %s: %w", key, err)
	case len(found) == 0:
		return Detail{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	case len(found) > 1 && found[0].Key != key:
		return Detail{}, webhooks.Ambiguous(ctx, q, key)
	}
	d.Summary = found[0]
	b := &pgx.Batch{}
	b.Queue(`
SELECT event_key, kind, coalesce(step, ''), coalesce(step_kind, ''), status, attempts, claim_token,
       coalesce(last_error, ''), CASE WHEN claimed_at = '-infinity' THEN NULL ELSE claimed_at END,
       completed_at, next_attempt_at, payload, coalesce(body, ''), resolved_at, coalesce(resolved_by, ''),
       coalesce(resolved_reason, '')
FROM processed_events
WHERE event_key >= $1 AND event_key < $1 || '0' AND (event_key = $1 OR starts_with(event_key, $1 || '/'))
ORDER BY kind, event_key`, d.Key)
	b.Queue(attemptsSQL, d.Key)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	rows, err = br.Query()
	if err != nil {
		return Detail{}, fmt.Errorf("show claims of %s: %w", d.Key, err)
	}
	d.Claims, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claim, error) {
		var c Claim
		var body []byte
		var res Resolution
		var resolvedAt *time.Time
		err := r.Scan(&c.Key, &c.Kind, &c.Step, &c.StepKind, &c.Status, &c.Attempts, &c.ClaimToken, &c.LastError,
			&c.ClaimedAt, &c.CompletedAt, &c.NextAttemptAt, &c.Payload, &body, &resolvedAt, &res.By, &res.Reason)
		if c.Kind == "event" {
			d.Body = body
			switch {
			case c.Status == string(webhooks.ClaimParked) || c.Status == string(webhooks.ClaimResolved) && c.LastError != "":
				d.Error = c.LastError
			case d.Outcome == string(webhooks.OutcomeIgnored):
				d.Reason = c.LastError
			}
			if resolvedAt != nil {
				res.At, res.Reopened = *resolvedAt, c.Status != string(webhooks.ClaimResolved)
				d.Resolution = &res
			}
		}
		return c, err
	})
	if err != nil {
		return Detail{}, fmt.Errorf("show claims of %s: %w", d.Key, err)
	}
	rows, err = br.Query()
	if err != nil {
		return Detail{}, fmt.Errorf("show attempts of %s: %w", d.Key, err)
	}
	history := map[string][]Attempt{}
	var stepKey string
	var a Attempt
	var started time.Time
	_, err = pgx.ForEachRow(rows, []any{&stepKey, &a.N, &started, &a.DurationMS, &a.Outcome, &a.ErrorClass, &a.Error,
		&a.Status, &a.Runner}, func() error {
		at := started
		a.StartedAt, a.Duration = &at, time.Duration(a.DurationMS*float64(time.Millisecond))
		history[stepKey] = append(history[stepKey], a)
		return nil
	})
	if err != nil {
		return Detail{}, fmt.Errorf("show attempts of %s: %w", d.Key, err)
	}
	for i, c := range d.Claims {
		if c.Kind == "step" {
			d.Claims[i].History = fillHistory(c, history[c.Key])
		}
	}
	return d, nil
}

// attemptsSQL reads the attempts of every step of the event $1, one range
// of step_attempts' primary key.
const attemptsSQL = `
SELECT step_key, attempt, started_at, duration_ms, outcome, coalesce(error_class, ''), coalesce(error, ''),
       coalesce(status_code, 0), coalesce(runner, '')
FROM step_attempts
WHERE step_key > $1 AND step_key < $1 || '0' AND starts_with(step_key, $1 || '/')
ORDER BY step_key, attempt`

// fillHistory completes a step's recorded attempts with those its lease
// token says were made but not recorded: the one running now, and any whose
// worker died before recording it (or made before attempts were recorded).
// A step skipped when it was planned made no attempt.
func fillHistory(c Claim, recorded []Attempt) []Attempt {
	if len(recorded) == 0 && c.Status == string(webhooks.ClaimSkipped) {
		return nil
	}
	byN := make(map[int64]Attempt, len(recorded))
	for _, a := range recorded {
		byN[a.N] = a
	}
	out := make([]Attempt, 0, c.ClaimToken)
	for n := int64(1); n <= c.ClaimToken; n++ {
		a, ok := byN[n]
		switch {
		case ok:
		case n == c.ClaimToken && c.Status == string(webhooks.ClaimInProgress) && c.ClaimedAt != nil:
			a = Attempt{N: n, Outcome: "running", StartedAt: c.ClaimedAt}
		default:
			a = Attempt{N: n, Outcome: "unrecorded"}
		}
		out = append(out, a)
	}
	return out
}

// ParkedSince returns the keys of events that have anything parked and
// were received within since, at most limit of them.
func ParkedSince(ctx context.Context, q webhooks.Querier, since time.Duration, limit int) ([]string, error) {
	parked, err := List(ctx, q, Filter{State: webhooks.StateParked, Since: since, Limit: limit})
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(parked))
	for i, s := range parked {
		keys[i] = s.Key
	}
	return keys, nil
}

// Replayer is what a replay needs of the processor.
type Replayer interface {
	Replay(ctx context.Context, prov webhooks.Provider, ev webhooks.Event) (webhooks.Result, error)
}

// Replay runs the event stored under key again through the processor and
// the same claims as a delivery (see webhooks.Processor.Replay), and logs
// who asked for it and what became of it. A resolved event is reopened
// first (resolve.go).
func Replay(ctx context.Context, q webhooks.Querier, proc Replayer, providers map[string]webhooks.Provider,
	key, actor string, log *slog.Logger) (webhooks.Result, error) {
	ev, err := webhooks.LoadEvent(ctx, q, key)
	if err != nil {
		return webhooks.Result{}, err
	}
	prov, ok := providers[ev.Source]
	if !ok {
		return webhooks.Result{}, fmt.Errorf("replay %s: no provider for source %q", ev.Key, ev.Source)
	}
	// A replay asked for by key reopens what an operator resolved: it is
	// parked again, then replayed as any parked event.
	reopened, err := reopenResolved(ctx, q, ev.Key)
	if err != nil {
		return webhooks.Result{}, err
	}
	if reopened {
		log.InfoContext(ctx, "operator replay reopens a resolved event", "actor", actor, "event_key", ev.Key)
	}
	res, err := proc.Replay(ctx, prov, ev)
	if err != nil {
		log.ErrorContext(ctx, "operator replay failed", "actor", actor, "event_key", ev.Key, "error", err)
		return res, err
	}
	log.InfoContext(ctx, "operator replay", "actor", actor, "event_key", ev.Key, "outcome", string(res.Outcome),
		"error", errText(res.Err))
	return res, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// PruneResult counts what Prune deleted (or would delete).
type PruneResult struct {
	Events int64 // events deleted, with their stored bodies
	Claims int64 // claim rows deleted (events' and steps')
}

// pruneSQL deletes a batch of a source's events whose claims are all
// final (done or resolved, or skipped steps) and older than $2 ms, with
// their steps and their steps' attempts:
// the oldest first, through the received index, each event's rows as one
// range of the primary key. Nothing in progress or parked is deleted.
//
// The OFFSET 0 keeps the open-steps check a probe of each candidate's own
// range of the primary key: as a NOT EXISTS PostgreSQL may turn it into an
// anti-join, and did, over a sequential scan of the whole table for the
// few open rows, once per batch (156 of 160 ms of a batch at 100 000
// events; BenchmarkPrune in internal/console).
const pruneVictimsSQL = `
    SELECT e.event_key FROM processed_events e
    WHERE e.kind = 'event' AND e.source = $1 AND e.status IN ('done', 'resolved')
      AND e.claimed_at < now() - $2 * interval '1 millisecond'
      AND NOT EXISTS (
          SELECT 1 FROM processed_events s
          WHERE s.event_key > e.event_key AND s.event_key < e.event_key || '0'
            AND starts_with(s.event_key, e.event_key || '/') AND s.status NOT IN ('done', 'skipped', 'resolved')
          OFFSET 0)
    ORDER BY e.claimed_at
    LIMIT $3`

const pruneSQL = `
WITH victims AS (` + pruneVictimsSQL + `
    FOR UPDATE SKIP LOCKED
), claims AS (
    DELETE FROM processed_events p USING victims v
    WHERE p.event_key >= v.event_key AND p.event_key < v.event_key || '0'
      AND (p.event_key = v.event_key OR starts_with(p.event_key, v.event_key || '/'))
    RETURNING 1
), attempts AS (
    DELETE FROM step_attempts a USING victims v
    WHERE a.step_key > v.event_key AND a.step_key < v.event_key || '0'
      AND starts_with(a.step_key, v.event_key || '/')
)
SELECT (SELECT count(*) FROM victims), (SELECT count(*) FROM claims)`

const pruneCountSQL = `
SELECT count(*), coalesce(sum(n), 0) FROM (
    SELECT (SELECT count(*) FROM processed_events p
            WHERE p.event_key >= v.event_key AND p.event_key < v.event_key || '0'
              AND (p.event_key = v.event_key OR starts_with(p.event_key, v.event_key || '/'))) AS n
    FROM (` + pruneVictimsSQL + `) v
) c`

// Prune deletes, for one source, every event whose claims are all final
// (done, skipped or resolved) and older than olderThan, with its steps'
// claims and attempts and its stored body, in
// batches of batchSize. With dryRun it deletes nothing and counts what it
// would delete. progress, if not nil, is called after each batch.
func Prune(ctx context.Context, q webhooks.Querier, source string, olderThan time.Duration, batchSize int,
	dryRun bool, progress func(PruneResult)) (PruneResult, error) {
	if olderThan <= 0 {
		return PruneResult{}, fmt.Errorf("prune %s: the window must be positive, got %s", source, olderThan)
	}
	if dryRun {
		var r PruneResult
		err := q.QueryRow(ctx, pruneCountSQL, source, olderThan.Milliseconds(), int64(1)<<62).Scan(&r.Events, &r.Claims)
		if err != nil {
			return PruneResult{}, fmt.Errorf("prune %s (dry run): %w", source, err)
		}
		return r, nil
	}
	var total PruneResult
	for {
		var events, claims int64
		if err := q.QueryRow(ctx, pruneSQL, source, olderThan.Milliseconds(), batchSize).Scan(&events, &claims); err != nil {
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
