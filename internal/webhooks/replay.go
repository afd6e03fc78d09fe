package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paywebhooks/receiver/internal/telemetry"
)

// LoadEvent reads the event stored under key (its claim key, or the
// provider's event id where that differs, as GitHub's delivery GUID does),
// as it was received. An id that several events share is ErrAmbiguous.
func LoadEvent(ctx context.Context, q Querier, key string) (Event, error) {
	rows, err := q.Query(ctx, `
SELECT event_key, source, coalesce(event_id, event_key), coalesce(event_type, ''), coalesce(api_version, ''),
       coalesce(body, ''), body_hash, coalesce(via, 'delivery')
FROM processed_events
WHERE kind = 'event' AND (event_key = $1 OR (event_id = $1 AND event_id <> event_key))
ORDER BY event_key = $1 DESC LIMIT 2`, key)
	if err != nil {
		return Event{}, dbError("load event "+key, err)
	}
	type row struct {
		ev  Event
		via string
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.ev.Key, &x.ev.Source, &x.ev.ID, &x.ev.Type, &x.ev.APIVersion, &x.ev.Body, &x.ev.BodyHash, &x.via)
		return x, err
	})
	switch {
	case err != nil:
		return Event{}, dbError("load event "+key, err)
	case len(found) == 0:
		return Event{}, dbError("load event "+key, pgx.ErrNoRows)
	case len(found) > 1 && found[0].ev.Key != key:
		return Event{}, Ambiguous(ctx, q, key)
	}
	ev, via := found[0].ev, found[0].via
	ev.Via = Via(via)
	return ev, nil
}

// Replay runs a stored event again through the processor, from its stored
// body, honouring every claim: done writes and done steps stay as they are,
// so a replay of finished work changes nothing. What waits for an operator
// is opened first: a parked event's claim is taken back in the replay's own
// transaction (a replay that fails leaves it parked), and parked or skipped
// steps that this process can run are given back with their attempts
// reset; those it cannot run (their kind is not configured here) stay as
// they are. The redriver leaves the steps it gives back to the replay for
// one lease (reopenSteps).
func (p *Processor) Replay(ctx context.Context, prov Provider, ev Event) (res Result, err error) {
	ctx, span := p.replaySpan(ctx, ev)
	defer func() {
		if err != nil {
			telemetry.Failed(span, telemetry.ErrorClass(err))
		}
		span.End()
	}()
	ctx = withRunner(ctx, "replay")
	claims, err := p.readClaims(ctx, ev.Key)
	if err != nil {
		return Result{}, err
	}
	if claims.Status == "" {
		return Result{}, fmt.Errorf("replay %s: %w", ev.Key, ErrNotFound)
	}
	var reopen []string
	for _, s := range claims.Steps {
		if (s.Status == ClaimParked || s.Status == ClaimSkipped) && p.Runnable(s.Kind, s.Payload) == "" {
			reopen = append(reopen, s.Key)
		}
	}
	if err := reopenSteps(ctx, p.pool, reopen, p.opts.Lease); err != nil {
		return Result{}, err
	}
	if p.afterReopen != nil {
		p.afterReopen(ev)
	}
	return p.process(ctx, prov, ev, reclaimSQL, reclaimArgs), nil
}

// replaySpan starts the span of a replay, "webhook.replay", linked to the
// transactions that planned the event's steps (their stored trace
// context), so that the replay is found with the delivery.
func (p *Processor) replaySpan(ctx context.Context, ev Event) (context.Context, trace.Span) {
	if !telemetry.Active(ctx) {
		return ctx, noop.Span{}
	}
	var links []string
	if rows, err := p.pool.Query(ctx, `SELECT DISTINCT traceparent FROM processed_events WHERE `+eventRows("$1")+
		` AND traceparent IS NOT NULL`, ev.Key); err == nil {
		links, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	return telemetry.StartLinked(ctx, "webhook.replay", links, telemetry.AttrSource.String(ev.Source),
		telemetry.AttrEventID.String(ev.ID), telemetry.AttrEventKey.String(ev.Key), telemetry.AttrEventType.String(ev.Type))
}

// Runnable reports why this process cannot run a step of the given kind
// and payload, or "" when it can: what an operator command checks before
// it runs steps.
func (p *Processor) Runnable(kind string, payload json.RawMessage) string {
	k, ok := p.kinds[kind]
	switch {
	case !ok:
		return fmt.Sprintf("no step kind %q in this process", kind)
	case k.Unconfigured() != "":
		return k.Unconfigured()
	}
	return k.Unavailable(payload)
}

// IsNotFound reports whether err says that no stored event or step matched.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
