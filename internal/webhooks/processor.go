package webhooks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/reqlog"
)

// Outcomes of a delivery, as the processor reports them and the metrics
// count them.
const (
	OutcomeProcessed     = "processed"      // this delivery did the work; 200
	OutcomeDuplicate     = "duplicate"      // the work was already done; 200
	OutcomeIgnored       = "ignored"        // an event type this receiver does not handle; 200
	OutcomeParked        = "parked"         // kept for an operator; 200
	OutcomeLeaseConflict = "lease_conflict" // another worker holds a fresh lease; 503
	OutcomeStepFailed    = "step_failed"    // a step failed and gave its lease back; 502
	OutcomeError         = "error"          // the database failed; 503
)

// Result is what became of one delivery.
type Result struct {
	Outcome    string
	RetryAfter time.Duration // with OutcomeLeaseConflict
	Err        error         // the cause, with OutcomeStepFailed and OutcomeError
}

// Options tune the processor.
type Options struct {
	Lease       time.Duration // LEASE_DURATION
	MaxAttempts int           // attempts of a step before it is parked
	Backoff     time.Duration // first redrive delay after a failed attempt; doubles each attempt
}

// Processor runs an event: its claim and database writes in one transaction,
// then each of its steps under a lease.
type Processor struct {
	pool    *pgxpool.Pool
	runner  *StepRunner
	metrics *Metrics
	opts    Options

	// afterEventCommit, when set by a test, runs right after an event's
	// transaction commits and before its steps run: where a crash leaves
	// leased steps behind.
	afterEventCommit func(Event)
}

// NewProcessor returns a processor over pool.
func NewProcessor(pool *pgxpool.Pool, runner *StepRunner, metrics *Metrics, opts Options) *Processor {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 5 * time.Second
	}
	return &Processor{pool: pool, runner: runner, metrics: metrics, opts: opts}
}

// Process handles one verified event, from a delivery, a replay or the
// redriver. It is safe to call any number of times, concurrently, from any
// number of processes: the claims make the writes happen once and the steps
// run under one lease at a time.
func (p *Processor) Process(ctx context.Context, prov Provider, ev Event) Result {
	log := reqlog.From(ctx)
	leased, fresh, claims, err := p.applyEvent(ctx, prov, ev)
	switch {
	case errors.Is(err, ErrUnhandled):
		log.Info("event type not handled; acknowledged")
		return Result{Outcome: OutcomeIgnored}
	case errors.Is(err, ErrUnprocessable):
		log.Warn("event parked: its fields cannot be read", "error", err)
		return Result{Outcome: OutcomeParked}
	case err != nil:
		log.Error("event not processed", "error", err)
		return Result{Outcome: OutcomeError, Err: err}
	}
	if fresh {
		if p.afterEventCommit != nil {
			p.afterEventCommit(ev)
		}
		return p.runSteps(ctx, leased, OutcomeProcessed)
	}
	return p.resume(ctx, ev, claims)
}

// applyEvent runs the single-transaction pattern: the claim, the stored
// body, the provider's writes and the steps' leases commit together or not
// at all. fresh is false when the event had been claimed before; claims
// then says what became of it.
func (p *Processor) applyEvent(ctx context.Context, prov Provider, ev Event) (leased []leasedStep, fresh bool, claims eventClaims, err error) {
	tx, claimed, claims, err := beginClaim(ctx, p.pool, ev)
	if err != nil || !claimed {
		return nil, false, claims, err
	}
	defer func() {
		if r := recover(); r != nil {
			tx.rollback() // never leave a connection checked out inside the claim
			panic(r)
		}
	}()
	steps, applyErr := prov.Apply(ctx, tx.conn, ev)
	b := &pgx.Batch{}
	switch {
	case errors.Is(applyErr, ErrUnhandled):
		b.Queue(`UPDATE webhook_events SET outcome = $2 WHERE event_key = $1`, ev.Key, outcomeIgnored)
	case errors.Is(applyErr, ErrUnprocessable):
		tx.rollback()
		return nil, true, claims, p.park(ctx, ev, applyErr)
	case applyErr != nil:
		tx.rollback()
		return nil, false, claims, applyErr
	}
	for _, s := range steps {
		if why := p.runner.Unavailable(s); why != "" {
			reqlog.From(ctx).Warn("step skipped", "step", s.Name, "reason", why)
			p.metrics.stepOutcome(s.Name, "skipped")
			continue
		}
		ls, err := queueStepClaim(b, ev, s)
		if err != nil {
			tx.rollback()
			return nil, false, claims, err
		}
		leased = append(leased, ls)
	}
	if err := tx.commit(ctx, b); err != nil {
		return nil, false, claims, fmt.Errorf("event %s: %w", ev.Key, err)
	}
	if errors.Is(applyErr, ErrUnhandled) {
		return nil, true, claims, applyErr
	}
	return leased, true, claims, nil
}

// park keeps an event whose fields cannot be read, with its raw body and the
// error, acknowledged so the sender stops retrying and visible to operators.
func (p *Processor) park(ctx context.Context, ev Event, cause error) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		claimed, err := claimEvent(ctx, tx, ev, StatusParked, cause.Error())
		if err != nil || !claimed {
			return err
		}
		return storeEvent(ctx, tx, ev, outcomeParked, cause.Error())
	})
	if err != nil {
		return fmt.Errorf("park event %s: %w", ev.Key, err)
	}
	return cause
}

