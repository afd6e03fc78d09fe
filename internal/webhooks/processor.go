package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paywebhooks/receiver/internal/telemetry"
)

// Result is what became of one delivery.
type Result struct {
	Outcome    Outcome
	RetryAfter time.Duration // with OutcomeLeaseConflict
	Err        error         // the cause, with OutcomeStepFailed and OutcomeError
}

// Options tune the processor. Zero fields take the value in Defaults.
type Options struct {
	Lease              time.Duration // LEASE_DURATION
	StepTimeout        time.Duration // STEP_TIMEOUT: bound of every call that leaves the database
	MaxAttempts        int           // MAX_STEP_ATTEMPTS: attempts of a step before it is parked
	Backoff            time.Duration // REDRIVE_INTERVAL: first redrive delay after a failed attempt; doubles each attempt
	RedriveParallelism int           // REDRIVE_PARALLELISM: steps the redriver runs at once
}

// Defaults are the one set of defaults: the configuration's, the
// processor's and docs/configuration.md's.
var Defaults = Options{
	Lease:              5 * time.Minute,
	MaxAttempts:        10,
	Backoff:            10 * time.Second,
	RedriveParallelism: 8,
}

func (o Options) withDefaults() Options {
	if o.Lease <= 0 {
		o.Lease = Defaults.Lease
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = StepTimeout(o.Lease)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = Defaults.MaxAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = Defaults.Backoff
	}
	if o.RedriveParallelism <= 0 {
		o.RedriveParallelism = Defaults.RedriveParallelism
	}
	return o
}

// Processor runs an event: its claim, stored body and database writes in
// one transaction sent in one round trip, then each of its steps under a
// lease.
type Processor struct {
	pool    *pgxpool.Pool
	kinds   StepKinds
	metrics *Metrics
	log     *slog.Logger
	opts    Options

	// afterEventCommit, when set by a test, runs right after an event's
	// transaction commits and before its steps run: where a crash leaves
	// leased steps behind.
	afterEventCommit func(Event)
	// afterReopen, when set by a test, runs when a replay has given back
	// an event's parked or skipped steps and before it takes them.
	afterReopen func(Event)
}

// NewProcessor returns a processor over pool that runs steps of the given
// kinds.
func NewProcessor(pool *pgxpool.Pool, kinds StepKinds, metrics *Metrics, log *slog.Logger, opts Options) *Processor {
	p := &Processor{pool: pool, kinds: kinds, metrics: metrics, log: log, opts: opts.withDefaults()}
	cloned := false
	for name, k := range kinds {
		if b, ok := k.(Binder); ok {
			if !cloned {
				p.kinds, cloned = maps.Clone(kinds), true // the caller's map stays as it was
			}
			p.kinds[name] = b.Bind(p)
		}
	}
	return p
}

// Binder is an optional method of a StepKind whose steps use the database
// or plan further steps as they run (internal/entitlements' call that
// tells the app, which reads the subject's newest version): NewProcessor
// gives it the processor that runs its steps, and runs the kind Bind
// returns.
type Binder interface {
	Bind(p *Processor) StepKind
}

// Pool is the pool the processor runs events and steps on.
func (p *Processor) Pool() *pgxpool.Pool { return p.pool }

// Kinds returns the step kinds the processor runs.
func (p *Processor) Kinds() StepKinds { return p.kinds }

// Options returns the processor's options, defaults applied.
func (p *Processor) Options() Options { return p.opts }

// Process handles one verified event, from a delivery, a replay, a
// reconciliation or the redriver. It is safe to call any number of times,
// concurrently, from any number of processes: the claims make the writes
// happen once and the steps run under one lease at a time.
func (p *Processor) Process(ctx context.Context, prov Provider, ev Event) Result {
	return p.process(ctx, prov, ev, claimSQL, claimArgs)
}

