package stripe

// Catching up on Stripe (server reconcile stripe): the Events API
// (GET /v1/events) is listed oldest first from a --since window or from the
// cursor of the last run (API, with stripe-go v76's event iterator), and
// every event the claims table does not know is handed to the same
// processor a delivery uses, through the same claim (CatchUp.Run). An event
// fetched over TLS with the API key is authentic without a signature; its
// stored body is its JSON object byte for byte as the API returned it, and
// it is marked Via "reconcile". The last event reconciled is kept
// (reconcile_cursors) so that --resume continues where a run stopped.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// batchSize is how many events are checked against the claims at once, and
// how often the cursor is saved and progress reported.
const batchSize = 100

// maxConsecutiveFailures stops a run whose events keep failing (the
// database is down): the next run starts again from the cursor.
const maxConsecutiveFailures = 5

// EventLister lists Stripe events in creation order; *API is one.
type EventLister interface {
	Events(ctx context.Context, q Query) iter.Seq2[ListedEvent, error]
}

// Stripe reconciles the receiver with Stripe's Events API.
type CatchUp struct {
	API EventLister
	// Provider is the Stripe provider a delivery goes through.
	Provider webhooks.Provider
	// Decode turns an event's raw JSON into a webhooks.Event:
	// stripe.Decode.
	Decode    func(raw []byte) (webhooks.Event, error)
	Processor reconcile.Processor
	Claims    reconcile.Claims
	Store     *reconcile.Store
	Log       *slog.Logger     // nil: slog.Default()
	Now       func() time.Time // nil: time.Now
}

// CatchUpOptions are the options of one run, the flags of
// `server reconcile stripe`.
type CatchUpOptions struct {
	// Since lists events created within this duration before now
	// (--since). With Resume, it is where to start when there is no cursor.
	// Zero without Resume: as far back as Stripe keeps events (30 days).
	Since time.Duration
	// Resume continues after the cursor of the last run with the same
	// Types and FailedOnly (--resume).
	Resume bool
	// Types lists only these event types (--types), at most 20.
	Types []string
	// FailedOnly lists only events not yet delivered successfully to every
	// endpoint (--failed-only): cheaper, and enough when the receiver is
	// Stripe's only endpoint.
	FailedOnly bool
	// DryRun reports what would be processed and writes nothing: no claim,
	// no cursor, no record of the run, no lock.
	DryRun bool
	// Settle leaves events younger than this to the next run: their
	// delivery may be under way. Zero: up to the newest event.
	Settle time.Duration
	// Trigger is recorded with the run: TriggerCLI (default) or
	// TriggerPeriodic.
	Trigger string
	// OnEvent, when set, is called for every event listed, in creation
	// order, with what became of it: the lines of a dry run.
	OnEvent func(EventReport)
	// Progress, when set, is called with the summary so far after every
	// batch of events (every 100).
	Progress func(CatchUpSummary)
}

// Disposition is what a run did with one event.
type Disposition string

const (
	DispKnown        Disposition = "known"         // claimed before this run: delivered, or reconciled earlier
	DispWouldProcess Disposition = "would_process" // dry run: unknown, it would be processed
	DispProcessed    Disposition = "processed"     // processed by this run, as a delivery would have been
	DispIgnored      Disposition = "ignored"       // claimed by this run; a type the receiver does not handle
	DispParked       Disposition = "parked"        // claimed by this run and parked for an operator
	DispStepFailed   Disposition = "step_failed"   // claimed and written by this run; a step failed and is retried by the redriver
	DispRaced        Disposition = "raced"         // claimed meanwhile by a delivery (duplicate or lease conflict)
	DispUnreadable   Disposition = "unreadable"    // not an event the Stripe provider can read; skipped
	DispFailed       Disposition = "failed"        // not processed (the database failed); the next run retries it
)

// EventReport is one event of a run and what became of it.
type EventReport struct {
	ID          string
	Type        string
	Created     time.Time
	Disposition Disposition
	Err         error // with DispUnreadable and DispFailed
}

// CatchUpSummary is what a run found and did.
type CatchUpSummary struct {
	DryRun bool   `json:"dry_run,omitempty"`
	Scope  string `json:"scope,omitempty"` // the filters, as the cursor is kept under
	// From is where the listing started: the cursor resumed from, or the
	// start of the --since window (zero ID).
	From reconcile.Cursor `json:"from"`
	// Until is the end of the window (--settle); zero: the newest event.
	Until time.Time `json:"until,omitzero"`

	Found        int `json:"found"`
	Known        int `json:"known"`
	WouldProcess int `json:"would_process,omitempty"`
	Processed    int `json:"processed"`
	Ignored      int `json:"ignored"`
	Parked       int `json:"parked"`
	StepFailed   int `json:"step_failed"`
	Raced        int `json:"raced"`
	Unreadable   int `json:"unreadable"`
	Failed       int `json:"failed"`

	// Cursor is the last event reconciled: every event up to it was
	// looked at and is claimed. It stops before the first failed event.
	Cursor reconcile.Cursor `json:"cursor"`
	// Through is the creation time of the last event listed.
	Through time.Time `json:"through,omitzero"`
}

