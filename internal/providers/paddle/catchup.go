package paddle

// Catching up on Paddle (server reconcile paddle): the List Events API
// (GET /events, API) is listed oldest first, from a --since window or from
// the cursor of the last run, and every event the claims table does not
// know is handed to the same processor a delivery uses, through the same
// claim (CatchUp.Run), as Stripe's catch-up does. A listed event is the
// notification a delivery carries, less its notification_id: Decode reads
// it into the same webhooks.Event, keyed on its event_id, so a delivered
// event is known and a missed one is processed once; its stored body is
// its JSON object byte for byte as the API returned it, and it is marked
// Via "reconcile". An event fetched over TLS with the API key needs no
// signature. Paddle keeps events 90 days. The listing covers delivered
// events too (Paddle's API cannot tell them apart), which is what a
// database fail-over that lost acknowledged events needs. Every run is
// bounded (reconcile.Bound, CatchUp.Limits).

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

// EventLister lists Paddle events in creation order; *API is one.
type EventLister interface {
	Events(ctx context.Context, q Query) iter.Seq2[ListedEvent, error]
}

// CatchUp reconciles the receiver with Paddle's List Events API.
type CatchUp struct {
	API EventLister
	// Provider is the Paddle provider a delivery goes through.
	Provider webhooks.Provider
	// Decode turns an event's raw JSON into a webhooks.Event: paddle.Decode.
	Decode    func(raw []byte) (webhooks.Event, error)
	Processor reconcile.Processor
	Claims    reconcile.Claims
	Store     *reconcile.Store
	Log       *slog.Logger     // nil: slog.Default()
	Now       func() time.Time // nil: time.Now
	// Limits bound every run (zero fields: reconcile's defaults).
	Limits reconcile.Limits
}

// CatchUpOptions are the options of one run, the flags of
// `server reconcile paddle`.
type CatchUpOptions struct {
	// Since lists events that occurred within this duration before now
	// (--since). With Resume, it is where to start when there is no
	// cursor. Zero without Resume: every event Paddle keeps (90 days).
	Since time.Duration
	// Resume continues after the cursor of the last run with the same
	// Types (--resume).
	Resume bool
	// Types lists only these event types (--types).
	Types []string
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
	// order, with what became of it.
	OnEvent func(EventReport)
	// Progress, when set, is called with the summary so far after every
	// batch of events (every 100).
	Progress func(CatchUpSummary)
}

// EventReport is one event of a run and what became of it.
type EventReport struct {
	ID          string
	Type        string
	OccurredAt  time.Time
	Disposition reconcile.Disposition
	Err         error // with reconcile.DispUnreadable and reconcile.DispFailed
}

// CatchUpSummary is what a run found and did.
type CatchUpSummary struct {
	DryRun bool   `json:"dry_run,omitempty"`
	Scope  string `json:"scope,omitempty"` // the filters, as the cursor is kept under
	// From is where the listing started: the cursor resumed from, or the
	// start of the --since window (zero ID).
	From reconcile.Cursor `json:"from"`
	// Until is the end of the window (settle); zero: the newest event.
	Until time.Time `json:"until,omitzero"`

	reconcile.Counts

	// Cursor is the last event reconciled (its occurred_at as Created):
	// every event up to it was looked at and is claimed. It stops before
	// the first failed event.
	Cursor reconcile.Cursor `json:"cursor"`
	// Through is when the last event listed occurred.
	Through time.Time `json:"through,omitzero"`
}