func (p *Processor) process(ctx context.Context, prov Provider, ev Event, claim string,
	args func(Event, ClaimStatus, Outcome, string) []any) (res Result) {
	via := ev.Via
	if via == "" {
		via = ViaDelivery
	}
	ctx, span := telemetry.Start(ctx, "webhook.process", trace.SpanKindInternal,
		telemetry.AttrSource.String(ev.Source), telemetry.AttrEventID.String(ev.ID), telemetry.AttrEventKey.String(ev.Key),
		telemetry.AttrEventType.String(ev.Type), telemetry.AttrVia.String(string(via)))
	defer func() { endProcess(span, res); span.End() }()
	if ev.Fetch != nil {
		// The delivery only names its event: a copy is answered from its
		// claims, and only an event never claimed is fetched, before its
		// transaction, so that a failed fetch writes nothing.
		var done bool
		if ev, res, done = p.fetch(ctx, ev); done {
			return res
		}
	}
	if ev.Resent {
		// Likely a copy: read what became of the event before sending
		// its claim, body and writes. Found, it is resumed from that one
		// read; not found (the sender's first attempts never reached us),
		// it is claimed as a new event below.
		switch claims, err := p.lookup(ctx, ev.Key); {
		case err != nil:
			p.log.ErrorContext(ctx, "event not looked up", "error", err)
			return Result{Outcome: OutcomeError, Err: err}
		case claims.Status != "":
			return p.resume(ctx, ev, claims)
		}
	}
	var plan Plan
	status, outcome, lastError := ClaimDone, OutcomeProcessed, ""
	// A body that repeats a member name is kept (its claim carries it)
	// and parked, never planned: what it says depends on which of the two
	// a decoder keeps.
	err := RepeatedName(ev.Body)
	if err == nil {
		err = prov.Plan(&ev, &plan)
	}
	switch {
	case errors.Is(err, ErrUnhandled):
		// An error that says more than ErrUnhandled (an event the provider
		// is configured to leave alone) is kept on the claim, for operators.
		outcome, plan = OutcomeIgnored, Plan{}
		if msg := err.Error(); msg != ErrUnhandled.Error() {
			lastError = msg
		}
	case errors.Is(err, ErrUnprocessable), errors.Is(err, ErrRepeatedName):
		status, outcome, lastError, plan = ClaimParked, OutcomeParked, err.Error(), Plan{}
	case err != nil:
		p.log.ErrorContext(ctx, "event not planned", "error", err)
		return Result{Outcome: OutcomeError, Err: err}
	}

	leased, claimed, claims, err := p.commit(ctx, ev, &plan, claim, args(ev, status, outcome, lastError))
	switch {
	case err != nil:
		p.log.ErrorContext(ctx, "event not processed", "error", err)
		return Result{Outcome: OutcomeError, Err: err}
	case !claimed:
		return p.resume(ctx, ev, claims)
	case outcome == OutcomeIgnored && lastError != "":
		p.log.InfoContext(ctx, "event ignored; acknowledged", "reason", lastError)
		return Result{Outcome: OutcomeIgnored}
	case outcome == OutcomeIgnored:
		p.log.DebugContext(ctx, "event type not handled; acknowledged")
		return Result{Outcome: OutcomeIgnored}
	case outcome == OutcomeParked:
		p.log.WarnContext(ctx, "event parked for an operator", "error", lastError)
		return Result{Outcome: OutcomeParked}
	}
	if p.afterEventCommit != nil {
		p.afterEventCommit(ev)
	}
	return p.runSteps(ctx, leased, OutcomeProcessed)
}

// fetch makes whole an event whose delivery only names it (Event.Fetch),
// unless its claims say it was claimed before: then done, and res is what
// resuming it gave.
func (p *Processor) fetch(ctx context.Context, named Event) (ev Event, res Result, done bool) {
	switch claims, err := p.lookup(ctx, named.Key); {
	case err != nil:
		p.log.ErrorContext(ctx, "event not looked up", "error", err)
		return named, Result{Outcome: OutcomeError, Err: err}, true
	case claims.Status != "":
		return named, p.resume(ctx, named, claims), true
	}
	fctx, span := telemetry.Start(ctx, "webhook.fetch", trace.SpanKindClient)
	ev, err := named.Fetch(fctx)
	if err == nil && (ev.Key != named.Key || ev.Source != named.Source || ev.Fetch != nil) {
		err = fmt.Errorf("the fetch of %s returned event %s of %s, not the event whole", named.Key, ev.Key, ev.Source)
	}
	if err != nil {
		telemetry.Failed(span, telemetry.ErrorClass(err))
		span.End()
		p.log.WarnContext(ctx, "event not fetched; nothing written, the sender retries", "error", err)
		return named, Result{Outcome: OutcomeFetchFailed, Err: err}, true
	}
	span.End()
	// Looked up already: a copy that raced this one is known by its claim.
	ev.Via, ev.Resent = named.Via, false
	return ev, Result{}, false
}

