package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// ReplayPreview says what a replay of an event would do, before it runs:
// what it opens for an operator, what it runs again, what it leaves.
type ReplayPreview struct {
	Event Detail `json:"event"`
	// NoProvider is set when this process has no provider for the event's
	// source: the replay would fail.
	NoProvider bool `json:"no_provider,omitempty"`
	// Reclaim: the event's own claim is parked (its fields could not be
	// read); the replay takes it back in the transaction of its writes, and
	// a replay that fails again leaves it parked.
	Reclaim bool `json:"reclaim,omitempty"`
	// Unresolve: an operator resolved the event; the replay parks its
	// resolved claims again first (Reclaim and Reopen list them), so that
	// a replay that fails leaves it parked, no longer resolved.
	Unresolve bool `json:"unresolve,omitempty"`
	// Reopen are parked or skipped steps given back with their attempts
	// reset, then run.
	Reopen []Claim `json:"reopen,omitempty"`
	// Run are steps not done yet, run now unless another worker holds a
	// fresh lease on one of them.
	Run []Claim `json:"run,omitempty"`
	// Stay are parked or skipped steps this process cannot run, with why:
	// they stay as they are.
	Stay []Blocked `json:"stay,omitempty"`
	// Done are done steps: a replay never runs them again, and the event's
	// database writes, done already, change nothing when applied again.
	Done []Claim `json:"done,omitempty"`
}

// Blocked is a step that cannot run in this process, and why.
type Blocked struct {
	Claim
	Why string `json:"why"`
}

// Nothing reports that the replay would change nothing: no claim to open
// and no step to run.
func (p ReplayPreview) Nothing() bool { return !p.Reclaim && len(p.Reopen) == 0 && len(p.Run) == 0 }

// Runnable says why this process cannot run a step of a kind with a
// payload ("" when it can): *webhooks.Processor's Runnable.
type Runnable func(kind string, payload json.RawMessage) string

// PreviewReplay reads the event stored under key and says what Replay
// would do with it, changing nothing: the same decisions
// webhooks.Processor.Replay makes.
func PreviewReplay(ctx context.Context, q webhooks.Querier, runnable Runnable, providers map[string]webhooks.Provider,
	key string) (ReplayPreview, error) {
	d, err := Show(ctx, q, key)
	if err != nil {
		return ReplayPreview{}, err
	}
	p := ReplayPreview{Event: d}
	_, ok := providers[d.Source]
	p.NoProvider = !ok
	for _, c := range d.Claims {
		status := webhooks.ClaimStatus(c.Status)
		if status == webhooks.ClaimResolved {
			// Parked again before the replay (reopenResolved).
			p.Unresolve = true
			if c.Kind == "step" || d.Outcome == string(webhooks.OutcomeParked) {
				status, c.Status = webhooks.ClaimParked, string(webhooks.ClaimParked)
			} else {
				status, c.Status = webhooks.ClaimDone, string(webhooks.ClaimDone)
			}
		}
		switch {
		case c.Kind == "event":
			p.Reclaim = status == webhooks.ClaimParked
		case status == webhooks.ClaimDone:
			p.Done = append(p.Done, c)
		case status == webhooks.ClaimInProgress:
			p.Run = append(p.Run, c)
		default: // parked or skipped
			if why := runnable(c.StepKind, c.Payload); why != "" {
				p.Stay = append(p.Stay, Blocked{Claim: c, Why: why})
			} else {
				p.Reopen = append(p.Reopen, c)
			}
		}
	}
	return p, nil
}

// ReplayResult is what became of one replay.
type ReplayResult struct {
	Key     string           `json:"key"`
	Outcome webhooks.Outcome `json:"outcome,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// OK reports whether the replay finished its work: anything else leaves
// the event for a retry, the redriver or an operator.
func (r ReplayResult) OK() bool {
	return r.Error == "" && r.Outcome.Acknowledged()
}

// ReplayMany replays each key in turn (Replay), until ctx ends or the
// deadline passes (zero: none), and returns what became of each one it
// replayed. progress, if not nil, is called after each.
func ReplayMany(ctx context.Context, q webhooks.Querier, proc Replayer, providers map[string]webhooks.Provider,
	keys []string, actor string, log *slog.Logger, deadline time.Time, progress func(done int)) []ReplayResult {
	var out []ReplayResult
	for i, key := range keys {
		if ctx.Err() != nil || (!deadline.IsZero() && time.Now().After(deadline)) {
			break
		}
		res, err := Replay(ctx, q, proc, providers, key, actor, log)
		r := ReplayResult{Key: key, Outcome: res.Outcome}
		switch {
		case err != nil:
			r.Error = err.Error()
		case res.Err != nil:
			r.Error = res.Err.Error()
		}
		out = append(out, r)
		if progress != nil {
			progress(i + 1)
		}
	}
	return out
}

// StepRunner runs one step now: *webhooks.Processor's RedriveStep.
type StepRunner interface {
	RedriveStep(ctx context.Context, key string) (bool, error)
}

// RunStep runs the step with key now, through the same lease as the
// redriver (webhooks.Processor.RedriveStep: its back-off is ignored, a
// fresh lease of another worker is not), and logs who asked and what
// became of it. It reports whether the step ran.
func RunStep(ctx context.Context, proc StepRunner, key, actor string, log *slog.Logger) (bool, error) {
	ran, err := proc.RedriveStep(ctx, key)
	if err != nil {
		log.ErrorContext(ctx, "operator step run failed", "actor", actor, "step_key", key, "ran", ran, "error", err)
		return ran, fmt.Errorf("run step %s: %w", key, err)
	}
	log.InfoContext(ctx, "operator step run", "actor", actor, "step_key", key, "ran", ran)
	return ran, nil
}
