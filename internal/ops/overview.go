package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Health is what the claims table says about the receiver right now.
type Health struct {
	// OldestStep is the step whose lease is the oldest held (nil: none).
	// Older than the lease, its worker died and the redriver should have
	// taken it back.
	OldestStep *OldestStep `json:"oldest_step,omitempty"`
	// ParkedClaims are claims of events (their own and their steps')
	// parked for an operator; ParkedEvents the events they belong to:
	// webhooks.ParkedCountsSQL, as the metrics count them (ReadActivity's
	// parked series are those of them received in its window).
	ParkedClaims int64 `json:"parked_claims"`
	ParkedEvents int64 `json:"parked_events"`
	// StepsWaiting are steps whose lease ran out or was given back,
	// waiting for a retry or the redriver.
	StepsWaiting int64 `json:"steps_waiting"`
	// LastEvents is the newest event of each source (zero ReceivedAt: none
	// stored), delivered or reconciled.
	LastEvents []LastEvent `json:"last_events"`
	// Reconciles are the last run of each reconciled source, newest first
	// (none when reconciliation never ran or its table does not exist).
	Reconciles []ReconcileRun `json:"reconciles,omitempty"`
}

// OldestStep is the oldest lease held on a step.
type OldestStep struct {
	Key      string        `json:"key"`
	EventKey string        `json:"event_key"`
	Attempts int           `json:"attempts"`
	Age      time.Duration `json:"age"`
}

// LastEvent is the newest event of a source.
type LastEvent struct {
	Source     string    `json:"source"`
	Key        string    `json:"key,omitempty"`
	Type       string    `json:"type,omitempty"`
	Via        string    `json:"via,omitempty"`
	ReceivedAt time.Time `json:"received_at,omitzero"`
}