// commit sends the event's transaction in one round trip: the claim (with
// the event's body), the provider's writes and the steps' leases. The
// batch is one implicit transaction, committed when all of it succeeds and
// rolled back otherwise. When the event was claimed before, claimed is
// false and claims says what became of it, read in a second round trip
// (a copy pays for it, so that no new event sends a statement it never
// needs); its writes and steps, conditional on a claim this transaction
// did not make, did nothing. (No statement is made to fail on purpose: an error in a
// batch makes pgx forget its prepared statements.)
func (p *Processor) commit(ctx context.Context, ev Event, plan *Plan, claim string, claimArgs []any) (leased []leasedStep, claimed bool, claims eventClaims, err error) {
	ctx, span := telemetry.Start(ctx, "webhook.transaction", trace.SpanKindInternal)
	defer func() { endTransaction(span, plan, claimed, len(leased), err); span.End() }()
	var skipped []leasedStep
	if n := plan.stepCount(); n > MaxSteps {
		return nil, false, claims, fmt.Errorf("event %s plans %d steps, more than the %d an event may have", ev.Key, n, MaxSteps)
	}
	b := &pgx.Batch{}
	b.Queue(claim, claimArgs...)
	tp := traceparent(ctx)
	for _, it := range plan.items {
		if it.step == nil {
			b.Queue(it.sql, it.args...)
			continue
		}
		s := it.step
		kind, ok := p.kinds[s.Kind]
		if !ok {
			return nil, false, claims, fmt.Errorf("event %s plans step %s of kind %q, which no StepKind runs", ev.Key, s.Name, s.Kind)
		}
		payload, err := kind.Prepare(s.Payload)
		if err == nil && s.Object != "" {
			payload, err = withObject(payload, s.Object)
		}
		if err != nil {
			return nil, false, claims, fmt.Errorf("prepare step %s of %s: %w", s.Name, ev.Key, err)
		}
		status, why := ClaimInProgress, kind.Unconfigured()
		if why != "" {
			status = ClaimSkipped
		}
		// The payload goes as JSON text: a []byte is bytea to pgx, sent
		// as "\x…" in the exec mode a user may name behind a pooler.
		args := append(slices.Clip(it.args), StepKey(ev.Key, s.Name), ev.Source, ev.Key, s.Name, s.Kind,
			string(payload), tp, string(status), why)
		b.Queue(stepInsertSQL(it.sql, len(it.args)), args...)
	}

	br := p.pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && claimed {
			err = dbError("commit event "+ev.Key, cerr)
		}
	}()
	// The claim's mark: NULL from receiver_claim, or no row from a replay's
	// reclaim, when this transaction did not make the claim.
	var marker *string
	switch err = br.QueryRow().Scan(&marker); {
	case err == nil:
		claimed = marker != nil
	case errors.Is(err, pgx.ErrNoRows):
		err = nil
	default:
		return nil, false, claims, dbError("claim event "+ev.Key, err)
	}
	if !claimed {
		// A copy: every write and step of its transaction was conditional
		// on a claim it did not make, and did nothing. What became of its
		// event is read after, committed.
		_ = br.Close() // its transaction, which wrote nothing
		if claims, err = p.readClaims(ctx, ev.Key); err != nil {
			return nil, false, eventClaims{}, err
		}
		return nil, false, claims, nil
	}
	for _, it := range plan.items {
		if it.step == nil {
			if _, err := br.Exec(); err != nil {
				return nil, false, claims, dbError("event "+ev.Key+": write", err)
			}
			continue
		}
		ls := leasedStep{Key: StepKey(ev.Key, it.step.Name), EventKey: ev.Key, Source: ev.Source, Name: it.step.Name,
			Kind: it.step.Kind, Token: 1, Attempts: 1, Traceparent: tp}
		switch err := br.QueryRow().Scan(&ls.Payload); {
		case errors.Is(err, pgx.ErrNoRows): // its condition did not hold: not planned
		case err != nil:
			return nil, false, claims, dbError("event "+ev.Key+": plan step "+it.step.Name, err)
		case p.kinds[ls.Kind].Unconfigured() != "":
			skipped = append(skipped, ls)
		default:
			leased = append(leased, ls)
		}
	}
	for _, ls := range skipped {
		p.log.WarnContext(ctx, "step skipped", "step", ls.Name, "reason", p.kinds[ls.Kind].Unconfigured())
		p.metrics.stepOutcome(ls.Name, AttemptSkipped)
	}
	return leased, true, claims, nil
}

