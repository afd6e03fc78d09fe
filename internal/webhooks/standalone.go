package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A standalone step is work that leaves the database and belongs to no
// event: an operator alert (internal/alerts). It is a claim row of kind
// 'step' like an event's steps, with no parent (parent_key NULL, so it
// counts as no event's), keyed by what makes the work one (an alert's
// cause and hour): the worker whose insert makes the row holds its lease
// and runs it at once; anybody else's insert of the same key does nothing.
// From there it is a step like any other: a failed attempt gives its lease
// back and the redriver of any replica finishes it, every attempt is
// recorded, and it is parked once its attempts are spent.

// StandaloneStep is a step of no event and its claim key, unique for the
// work it does.
type StandaloneStep struct {
	Key string
	Step
}

// standaloneSQL claims standalone steps, leased to this worker (token 1,
// attempt 1) or skipped when this process cannot run their kind; a key
// claimed before is left as it is.
const standaloneSQL = `
INSERT INTO processed_events (event_key, source, status, kind, step, step_kind, payload, claim_token, attempts,
                              claimed_at, last_error, completed_at)
SELECT s.key, $1, s.status, 'step', s.step, s.kind, s.payload, 1, 1, clock_timestamp(), NULLIF(s.why, ''),
       CASE WHEN s.status = 'skipped' THEN now() END
FROM unnest($2::text[], $3::text[], $4::text[], $5::jsonb[], $6::text[], $7::text[])
     AS s(key, step, kind, payload, status, why)
ON CONFLICT (event_key) DO NOTHING
RETURNING event_key, step, step_kind, payload, status`

// RunStandalone claims each step under its key for source and runs the
// ones it claimed, side by side, each under its lease. It returns the keys
// it claimed (none when every key was claimed before, by this worker or
// another) and what became of running them: OutcomeProcessed when each is
// done, skipped or parked, OutcomeStepFailed when one failed and was given
// back for the redriver.
func (p *Processor) RunStandalone(ctx context.Context, source string, steps []StandaloneStep) ([]string, Result, error) {
	var keys, names, kinds, statuses, whys []string
	var payloads [][]byte
	for _, s := range steps {
		kind, ok := p.kinds[s.Kind]
		if !ok {
			return nil, Result{}, fmt.Errorf("standalone step %s is of kind %q, which no StepKind runs", s.Key, s.Kind)
		}
		payload, err := kind.Prepare(s.Payload)
		if err != nil {
			return nil, Result{}, fmt.Errorf("prepare standalone step %s: %w", s.Key, err)
		}
		status, why := ClaimInProgress, kind.Unconfigured()
		if why != "" {
			status = ClaimSkipped
		}
		keys, names, kinds = append(keys, s.Key), append(names, s.Name), append(kinds, s.Kind)
		payloads, statuses, whys = append(payloads, payload), append(statuses, string(status)), append(whys, why)
	}
	rows, err := p.pool.Query(ctx, standaloneSQL, source, keys, names, kinds, payloads, statuses, whys)
	if err != nil {
		return nil, Result{}, dbError("claim standalone steps", err)
	}
	var claimed []string
	var leased []leasedStep
	for rows.Next() {
		ls := leasedStep{Source: source, Token: 1, Attempts: 1}
		var status ClaimStatus
		if err := rows.Scan(&ls.Key, &ls.Name, &ls.Kind, &ls.Payload, &status); err != nil {
			rows.Close()
			return nil, Result{}, dbError("claim standalone steps", err)
		}
		claimed = append(claimed, ls.Key)
		if status == ClaimInProgress {
			leased = append(leased, ls)
		} else {
			p.log.WarnContext(ctx, "step skipped", "step", ls.Name, "step_key", ls.Key, "reason", p.kinds[ls.Kind].Unconfigured())
			p.metrics.stepOutcome(ls.Name, AttemptSkipped)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, Result{}, dbError("claim standalone steps", err)
	}
	if len(leased) == 0 {
		return claimed, Result{Outcome: OutcomeProcessed}, nil
	}
	return claimed, p.runSteps(ctx, leased, OutcomeProcessed), nil
}

// PruneStandalone deletes the standalone steps whose key starts with prefix
// ("alert:") and that finished (done, skipped or parked) before olderThan
// ago, with their attempts, and returns how many it deleted. Their keys are
// one range of the primary key.
func (p *Processor) PruneStandalone(ctx context.Context, prefix string, olderThan time.Duration) (int64, error) {
	if prefix == "" {
		return 0, errors.New("prune standalone steps: no key prefix")
	}
	end := prefix[:len(prefix)-1] + string([]byte{prefix[len(prefix)-1] + 1})
	var n int64
	err := p.pool.QueryRow(ctx, `
WITH gone AS (
    DELETE FROM processed_events
    WHERE event_key >= $1 AND event_key < $2 AND kind = 'step' AND parent_key IS NULL
      AND status IN ('done', 'skipped', 'parked')
      AND coalesce(completed_at, next_attempt_at) < now() - $3 * interval '1 millisecond'
    RETURNING event_key
), attempts AS (
    DELETE FROM step_attempts WHERE step_key IN (SELECT event_key FROM gone)
)
SELECT count(*) FROM gone`, prefix, end, olderThan.Milliseconds()).Scan(&n)
	return n, dbError("prune standalone steps "+prefix, err)
}