// ReconcileRun is one recorded reconciliation run.
type ReconcileRun struct {
	Source     string     `json:"source"`
	Trigger    string     `json:"trigger"`
	Result     string     `json:"result"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Found      int        `json:"found"`
	Missed     int        `json:"missed"`
	Unresolved int        `json:"unresolved"`
	Error      string     `json:"error,omitempty"`
}

var (
	oldestStepSQL = `
SELECT event_key, coalesce(parent_key, ''), attempts, extract(epoch FROM now() - claimed_at)::float8
FROM processed_events
WHERE kind = 'step' AND status = 'in_progress' AND claimed_at > '-infinity'
ORDER BY claimed_at LIMIT 1`
	// The same count as the metrics' (webhook_parked, webhook_parked_events).
	parkedSQL  = webhooks.ParkedCountsSQL
	waitingSQL = `
SELECT count(*) FROM processed_events
WHERE kind = 'step' AND status = 'in_progress' AND claimed_at < now() - $1 * interval '1 millisecond'`
	// One probe of the source index per source.
	lastEventsSQL = `
SELECT s.source, coalesce(e.event_key, ''), coalesce(e.event_type, ''), coalesce(e.via, ''), e.claimed_at
FROM unnest($1::text[]) AS s(source)
LEFT JOIN LATERAL (
    SELECT event_key, event_type, via, claimed_at FROM processed_events
    WHERE kind = 'event' AND source = s.source
    ORDER BY claimed_at DESC, event_key DESC LIMIT 1
) e ON true`
	// reconcile_runs (migrations/000004): the last run of each source.
	lastReconcilesSQL = `
SELECT DISTINCT ON (source) source, triggered_by, result, started_at, finished_at, found, missed, unresolved,
       coalesce(error, '')
FROM reconcile_runs
WHERE started_at > now() - interval '90 days'
ORDER BY source, started_at DESC, id DESC`
)

// ReadHealth reads the health strip in one round trip: each figure from a
// partial index (open steps, parked claims) or one index probe per source,
// so it costs the same at a thousand events or ten million.
func ReadHealth(ctx context.Context, q webhooks.Querier, lease time.Duration, sources []string) (Health, error) {
	var h Health
	b := &pgx.Batch{}
	b.Queue(oldestStepSQL)
	b.Queue(parkedSQL)
	b.Queue(waitingSQL, lease.Milliseconds())
	b.Queue(lastEventsSQL, sources)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	var o OldestStep
	var age float64
	switch err := br.QueryRow().Scan(&o.Key, &o.EventKey, &o.Attempts, &age); {
	case err == nil:
		o.Age = time.Duration(age * float64(time.Second))
		h.OldestStep = &o
	case !errors.Is(err, pgx.ErrNoRows):
		return Health{}, fmt.Errorf("oldest step: %w", err)
	}
	if err := br.QueryRow().Scan(&h.ParkedClaims, &h.ParkedEvents); err != nil {
		return Health{}, fmt.Errorf("parked: %w", err)
	}
	if err := br.QueryRow().Scan(&h.StepsWaiting); err != nil {
		return Health{}, fmt.Errorf("steps waiting: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return Health{}, fmt.Errorf("last events: %w", err)
	}
	h.LastEvents, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (LastEvent, error) {
		var l LastEvent
		var at *time.Time
		err := r.Scan(&l.Source, &l.Key, &l.Type, &l.Via, &at)
		if at != nil {
			l.ReceivedAt = *at
		}
		return l, err
	})
	if err != nil {
		return Health{}, fmt.Errorf("last events: %w", err)
	}
	if err := br.Close(); err != nil {
		return Health{}, err
	}
	h.Reconciles, err = lastReconciles(ctx, q)
	return h, err
}

// lastReconciles reads the last run of each source; none when the
// reconciliation's table is not there.
func lastReconciles(ctx context.Context, q webhooks.Querier) ([]ReconcileRun, error) {
	rows, err := q.Query(ctx, lastReconcilesSQL)
	if err != nil {
		return nil, fmt.Errorf("last reconcile runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReconcileRun, error) {
		var run ReconcileRun
		err := r.Scan(&run.Source, &run.Trigger, &run.Result, &run.StartedAt, &run.FinishedAt, &run.Found,
			&run.Missed, &run.Unresolved, &run.Error)
		return run, err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last reconcile runs: %w", err)
	}
	return runs, nil
}

// Activity is how many events were received, by their state now (the one
// word an event's state is shown with: Summary.Word), in consecutive
// buckets.
type Activity struct {
	Start   time.Time     `json:"start"`
	Bucket  time.Duration `json:"bucket"`
	Buckets []Bucket      `json:"buckets"`
}

// Bucket is one interval of an Activity.
type Bucket struct {
	Start time.Time `json:"start"`
	// States counts the bucket's events by state word: done, ignored,
	// resolved, in_progress, failed, parked.
	States map[string]int64 `json:"states"`
}

// Total is the bucket's count over every state.
func (b Bucket) Total() int64 {
	var n int64
	for _, c := range b.States {
		n += c
	}
	return n
}

// Count is the activity's count of one state over every bucket.
func (a Activity) Count(state string) int64 {
	var n int64
	for _, b := range a.Buckets {
		n += b.States[state]
	}
	return n
}

// ActivityStates are the state words an Activity counts, worst last.
var ActivityStates = []string{string(webhooks.StateDone), string(webhooks.OutcomeIgnored), string(webhooks.StateResolved),
	string(webhooks.StateInProgress), string(webhooks.StateFailed), string(webhooks.StateParked)}

// activitySQL counts events received in [$1, $3) by bucket and state now.
// Most events are done and say so in their own row; those that wait for
// anything are few, and found first: the parked ones with the same query
// the parked figures use (webhooks.ParkedEventsSQL), so that the chart's
// parked events are the Parked figure's, and those with a step open from
// the attention index (status, claimed_at).
var activitySQL = `
WITH parked AS MATERIALIZED (` + webhooks.ParkedEventsSQL + `),
open AS MATERIALIZED (
    SELECT parent_key AS key, bool_or(last_error IS NOT NULL) AS failed FROM processed_events
    WHERE kind = 'step' AND status = 'in_progress' AND parent_key IS NOT NULL
    GROUP BY parent_key)
SELECT date_bin($2 * interval '1 millisecond', e.claimed_at, $1::timestamptz) AS bucket,
       CASE WHEN e.event_key IN (SELECT key FROM parked) THEN 'parked'
            WHEN o.failed THEN 'failed'
            WHEN o.key IS NOT NULL THEN 'in_progress'
            WHEN e.status = 'resolved' THEN 'resolved'
            WHEN e.outcome = 'ignored' THEN 'ignored'
            ELSE 'done' END,
       count(*)
FROM processed_events e LEFT JOIN open o ON o.key = e.event_key
WHERE e.kind = 'event' AND e.claimed_at >= $1 AND e.claimed_at < $3
GROUP BY 1, 2`

// ReadActivity counts the events received in [start, end), in buckets of
// the given width, by state now, from the received index (one heap read
// per event in the window for its own status and outcome).
func ReadActivity(ctx context.Context, q webhooks.Querier, start, end time.Time, bucket time.Duration) (Activity, error) {
	a := Activity{Start: start, Bucket: bucket}
	n := int(end.Sub(start) / bucket)
	for i := range n {
		a.Buckets = append(a.Buckets, Bucket{Start: start.Add(time.Duration(i) * bucket), States: map[string]int64{}})
	}
	rows, err := q.Query(ctx, activitySQL, start, bucket.Milliseconds(), end)
	if err != nil {
		return Activity{}, fmt.Errorf("activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var at time.Time
		var state string
		var c int64
		if err := rows.Scan(&at, &state, &c); err != nil {
			return Activity{}, fmt.Errorf("activity: %w", err)
		}
		if i := int(at.Sub(start) / bucket); i >= 0 && i < n {
			a.Buckets[i].States[state] += c
		}
	}
	if err := rows.Err(); err != nil {
		return Activity{}, fmt.Errorf("activity: %w", err)
	}
	return a, nil
}