// lookup reads an event's claims, its own and its steps', as committed:
// one range scan of the primary key, in one round trip. Status is "" when
// the event has no claim.
func (p *Processor) lookup(ctx context.Context, key string) (claims eventClaims, err error) {
	ctx, span := telemetry.Start(ctx, "webhook.lookup", trace.SpanKindInternal)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(telemetry.AttrFound.Bool(claims.Status != ""))
			if err != nil {
				telemetry.Failed(span, telemetry.ErrorClass(err))
			}
		}
		span.End()
	}()
	return p.readClaims(ctx, key)
}

// readClaims reads an event's claims with readClaimsSQL.
func (p *Processor) readClaims(ctx context.Context, key string) (eventClaims, error) {
	rows, err := p.pool.Query(ctx, readClaimsSQL, key)
	if err != nil {
		return eventClaims{}, dbError("read claims of "+key, err)
	}
	claims, err := scanEventClaims(rows, key)
	return claims, dbError("read claims of "+key, err)
}

// holder reads the claims of the stored event whose body hash is hash,
// and its key: the event a copy under another delivery id copies. Status
// is "" when there is none.
func (p *Processor) holder(ctx context.Context, hash []byte) (string, eventClaims, error) {
	if hash == nil {
		return "", eventClaims{}, nil
	}
	var key string
	err := p.pool.QueryRow(ctx, holderSQL, hash).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", eventClaims{}, nil
	}
	if err != nil {
		return "", eventClaims{}, dbError("find the event of a body hash", err)
	}
	claims, err := p.readClaims(ctx, key)
	return key, claims, err
}