// resume handles an event claimed before, given its claims: it finishes
// whatever steps are not done yet, taking each lease only if it is free or
// has run out.
func (p *Processor) resume(ctx context.Context, ev Event, claims eventClaims) Result {
	if claims.Status == StatusParked {
		return Result{Outcome: OutcomeParked}
	}
	var leased []leasedStep
	var conflict time.Duration
	for _, ss := range claims.Steps {
		if ss.Status != StatusInProgress {
			continue
		}
		ls, ok, st, err := claimStep(ctx, p.pool, ev.Source, ev.Key, ss.Step, p.opts.Lease)
		if err != nil {
			// Leases already taken are not stranded: they run, and the
			// delivery still fails so that the sender retries the rest.
			p.runSteps(ctx, leased, OutcomeDuplicate)
			return Result{Outcome: OutcomeError, Err: err}
		}
		if ok {
			if ls.Attempts > 1 {
				p.metrics.LeaseReclaims.Inc()
			}
			leased = append(leased, ls)
			continue
		}
		if st.Status == StatusInProgress {
			conflict = max(conflict, p.retryAfter(st.ClaimedAt))
		}
	}
	res := p.runSteps(ctx, leased, OutcomeDuplicate)
	if res.Outcome == OutcomeDuplicate && len(leased) > 0 {
		res.Outcome = OutcomeProcessed
	}
	if conflict > 0 && (res.Outcome == OutcomeDuplicate || res.Outcome == OutcomeProcessed) {
		return Result{Outcome: OutcomeLeaseConflict, RetryAfter: conflict}
	}
	return res
}

// retryAfter is how long until a lease taken at claimedAt runs out, at
// least a second.
func (p *Processor) retryAfter(claimedAt time.Time) time.Duration {
	left := time.Until(claimedAt.Add(p.opts.Lease))
	return time.Duration(math.Ceil(max(left, time.Second).Seconds())) * time.Second
}

// runSteps runs leased steps side by side (each has its own lease, so the
// delivery waits for the slowest, not the sum) and reports ok when every one
// of them is done (or parked for an operator).
func (p *Processor) runSteps(ctx context.Context, leased []leasedStep, ok string) Result {
	errs := make([]error, len(leased))
	var wg sync.WaitGroup
	for i, ls := range leased {
		wg.Go(func() { errs[i] = p.runStep(ctx, ls) })
	}
	wg.Wait()
	parked := false
	for i, err := range errs {
		if errors.Is(err, errStepParked) {
			parked, errs[i] = true, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Result{Outcome: OutcomeStepFailed, Err: err}
	}
	if parked {
		return Result{Outcome: OutcomeParked}
	}
	return Result{Outcome: ok}
}

// errStepParked is runStep's answer for a step it parked: the delivery is
// acknowledged (retrying cannot help) and reported as parked.
var errStepParked = errors.New("step parked for an operator")

// runStep performs one step whose lease this worker holds, then records the
// result with a compare-and-set on the claim. No connection is held while
// the step runs. The step runs on a context detached from the request's, so
// a sender that hangs up does not cut a call half-way, and bounded by
// StepTimeout, well under the lease.
func (p *Processor) runStep(ctx context.Context, ls leasedStep) error {
	log := reqlog.From(ctx).With("step", ls.Step.Name, "step_key", ls.Key, "attempt", ls.Attempts)
	bg := context.WithoutCancel(ctx)
	sctx, cancel := context.WithTimeout(bg, StepTimeout(p.opts.Lease))
	start := time.Now()
	// A step this process cannot run (planned by one configured otherwise)
	// fails in Run like any other attempt: its lease is given back for a
	// process that can, or it is parked once the attempts are spent.
	stepErr := p.runner.Run(sctx, ls.Key, ls.Step)
	cancel()

	dbctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if stepErr == nil {
		err := completeStep(dbctx, p.pool, ls)
		switch {
		case errors.Is(err, errLeaseLost):
			// The step ran, but our lease had run out and another worker
			// took it: its holder completes it, and the Message-ID and
			// Idempotency-Key let the receivers drop the duplicate.
			log.Warn("step done, but its lease was taken meanwhile; leaving it to the new holder")
			p.metrics.stepOutcome(ls.Step.Name, "lease_lost")
			return nil
		case err != nil:
			log.Error("step done but not recorded; it will run again", "error", err)
			return err
		}
		log.Info("step done", "duration", time.Since(start))
		p.metrics.stepOutcome(ls.Step.Name, "done")
		return nil
	}

	perm := permanent(stepErr)
	status, err := releaseStep(dbctx, p.pool, ls, stepErr, p.backoff(ls.Attempts), p.opts.MaxAttempts, perm)
	switch {
	case errors.Is(err, errLeaseLost):
		log.Warn("step failed after its lease was taken", "error", stepErr)
		return fmt.Errorf("step %s: %w", ls.Key, stepErr)
	case err != nil:
		log.Error("step failed and its lease could not be given back", "error", stepErr, "release_error", err)
		return fmt.Errorf("step %s: %w", ls.Key, stepErr)
	case status == StatusParked:
		log.Error("step parked for an operator", "error", stepErr, "permanent", perm)
		p.metrics.stepOutcome(ls.Step.Name, "parked")
		return errStepParked
	}
	log.Warn("step failed; lease given back", "error", stepErr)
	p.metrics.stepOutcome(ls.Step.Name, "failed")
	return fmt.Errorf("step %s: %w", ls.Key, stepErr)
}

// backoff is the redriver's wait before the next attempt: Backoff doubled
// for each attempt made, at most an hour.
func (p *Processor) backoff(attempts int) time.Duration {
	d := p.opts.Backoff << min(max(attempts-1, 0), 20)
	return min(d, time.Hour)
}