// String is the summary as the CLI prints it.
func (s CatchUpSummary) String() string {
	var b strings.Builder
	b.WriteString("paddle")
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

// Scope names the filters of a run, under which its cursor is kept: "" for
// every event, else "types=a,b".
func Scope(types []string) string {
	if len(types) == 0 {
		return ""
	}
	ts := slices.Clone(types)
	slices.Sort(ts)
	return "types=" + strings.Join(slices.Compact(ts), ",")
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
// ErrNoCursor for Resume with neither a cursor nor Since, an error wrapping
// ErrIncomplete when events were left unprocessed, and one wrapping
// reconcile.ErrStopped when a bound stopped the run; the summary says what
// was done either way.
func (s *CatchUp) Run(ctx context.Context, o CatchUpOptions) (CatchUpSummary, error) {
	sum := CatchUpSummary{DryRun: o.DryRun, Scope: Scope(o.Types)}
	if o.Since < 0 || o.Settle < 0 {
		return sum, errors.New("reconcile paddle: negative duration")
	}
	if o.Trigger == "" {
		o.Trigger = reconcile.TriggerCLI
	}
	ctx, unbound := reconcile.Bound(ctx, s.Limits)
	defer unbound()
	if !o.DryRun {
		release, err := s.Store.Lock(ctx, Source)
		if err != nil {
			return sum, err
		}
		defer release()
	}

	now := s.now()
	q := Query{Types: o.Types}
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
			return sum, reconcile.Cause(ctx, err)
		case ok && c.ID != "":
			q.After, q.Since, sum.From, sum.Cursor = c.ID, time.Time{}, c, c
		case ok:
			// A window's start pinned by a run that found nothing.
			q.Since, sum.From = c.Created, c
		case o.Since == 0:
			return sum, reconcile.ErrNoCursor
		}
	}

	var runID int64
	if !o.DryRun {
		id, err := s.Store.StartRun(ctx, Source, o.Trigger)
		if err != nil {
			return sum, reconcile.Cause(ctx, err)
		}
		runID = id
	}
	saved := sum.Cursor
	err := reconcile.Cause(ctx, s.reconcile(ctx, q, o, runID, &sum, &saved))
	if errors.Is(err, reconcile.ErrStopped) {
		err = fmt.Errorf("reconcile paddle: %w", err)
	}
	if err == nil && sum.Failed > 0 {
		err = fmt.Errorf("reconcile paddle: %d events not processed: %w", sum.Failed, reconcile.ErrIncomplete)
	}
	if !o.DryRun {
		// The cursor and the record outlive a cancelled or stopped run.
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
			s.log().Error("reconcile paddle: record run", "error", e)
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
		for i, le := range batch {
			evs[i], errs[i] = s.Decode(le.Raw)
			if errs[i] == nil {
				keys = append(keys, evs[i].Key)
			}
		}
		known, err := s.Claims.Known(ctx, keys)
		if err != nil {
			return fmt.Errorf("reconcile paddle: %w", err)
		}
		for i, le := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			rep := EventReport{ID: le.ID, Type: le.Type, OccurredAt: le.OccurredAt}
			if errs[i] != nil {
				rep.Disposition, rep.Err = reconcile.DispUnreadable, errs[i]
			} else {
				rep.Disposition, rep.Err = reconcile.Handle(ctx, s.Processor, s.Provider, evs[i], known[evs[i].Key], o.DryRun)
			}
			sum.Count(rep.Disposition)
			if !le.OccurredAt.IsZero() {
				sum.Through = le.OccurredAt
			}
			switch rep.Disposition {
			case reconcile.DispFailed:
				settled = false
				failures++
				s.log().Error("reconcile paddle: event not processed", "event_id", le.ID, "event_type", le.Type, "error", rep.Err)
			case reconcile.DispUnreadable:
				failures = 0
				s.log().Warn("reconcile paddle: event unreadable; skipped", "event_id", le.ID, "event_type", le.Type, "error", rep.Err)
			default:
				failures = 0
			}
			if settled {
				sum.Cursor = reconcile.Cursor{ID: le.ID, Created: le.OccurredAt}
			}
			if o.OnEvent != nil {
				o.OnEvent(rep)
			}
			if failures >= maxConsecutiveFailures {
				return fmt.Errorf("reconcile paddle: %d events in a row not processed, last: %w", failures, rep.Err)
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
			return fmt.Errorf("reconcile paddle: %w", err)
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
