package polar

// Catching up on Polar (server reconcile polar): Polar's API lists the
// deliveries of a webhook endpoint (GET /v1/webhooks/deliveries, API), each
// with its webhook event: the webhook-id and the body every delivery of it
// sent. The deliveries of a window (--since, or from where the last run
// stopped) are read whole, each event once, and every event the claims
// table does not know is handed, oldest first, to the same processor a
// delivery uses, through the same claim (CatchUp.Run), keyed on the same
// webhook-id: a delivered event is known, a missed one is processed once,
// with its body as Polar sent it, marked Via "reconcile". An event fetched
// over TLS with the access token needs no signature. The listing covers
// delivered events too (succeeded or not, Polar's deliveries are listed
// alike), which is what a database fail-over that lost acknowledged events
// needs. Events Polar never tried to deliver (skipped while the endpoint
// was disabled) have no delivery to list: see api.go. Every run is bounded
// (reconcile.Bound, CatchUp.Limits).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// batchSize is how many events are checked against the claims at once.
const batchSize = 100

// windowOverlap is how far a resumed window starts before the last one
// ended.
const windowOverlap = time.Second

// maxConsecutiveFailures stops a run whose events keep failing (the
// database is down): the next run starts again from the same cursor.
const maxConsecutiveFailures = 5

// EventLister lists the webhook events of Polar's deliveries; *API is one.
type EventLister interface {
	Events(ctx context.Context, q Query) ([]ListedEvent, error)
}

// CatchUp reconciles the receiver with the deliveries of one Polar webhook
// endpoint.
type CatchUp struct {
	API      EventLister
	Endpoint string // the webhook endpoint's id (POLAR_WEBHOOK_ENDPOINT_ID)
	// Provider is the Polar provider a delivery goes through.
	Provider  webhooks.Provider
	Processor reconcile.Processor
	Claims    reconcile.Claims
	Store     *reconcile.Store
	Log       *slog.Logger     // nil: slog.Default()
	Now       func() time.Time // nil: time.Now
	// Limits bound every run (zero fields: reconcile's defaults).
	Limits reconcile.Limits
}

// CatchUpOptions are the options of one run, the flags of
// `server reconcile polar`.
type CatchUpOptions struct {
	// Since lists the deliveries made within this duration before now
	// (--since). With Resume, it is where to start when there is no
	// cursor. Zero without Resume: every delivery Polar keeps.
	Since time.Duration
	// Resume starts where the last run's window ended (--resume).
	Resume bool
	// DryRun reports what would be processed and writes nothing: no claim,
	// no cursor, no record of the run, no lock.
	DryRun bool
	// Settle leaves deliveries younger than this to the next run: they may
	// be under way. Zero: up to now.
	Settle time.Duration
	// Trigger is recorded with the run: TriggerCLI (default) or
	// TriggerPeriodic.
	Trigger string
	// OnEvent, when set, is called for every event listed, oldest first,
	// with what became of it.
	OnEvent func(EventReport)
}

// EventReport is one event of a run and what became of it.
type EventReport struct {
	ID          string // the webhook-id
	Type        string
	CreatedAt   time.Time
	Disposition reconcile.Disposition
	Err         error // with reconcile.DispUnreadable and reconcile.DispFailed
}

// CatchUpSummary is what a run found and did.
type CatchUpSummary struct {
	DryRun bool `json:"dry_run,omitempty"`
	// From and Until are the window of deliveries listed; a zero From:
	// every delivery Polar keeps.
	From  time.Time `json:"from,omitzero"`
	Until time.Time `json:"until"`

	reconcile.Counts
}

// String is the summary as the CLI prints it.
func (s CatchUpSummary) String() string {
	var b strings.Builder
	b.WriteString("polar")
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
			{s.Unreadable, "unreadable (archived)"},
			{s.Failed, "failed"},
		} {
			if c.n > 0 {
				fmt.Fprintf(&b, ", %d %s", c.n, c.what)
			}
		}
	}
	fmt.Fprintf(&b, "; deliveries until %s", s.Until.UTC().Format(time.RFC3339))
	return b.String()
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