// resume handles an event claimed before, given its claims: it finishes
// whatever steps are not done yet, taking each lease only if it is free or
// has run out.
func (p *Processor) resume(ctx context.Context, ev Event, claims eventClaims) Result {
	switch {
	case claims.Status == ClaimParked:
		return Result{Outcome: OutcomeParked}
	case claims.Status == "":
		// Not this key, but its body hash was claimed: the same signed
		// body under another delivery id, a copy of the event that holds
		// the hash, answered as that event's copies are.
		p.metrics.copies.Inc()
		key, held, err := p.holder(ctx, ev.BodyHash)
		switch {
		case err != nil:
			p.log.ErrorContext(ctx, "the event a signed body copies not read", "error", err)
			return Result{Outcome: OutcomeError, Err: err}
		case held.Status == "":
			// Pruned meanwhile, or no hash: nothing is left to finish.
			p.log.WarnContext(ctx, "a signed body already received under another delivery id; acknowledged as a copy")
			return Result{Outcome: OutcomeDuplicate}
		}
		p.log.WarnContext(ctx, "a signed body already received under another delivery id; answered as a copy of it", "copy_of", key)
		return p.resume(ctx, ev, held)
	}
	var open []storedStep
	for _, ss := range claims.Steps {
		if ss.Status == ClaimInProgress {
			open = append(open, ss)
		}
	}
	if len(open) == 0 {
		return Result{Outcome: OutcomeDuplicate}
	}
	b := &pgx.Batch{}
	for _, ss := range open {
		queueTake(b, ss.Key, p.opts.Lease)
	}
	br := p.pool.SendBatch(ctx, b)
	var leased []leasedStep
	var conflict time.Duration
	var err error
	for _, ss := range open {
		ls, ok, st, terr := scanTake(br.QueryRow(), ss.Key)
		switch {
		case terr != nil:
			err = terr
		case ok:
			if ls.Attempts > 1 {
				p.metrics.LeaseReclaims.Inc()
			}
			leased = append(leased, ls)
		case st.Status == ClaimInProgress:
			conflict = max(conflict, p.retryAfter(st.ClaimedAt))
		}
		if err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The takes were one transaction, rolled back: no lease is held.
		p.log.ErrorContext(ctx, "steps not taken", "error", err)
		return Result{Outcome: OutcomeError, Err: err}
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
// of them is done, skipped or parked for an operator.
func (p *Processor) runSteps(ctx context.Context, leased []leasedStep, ok Outcome) Result {
	if len(leased) == 1 {
		return p.stepsResult([]error{p.runStep(ctx, leased[0])}, ok)
	}
	errs := make([]error, len(leased))
	var wg sync.WaitGroup
	for i, ls := range leased {
		wg.Go(func() { errs[i] = p.runStep(ctx, ls) })
	}
	wg.Wait()
	return p.stepsResult(errs, ok)
}

func (p *Processor) stepsResult(errs []error, ok Outcome) Result {
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
// a sender that hangs up does not cut a call half-way, and bounded by the
// step timeout, well under the lease.
func (p *Processor) runStep(ctx context.Context, ls leasedStep) error {
	ctx, span := p.stepSpan(ctx, ls)
	defer span.End()
	bg := context.WithoutCancel(ctx)
	record := func(f func(context.Context) error) error {
		dbctx, cancel := context.WithTimeout(bg, RecordTimeout(p.opts.Lease))
		defer cancel()
		return f(dbctx)
	}
	log := p.log.With("step", ls.Name, "step_key", ls.Key, "attempt", ls.Attempts)

	kind, known := p.kinds[ls.Kind]
	var stepErr error
	start := time.Now()
	at := attempt{start: start, runner: runnerOf(ctx)}
	switch {
	case !known:
		// Planned by a process that knows a kind this one does not: given
		// back for one that does, or parked once the attempts are spent.
		stepErr = fmt.Errorf("step %s is of kind %q, which this process cannot run", ls.Key, ls.Kind)
	case kind.Unconfigured() != "":
		// Planned by a process configured otherwise (a replica during a
		// rolling deploy): given back likewise.
		stepErr = fmt.Errorf("step %s cannot run in this process: %s", ls.Key, kind.Unconfigured())
	default:
		if why := RedactAddresses(kind.Unavailable(ls.Payload)); why != "" {
			err := record(func(c context.Context) error { return skipStep(c, p.pool, ls, why, at) })
			if err != nil && !errors.Is(err, errLeaseLost) {
				log.ErrorContext(ctx, "step cannot run, and its skip was not recorded", "reason", why, "error", err)
				telemetry.Failed(span, telemetry.ErrorClass(err))
				return err
			}
			log.WarnContext(ctx, "step skipped", "reason", why)
			p.stepOutcome(span, ls.Name, AttemptSkipped, nil)
			return nil
		}
		sctx, cancel := context.WithTimeout(bg, p.opts.StepTimeout)
		// Whatever the kind answered may quote a customer's address (an
		// SMTP reply, an API's error body): redacted before it is logged
		// or stored.
		sctx, answer := withAnswer(sctx)
		stepErr = redactError(kind.Run(sctx, RefKey(ls.Key, ls.Name, ls.Payload), ls.Payload))
		at.status = int(answer.Load())
		cancel()
	}

	if stepErr == nil {
		err := record(func(c context.Context) error { return completeStep(c, p.pool, ls, at) })
		switch {
		case errors.Is(err, errLeaseLost):
			// The step ran, but our lease had run out and another worker
			// took it: its holder completes it, and the Message-ID and
			// Idempotency-Key let the receivers drop the duplicate.
			log.WarnContext(ctx, "step done, but its lease was taken meanwhile; leaving it to the new holder")
			p.stepOutcome(span, ls.Name, AttemptLeaseLost, nil)
			return nil
		case err != nil:
			log.ErrorContext(ctx, "step done but not recorded; it will run again", "error", err)
			telemetry.Failed(span, telemetry.ErrorClass(err))
			return err
		}
		log.InfoContext(ctx, "step done", "duration", time.Since(start))
		p.stepOutcome(span, ls.Name, AttemptDone, nil)
		return nil
	}

	perm := permanent(stepErr)
	var status ClaimStatus
	err := record(func(c context.Context) (err error) {
		status, err = releaseStep(c, p.pool, ls, stepErr, p.backoff(ls.Attempts), p.opts.MaxAttempts, perm, at)
		return err
	})
	switch {
	case errors.Is(err, errLeaseLost):
		log.WarnContext(ctx, "step failed after its lease was taken", "error", stepErr)
		telemetry.Failed(span, telemetry.ErrorClass(stepErr))
		return fmt.Errorf("step %s: %w", ls.Key, stepErr)
	case err != nil:
		log.ErrorContext(ctx, "step failed and its lease could not be given back", "error", stepErr, "release_error", err)
		telemetry.Failed(span, telemetry.ErrorClass(stepErr))
		return fmt.Errorf("step %s: %w", ls.Key, stepErr)
	case status == ClaimParked:
		log.ErrorContext(ctx, "step parked for an operator", "error", stepErr, "permanent", perm)
		p.stepOutcome(span, ls.Name, AttemptParked, stepErr)
		return errStepParked
	}
	log.WarnContext(ctx, "step failed; lease given back", "error", stepErr)
	p.stepOutcome(span, ls.Name, AttemptFailed, stepErr)
	return fmt.Errorf("step %s: %w", ls.Key, stepErr)
}

// stepOutcome counts what became of an attempt of a step and records it on
// the attempt's span, with the class of its error (never the error's text,
// which may quote an address).
func (p *Processor) stepOutcome(span trace.Span, step string, o AttemptOutcome, cause error) {
	p.metrics.stepOutcome(step, o)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrStepOutcome.String(string(o)))
		if cause != nil {
			telemetry.Failed(span, telemetry.ErrorClass(cause))
		}
	}
}

// stepSpan starts the span of one attempt of a step, "webhook.step <name>",
// linked to the transaction that planned the step when that was another
// trace (a redelivery, the redriver, an operator, a replay finishing it).
// Without a span in ctx (the redriver's), it is the root of a trace of its
// own.
func (p *Processor) stepSpan(ctx context.Context, ls leasedStep) (context.Context, trace.Span) {
	if !telemetry.Active(ctx) {
		return ctx, noop.Span{}
	}
	attrs := []attribute.KeyValue{telemetry.AttrSource.String(ls.Source), telemetry.AttrEventKey.String(ls.EventKey),
		telemetry.AttrStep.String(ls.Name), telemetry.AttrStepKind.String(ls.Kind), telemetry.AttrStepKey.String(ls.Key),
		telemetry.AttrAttempt.Int(ls.Attempts)}
	if r := runnerOf(ctx); r != "" {
		attrs = append(attrs, telemetry.AttrRunner.String(r))
	}
	return telemetry.StartLinked(ctx, "webhook.step "+ls.Name, []string{ls.Traceparent}, attrs...)
}

// runnerKey is the context key of who runs a step when it is not the
// delivery that planned it: "redriver", "operator", "replay".
type runnerKey struct{}

func withRunner(ctx context.Context, runner string) context.Context {
	return context.WithValue(ctx, runnerKey{}, runner)
}

// endProcess records the outcome of an event on its span; a failed step or
// an unavailable database marks it failed.
func endProcess(span trace.Span, res Result) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.AttrOutcome.String(string(res.Outcome)))
	if res.Outcome == OutcomeStepFailed || res.Outcome == OutcomeError {
		telemetry.Failed(span, string(res.Outcome))
	}
}