// Missed is how many events this run found that had never been delivered
// and that the receiver handles (ignored types are not counted: an
// endpoint need not subscribe to them).
func (s CatchUpSummary) Missed() int { return s.Processed + s.Parked + s.StepFailed }

// Tally is the summary's figures for the record of runs and the metrics.
func (s CatchUpSummary) Tally() reconcile.Tally {
	return reconcile.Tally{Found: s.Found, Missed: s.Missed(), Unresolved: s.Parked + s.Unreadable + s.Failed}
}

// String is the summary as the CLI prints it.
func (s CatchUpSummary) String() string {
	var b strings.Builder
	b.WriteString("stripe")
	if s.DryRun {
		b.WriteString(" (dry run)")
	}
	fmt.Fprintf(&b, ": %d found, %d already known", s.Found, s.Known)
	if s.DryRun {
		fmt.Fprintf(&b, ", %d would be processed", s.WouldProcess)
	} else {
		fmt.Fprintf(&b, ", %d processed, %d parked", s.Processed, s.Parked)
		for _, c := range []struct {
			n    int
			what string
		}{
			{s.Ignored, "ignored (type not handled)"},
			{s.StepFailed, "with a step to retry"},
			{s.Raced, "delivered meanwhile"},
			{s.Unreadable, "unreadable"},
			{s.Failed, "failed"},
		} {
			if c.n > 0 {
				fmt.Fprintf(&b, ", %d %s", c.n, c.what)
			}
		}
	}
	if s.Cursor.ID != "" {
		fmt.Fprintf(&b, "; cursor %s (%s)", s.Cursor.ID, s.Cursor.Created.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// Scope names the filters of a run, under which its cursor is kept: ""
// for every event, else "types=a,b" and/or "failed_only".
func Scope(types []string, failedOnly bool) string {
	var parts []string
	if len(types) > 0 {
		ts := slices.Clone(types)
		slices.Sort(ts)
		parts = append(parts, "types="+strings.Join(slices.Compact(ts), ","))
	}
	if failedOnly {
		parts = append(parts, "failed_only")
	}
	return strings.Join(parts, ";")
}

func (s *CatchUp) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func (s *CatchUp) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Run lists the events the options select, oldest first, and hands each one
// the receiver has no claim for to the processor, exactly as a delivery of
// it would be handled. It returns ErrBusy when another run holds the lock,
// ErrNoCursor for Resume with neither a cursor nor Since, and an error
// wrapping ErrIncomplete when events were left unprocessed; the summary
// says what was done either way.
func (s *CatchUp) Run(ctx context.Context, o CatchUpOptions) (CatchUpSummary, error) {
	sum := CatchUpSummary{DryRun: o.DryRun, Scope: Scope(o.Types, o.FailedOnly)}
	switch {
	case len(o.Types) > MaxListTypes:
		return sum, fmt.Errorf("reconcile stripe: %d types, at most %d", len(o.Types), MaxListTypes)
	case o.Since < 0 || o.Settle < 0:
		return sum, errors.New("reconcile stripe: negative duration")
	}
	if o.Trigger == "" {
		o.Trigger = reconcile.TriggerCLI
	}
	if !o.DryRun {
		release, err := s.Store.Lock(ctx, Source)
		if err != nil {
			return sum, err
		}
		defer release()
	}

	now := s.now()
	q := Query{Types: o.Types, FailedOnly: o.FailedOnly}
	if o.Settle > 0 {
		q.Until = now.Add(-o.Settle)
		sum.Until = q.Until
	}
	if o.Since > 0 {
		q.Since = now.Add(-o.Since)
		sum.From = reconcile.Cursor{Created: q.Since}
	}
	if o.Resume {
		c, ok, err := s.Store.Cursor(ctx, Source, sum.Scope)
		switch {
		case err != nil:
			return sum, err
		case ok:
			q.After, q.Since, sum.From, sum.Cursor = c, time.Time{}, c, c
		case o.Since == 0:
			return sum, reconcile.ErrNoCursor
		}
	}

	var runID int64
	if !o.DryRun {
		id, err := s.Store.StartRun(ctx, Source, o.Trigger)
		if err != nil {
			return sum, err
		}
		runID = id
	}
	saved := sum.Cursor
	err := s.reconcile(ctx, q, o, runID, &sum, &saved)
	if err == nil && sum.Failed > 0 {
		err = fmt.Errorf("reconcile stripe: %d events not processed: %w", sum.Failed, reconcile.ErrIncomplete)
	}
	if !o.DryRun {
		// The cursor and the record outlive a cancelled run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		next := sum.Cursor
		if next.IsZero() && err == nil && !q.Since.IsZero() {
			// Nothing found: pin the start of the window, so that the next
			// --resume (the periodic run's) starts there rather than
			// nowhere.
			next = reconcile.Cursor{Created: q.Since}
		}
		if !next.Equal(saved) {
			if e := s.Store.SaveCursor(ctx, Source, sum.Scope, next, runID); e != nil {
				err = errors.Join(err, e)
			}
		}
		if e := s.Store.FinishRun(ctx, runID, sum.Tally(), sum, err); e != nil {
			s.log().Error("reconcile stripe: record run", "error", e)
		}
	}
	return sum, err
}

// reconcile walks the listing in batches: the claims of a batch are read
// at once, then each event is handled in order and the cursor saved (saved
// is the cursor as last stored). A process killed mid-batch leaves the
// cursor at the previous batch: the events after it that it processed are
// claimed, and the next run finds them known.
func (s *CatchUp) reconcile(ctx context.Context, q Query, o CatchUpOptions, runID int64, sum *CatchUpSummary, saved *reconcile.Cursor) error {
	settled := true // every event so far is claimed: the cursor may advance
	failures := 0
	batch := make([]ListedEvent, 0, batchSize)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		evs := make([]webhooks.Event, len(batch))
		errs := make([]error, len(batch))
		keys := make([]string, 0, len(batch))
		for i, se := range batch {
			evs[i], errs[i] = s.Decode(se.Raw)
			if errs[i] == nil {
				keys = append(keys, evs[i].Key)
			}
		}
		known, err := s.Claims.Known(ctx, keys)
		if err != nil {
			return fmt.Errorf("reconcile stripe: %w", err)
		}
		for i, se := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			rep := EventReport{ID: se.ID, Type: se.Type, Created: se.Created}
			if errs[i] != nil {
				rep.Disposition, rep.Err = DispUnreadable, errs[i]
			} else {
				rep.Disposition, rep.Err = s.handle(ctx, evs[i], known[evs[i].Key], o.DryRun)
			}
			sum.count(rep.Disposition)
			sum.Through = se.Created
			switch rep.Disposition {
			case DispFailed:
				settled = false
				failures++
				s.log().Error("reconcile stripe: event not processed", "event_id", se.ID, "event_type", se.Type, "error", rep.Err)
			case DispUnreadable:
				failures = 0
				s.log().Warn("reconcile stripe: event unreadable; skipped", "event_id", se.ID, "event_type", se.Type, "error", rep.Err)
			default:
				failures = 0
			}
			if settled {
				sum.Cursor = reconcile.Cursor{ID: se.ID, Created: se.Created}
			}
			if o.OnEvent != nil {
				o.OnEvent(rep)
			}
			if failures >= maxConsecutiveFailures {
				return fmt.Errorf("reconcile stripe: %d events in a row not processed, last: %w", failures, rep.Err)
			}
		}
		if !o.DryRun && !sum.Cursor.Equal(*saved) {
			if err := s.Store.SaveCursor(ctx, Source, sum.Scope, sum.Cursor, runID); err != nil {
				return err
			}
			*saved = sum.Cursor
		}
		if o.Progress != nil {
			o.Progress(*sum)
		}
		return nil
	}
	for ev, err := range s.API.Events(ctx, q) {
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("reconcile stripe: %w", err)
		}
		batch = append(batch, ev)
		if len(batch) == batchSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// handle decides what to do with one event the provider can read.
func (s *CatchUp) handle(ctx context.Context, ev webhooks.Event, known, dryRun bool) (Disposition, error) {
	switch {
	case known:
		return DispKnown, nil
	case dryRun:
		return DispWouldProcess, nil
	}
	res := s.Processor.Process(ctx, s.Provider, reconcile.Reconciled(ev))
	switch res.Outcome {
	case webhooks.OutcomeProcessed:
		return DispProcessed, nil
	case webhooks.OutcomeIgnored:
		return DispIgnored, nil
	case webhooks.OutcomeParked:
		return DispParked, nil
	case webhooks.OutcomeStepFailed:
		return DispStepFailed, res.Err
	case webhooks.OutcomeDuplicate, webhooks.OutcomeLeaseConflict:
		return DispRaced, nil
	}
	err := res.Err
	if err == nil {
		err = fmt.Errorf("outcome %s", res.Outcome)
	}
	return DispFailed, err
}

func (s *CatchUpSummary) count(d Disposition) {
	s.Found++
	switch d {
	case DispKnown:
		s.Known++
	case DispWouldProcess:
		s.WouldProcess++
	case DispProcessed:
		s.Processed++
	case DispIgnored:
		s.Ignored++
	case DispParked:
		s.Parked++
	case DispStepFailed:
		s.StepFailed++
	case DispRaced:
		s.Raced++
	case DispUnreadable:
		s.Unreadable++
	case DispFailed:
		s.Failed++
	}
}