// Run lists the events of the deliveries the options select, oldest
// first, and hands each one the receiver has no claim for to the
// processor, exactly as a delivery of it would be handled. A run that
// writes leaves a cursor at the end of its window, where --resume (and
// the periodic run) starts the next, unless an event failed: then the
// next run lists the same window again. It returns ErrBusy when another
// run holds the lock, ErrNoCursor for Resume with neither a cursor nor
// Since, an error wrapping ErrIncomplete when events were left
// unprocessed, and one wrapping reconcile.ErrStopped when a bound stopped
// the run; the summary says what was done either way.
func (s *CatchUp) Run(ctx context.Context, o CatchUpOptions) (CatchUpSummary, error) {
	sum := CatchUpSummary{DryRun: o.DryRun}
	if o.Since < 0 || o.Settle < 0 {
		return sum, errors.New("reconcile polar: negative duration")
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
	q := Query{Endpoint: s.Endpoint, Until: now.Add(-o.Settle)}
	if o.Since > 0 {
		q.Since = now.Add(-o.Since)
	}
	if o.Resume {
		c, ok, err := s.Store.Cursor(ctx, Source, "")
		switch {
		case err != nil:
			return sum, reconcile.Cause(ctx, err)
		case ok:
			// Polar's filters are strict at both ends (created after the
			// start, before the end): the windows overlap by a second, so
			// that a delivery made at the very end of the last is listed;
			// what the last run saw is known.
			q.Since = c.Created.Add(-windowOverlap)
		case o.Since == 0:
			return sum, reconcile.ErrNoCursor
		}
	}
	sum.From, sum.Until = q.Since, q.Until

	var runID int64
	if !o.DryRun {
		id, err := s.Store.StartRun(ctx, Source, o.Trigger)
		if err != nil {
			return sum, reconcile.Cause(ctx, err)
		}
		runID = id
	}
	err := reconcile.Cause(ctx, s.reconcile(ctx, q, o, &sum))
	if errors.Is(err, reconcile.ErrStopped) {
		err = fmt.Errorf("reconcile polar: %w", err)
	}
	if err == nil && sum.Failed > 0 {
		err = fmt.Errorf("reconcile polar: %d events not processed: %w", sum.Failed, reconcile.ErrIncomplete)
	}
	if !o.DryRun {
		// The cursor and the record outlive a cancelled or stopped run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err == nil {
			if e := s.Store.SaveCursor(ctx, Source, "", reconcile.Cursor{Created: q.Until}, runID); e != nil {
				err = e
			}
		}
		if e := s.Store.FinishRun(ctx, runID, sum.Tally(), sum, err); e != nil {
			s.log().Error("reconcile polar: record run", "error", e)
		}
	}
	return sum, err
}

// reconcile lists the window's events and handles them in batches: the
// claims of a batch are read at once, then each event is handled in order.
func (s *CatchUp) reconcile(ctx context.Context, q Query, o CatchUpOptions, sum *CatchUpSummary) error {
	listed, err := s.API.Events(ctx, q)
	if err != nil {
		return fmt.Errorf("reconcile polar: %w", err)
	}
	failures := 0
	for start := 0; start < len(listed); start += batchSize {
		batch := listed[start:min(start+batchSize, len(listed))]
		evs := make([]webhooks.Event, len(batch))
		errs := make([]error, len(batch))
		keys := make([]string, 0, len(batch))
		for i, le := range batch {
			if le.Payload == nil {
				errs[i] = errors.New("archived by Polar: its payload is no longer available")
				continue
			}
			evs[i], errs[i] = Decode(le.ID, le.Payload)
			if errs[i] == nil {
				keys = append(keys, evs[i].Key)
			}
		}
		known, err := s.Claims.Known(ctx, keys)
		if err != nil {
			return fmt.Errorf("reconcile polar: %w", err)
		}
		for i, le := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			rep := EventReport{ID: le.ID, Type: le.Type, CreatedAt: le.CreatedAt}
			if errs[i] != nil {
				rep.Disposition, rep.Err = reconcile.DispUnreadable, errs[i]
			} else {
				rep.Type = evs[i].Type
				rep.Disposition, rep.Err = reconcile.Handle(ctx, s.Processor, s.Provider, evs[i], known[evs[i].Key], o.DryRun)
			}
			sum.Count(rep.Disposition)
			switch rep.Disposition {
			case reconcile.DispFailed:
				failures++
				s.log().Error("reconcile polar: event not processed", "webhook_id", le.ID, "event_type", rep.Type, "error", rep.Err)
			case reconcile.DispUnreadable:
				failures = 0
				s.log().Warn("reconcile polar: event unreadable; skipped", "webhook_id", le.ID, "event_type", le.Type, "error", rep.Err)
			default:
				failures = 0
			}
			if o.OnEvent != nil {
				o.OnEvent(rep)
			}
			if failures >= maxConsecutiveFailures {
				return fmt.Errorf("reconcile polar: %d events in a row not processed, last: %w", failures, rep.Err)
			}
		}
	}
	return nil
}
