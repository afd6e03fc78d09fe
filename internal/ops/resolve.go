package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Resolving is what an operator does with a parked event that no replay
// can fix (a refund for an order the fulfillment API will never know, a
// body whose fields cannot be read): its parked claims, its own and its
// steps', become 'resolved', with the reason, who and when kept on the
// event's own row. A resolved event leaves the parked figures, the metrics
// and the alerts; prune treats it as finished; a delivery of it again is
// answered 200 as a duplicate. Its body and every attempt stay. A replay
// by its key (never the bulk replay of what is parked) reopens it first:
// its resolved claims are parked again, then replayed as any parked event,
// and the resolution is kept as history.

// MaxReasonLength bounds a resolution's reason, in characters.
const MaxReasonLength = 1000

// ErrNotParked is returned by Resolve for an event with nothing parked.
var ErrNotParked = errors.New("nothing of the event is parked")

// ErrBadReason is returned by Resolve for a reason it does not keep: none,
// too long, or not text.
var ErrBadReason = errors.New("the reason")

// ResolvePreview says what Resolve would close, changing nothing.
type ResolvePreview struct {
	Event Detail `json:"event"`
	// Close are the parked claims that would become resolved: the event's
	// own, its steps'.
	Close []Claim `json:"close"`
	// Open are steps still in progress: resolving leaves them to finish.
	Open []Claim `json:"open,omitempty"`
	// Refused says why the event cannot be resolved ("" when it can).
	Refused string `json:"refused,omitempty"`
}

// PreviewResolve reads the event stored under key (its key, or the
// provider's event id where that differs) and says what Resolve would do.
func PreviewResolve(ctx context.Context, q webhooks.Querier, key string) (ResolvePreview, error) {
	d, err := Show(ctx, q, key)
	if err != nil {
		return ResolvePreview{}, err
	}
	p := ResolvePreview{Event: d}
	for _, c := range d.Claims {
		switch webhooks.ClaimStatus(c.Status) {
		case webhooks.ClaimParked:
			p.Close = append(p.Close, c)
		case webhooks.ClaimInProgress:
			p.Open = append(p.Open, c)
		}
	}
	if len(p.Close) == 0 {
		p.Refused = notParked(d).Error()
	}
	return p, nil
}

// notParked is the refusal of an event with nothing parked, saying what it is.
func notParked(d Detail) error {
	switch {
	case d.State == webhooks.StateResolved && d.Resolution != nil:
		return fmt.Errorf("%w: %s was resolved already, by %s at %s", ErrNotParked, d.Key, d.Resolution.By,
			d.Resolution.At.UTC().Format(time.RFC3339))
	case d.State == webhooks.StateDone || d.State == webhooks.StateResolved:
		return fmt.Errorf("%w: %s is %s; only a parked event, or one with a parked step, can be resolved",
			ErrNotParked, d.Key, d.State)
	}
	return fmt.Errorf("%w: %s is %s (work still runs or is retried); only a parked event, or one with a parked step, can be resolved",
		ErrNotParked, d.Key, d.State)
}

// Resolved is what Resolve did.
type Resolved struct {
	Key        string     `json:"key"`
	Resolution Resolution `json:"resolution"`
	// Closed are the keys of the claims that became resolved.
	Closed []string `json:"closed"`
	// State is the event's state afterwards: resolved, or in_progress or
	// failed while steps that were not parked still run.
	State webhooks.State `json:"state"`
}

// resolveSQL closes the event $1's parked claims and marks its own row
// resolved, with the reason $3 and who $2 on it, in one statement. Each row
// is matched on the status it leaves (a step reopened by a replay meanwhile
// is not closed); nothing is closed when nothing is parked.
const resolveSQL = `
WITH parked AS (
    SELECT event_key FROM processed_events
    WHERE event_key >= $1 AND event_key < $1 || '0' AND (event_key = $1 OR starts_with(event_key, $1 || '/'))
      AND status = 'parked'
)
UPDATE processed_events p
SET status = 'resolved', completed_at = coalesce(p.completed_at, now()),
    resolved_at = CASE WHEN p.kind = 'event' THEN now() END,
    resolved_by = CASE WHEN p.kind = 'event' THEN $2 END,
    resolved_reason = CASE WHEN p.kind = 'event' THEN $3 END
WHERE (p.event_key IN (SELECT event_key FROM parked) AND p.status = 'parked')
   OR (p.event_key = $1 AND p.kind = 'event' AND p.status IN ('parked', 'done') AND EXISTS (SELECT FROM parked))
RETURNING p.event_key`

// Resolve closes the parked event stored under key (its key, or the
// provider's event id where that differs): its parked claims, its own and
// its steps', become resolved, and the reason, who (actor) and when are
// kept on its row. It returns an error matching ErrNotFound for no such
// event, ErrBadReason for no reason (or one too long), and ErrNotParked, saying what the
// event is, when nothing of it is parked. It logs who did it.
func Resolve(ctx context.Context, q webhooks.Querier, key, reason, actor string, log *slog.Logger) (Resolved, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return Resolved{}, fmt.Errorf("%w is required", ErrBadReason)
	case !utf8.ValidString(reason):
		return Resolved{}, fmt.Errorf("%w is not valid UTF-8", ErrBadReason)
	case utf8.RuneCountInString(reason) > MaxReasonLength:
		return Resolved{}, fmt.Errorf("%w is longer than %d characters", ErrBadReason, MaxReasonLength)
	}
	d, err := Show(ctx, q, key)
	if err != nil {
		return Resolved{}, err
	}
	if d.State != webhooks.StateParked {
		return Resolved{}, notParked(d)
	}
	rows, err := q.Query(ctx, resolveSQL, d.Key, actor, reason)
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve %s: %w", d.Key, err)
	}
	closed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Resolved{}, fmt.Errorf("resolve %s: %w", d.Key, err)
	}
	if len(closed) == 0 { // a replay reopened it meanwhile
		after, err := Show(ctx, q, d.Key)
		if err != nil {
			return Resolved{}, err
		}
		return Resolved{}, notParked(after)
	}
	after, err := Show(ctx, q, d.Key)
	if err != nil {
		return Resolved{}, err
	}
	r := Resolved{Key: d.Key, Closed: closed, State: after.State}
	if after.Resolution != nil {
		r.Resolution = *after.Resolution
	}
	log.InfoContext(ctx, "operator resolved a parked event", "actor", actor, "event_key", d.Key,
		"closed", len(closed), "reason", webhooks.Redact(reason, 200))
	return r, nil
}

// reopenSQL parks again the resolved claims of the event $1, for a replay:
// its steps, and its own claim when that was parked (its outcome says so:
// an event parked on arrival is stored with outcome parked until a replay
// processes it); the resolution stays on the row as history.
const reopenSQL = `
UPDATE processed_events
SET status = CASE WHEN kind = 'step' OR outcome = 'parked' THEN 'parked' ELSE 'done' END,
    completed_at = CASE WHEN kind = 'step' OR outcome = 'parked' THEN NULL ELSE completed_at END
WHERE event_key >= $1 AND event_key < $1 || '0' AND (event_key = $1 OR starts_with(event_key, $1 || '/'))
  AND status = 'resolved'`

// reopenResolved parks again what an operator resolved of the event with
// key, so that a replay runs it; it reports whether there was any.
func reopenResolved(ctx context.Context, q webhooks.Querier, key string) (bool, error) {
	tag, err := q.Exec(ctx, reopenSQL, key)
	if err != nil {
		return false, fmt.Errorf("reopen resolved %s: %w", key, err)
	}
	return tag.RowsAffected() > 0, nil
}