// endTransaction records on the transaction's span what it queued and did.
func endTransaction(span trace.Span, plan *Plan, claimed bool, leased int, err error) {
	if !span.IsRecording() {
		return
	}
	steps := len(plan.Steps())
	span.SetAttributes(telemetry.AttrClaimed.Bool(claimed), telemetry.AttrWrites.Int(plan.Len()-steps),
		telemetry.AttrStepsQueued.Int(steps), telemetry.AttrStepsLeased.Int(leased))
	if err != nil {
		telemetry.Failed(span, telemetry.ErrorClass(err))
	}
}

// backoff is the redriver's wait before the next attempt: Backoff doubled
// for each attempt made, at most an hour.
func (p *Processor) backoff(attempts int) time.Duration {
	d := p.opts.Backoff << min(max(attempts-1, 0), 20)
	return min(d, time.Hour)
}

// DeliveryTimeout bounds the processing of one delivery once verified: the
// event's transaction and its steps, which run side by side, each within
// the step timeout, then recorded.
func (p *Processor) DeliveryTimeout() time.Duration {
	return p.opts.StepTimeout + RecordTimeout(p.opts.Lease) + 20*time.Second
}

// traceparent is the W3C trace context of ctx, stored with the steps an
// event plans so that whoever finishes them later links back to it; empty
// when tracing is off.
var traceparent = telemetry.Traceparent
