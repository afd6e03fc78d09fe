package reconcile

// Reconciling from a provider's listing of events (Stripe's Events API,
// Paddle's List Events API, the deliveries of a Polar endpoint): the loop
// every such provider shares. A provider brings only its Lister (one
// request of its API after another, each event with its raw JSON) and how
// a listed event decodes (Events.Decode, the same Decode its deliveries
// go through); Events does the rest:
//
//   - the window: --since, --resume from the cursor of the last run with
//     the same filters (its Scope), the settle time the periodic job
//     leaves to deliveries under way;
//   - the batches: the claims of a batch are read at once (Claims.Known),
//     then each unknown event is handed to the processor a delivery uses
//     (Handle), oldest first, and what became of it counted (Counts);
//   - the cursor: after every batch, the last event up to which every
//     event is claimed (a failed event holds it back, so the next run
//     retries it); a run that found nothing pins the start of its window.
//     A listing that cannot resume after an event (Polar's, by time
//     window only) keeps the end of the window instead, once the run has
//     left nothing behind (Windowed);
//   - the record: the advisory lock per source, the run in
//     reconcile_runs, the bounds of Bound;
//   - the further listings of one source (Stripe's connected accounts),
//     each with a cursor of its own.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// batchSize is how many events are checked against the claims at once, and
// how often the cursor is saved and progress reported.
const batchSize = 100

// maxConsecutiveFailures stops a run whose events keep failing (the
// database is down): the next run starts again from the cursor.
const maxConsecutiveFailures = 5

// progressEvery is how many events a run's printed progress is apart.
const progressEvery = 1000

// Listed is one event of a provider's listing, as its API returned it.
type Listed struct {
	ID   string // the provider's id of the event: where a cursor stops
	Type string // as the listing says
	// At is when the event happened (Stripe's created, Paddle's
	// occurred_at, when Polar made the webhook event); zero when the
	// listing does not say.
	At time.Time
	// Raw is the event as a delivery carries it, byte for byte as the API
	// returned it; nil when the provider no longer has it (Unreadable).
	Raw []byte
	// Unreadable, when set, is why the event cannot be read at all (Polar
	// archived its payload): counted unreadable and skipped.
	Unreadable error
}

// Window is what one listing covers.
type Window struct {
	// Since lists the events at or after it; zero: every event the
	// provider keeps.
	Since time.Time
	// Until lists the events at or before it; zero: up to the newest.
	Until time.Time
	// After lists the events after this cursor in the listing's order; an
	// After with no ID means Since = After.Created. A listing whose
	// provider no longer knows the cursor's event starts at its time.
	After Cursor
	// Types are the event types to list; none: every type.
	Types []string
	// FailedOnly lists only the events the provider has not delivered
	// successfully (a listing that cannot tell lists them all).
	FailedOnly bool
	// Account names a further listing (Events.Accounts): Stripe's
	// connected account; "" for the provider's own.
	Account string
}

// Lister lists a provider's events, oldest first, each with its raw JSON;
// a failure is yielded once, last.
type Lister interface {
	List(ctx context.Context, w Window) iter.Seq2[Listed, error]
}

// ListerFunc is a function that is a Lister.
type ListerFunc func(ctx context.Context, w Window) iter.Seq2[Listed, error]

// List implements Lister.
func (f ListerFunc) List(ctx context.Context, w Window) iter.Seq2[Listed, error] { return f(ctx, w) }

// Events reconciles the receiver with a provider's listing of events: it
// hands every listed event the claims table does not know to the same
// processor a delivery uses, through the same claim.
type Events struct {
	// Source is the provider's Spec.Source: the lock, the cursors and the
	// record of runs are kept under it.
	Source string
	Lister Lister
	// Decode turns a listed event into the webhooks.Event a delivery of it
	// carries (the provider's Decode), keyed as a delivery's.
	Decode func(Listed) (webhooks.Event, error)
	// Provider is the provider a delivery goes through.
	Provider  webhooks.Provider
	Processor Processor
	Claims    Claims
	Store     *Store
	Log       *slog.Logger     // nil: slog.Default()
	Now       func() time.Time // nil: time.Now
	// Limits bound every run (zero fields: the defaults).
	Limits Limits
	// MaxTypes is the most types one listing filters on (Stripe's 20); 0:
	// no limit.
	MaxTypes int
	// Accounts are further listings of the source, listed after its own,
	// each with a cursor of its own (Stripe's connected accounts).
	Accounts []string
	// Note says what every run cannot cover (STRIPE_CONNECT_ACCOUNTS=*).
	Note string
	// Windowed: the listing resumes by time only (Polar's deliveries): a
	// run lists a closed window, holds no cursor within it, and leaves the
	// window's end as the next run's start (less Overlap), once nothing
	// failed.
	Windowed bool
	// Overlap is how far a resumed Windowed run starts before the last
	// one ended (a listing whose window is open at both ends).
	Overlap time.Duration
	// PeriodicTypes are the types the periodic job lists; none: every
	// type. Give it the types the provider acts on, so that what a run
	// counts as missed is what the endpoint should have received.
	PeriodicTypes []string
}

// EventReport is one event of a run and what became of it.
type EventReport struct {
	Account     string // the further listing it came from; "": the source's own
	ID          string
	Type        string
	At          time.Time
	Disposition Disposition
	Err         error // with DispUnreadable and DispFailed
}

// EventSummary is what a run of Events found and did.
type EventSummary struct {
	Source string `json:"-"`
	DryRun bool   `json:"dry_run,omitempty"`
	Scope  string `json:"scope,omitempty"` // the filters, as the cursor is kept under
	// From is where the listing started: the cursor resumed from, or the
	// start of the window (zero ID).
	From Cursor `json:"from"`
	// Until is the end of the window (the settle time); zero: the newest
	// event.
	Until time.Time `json:"until,omitzero"`

	Counts

	// Cursor is the last event reconciled: every event up to it was
	// looked at and is claimed. It stops before the first failed event.
	// A Windowed run keeps none.
	Cursor Cursor `json:"cursor"`
	// Through is when the last event listed happened.
	Through time.Time `json:"through,omitzero"`

	// Accounts are the further listings (Events.Accounts), each with its
	// own scope, window and cursor; the counts above are the totals of
	// every listing. From, Cursor and Through above are the source's own.
	Accounts []AccountSummary `json:"accounts,omitempty"`
	// Note says what the run could not cover.
	Note string `json:"note,omitempty"`
}

// AccountSummary is what a run found and did in one further listing.
type AccountSummary struct {
	Account string `json:"account"`
	EventSummary
	// Error is why the listing failed, if it did; the run went on with
	// the next.
	Error string `json:"error,omitempty"`
}

// String is the summary as the CLI prints it.
func (s EventSummary) String() string {
	var b strings.Builder
	b.WriteString(s.Source)
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
	switch {
	case s.Cursor.ID != "":
		fmt.Fprintf(&b, "; cursor %s (%s)", s.Cursor.ID, s.Cursor.Created.UTC().Format(time.RFC3339))
	case !s.Until.IsZero():
		fmt.Fprintf(&b, "; listed until %s", s.Until.UTC().Format(time.RFC3339))
	}
	for _, a := range s.Accounts {
		fmt.Fprintf(&b, "; %s: %d found, %d already known", a.Account, a.Found, a.Known)
		if s.DryRun {
			fmt.Fprintf(&b, ", %d would be processed", a.WouldProcess)
		} else {
			fmt.Fprintf(&b, ", %d processed", a.Processed)
		}
		if a.Error != "" {
			fmt.Fprintf(&b, ", failed: %s", a.Error)
		}
	}
	if s.Note != "" {
		fmt.Fprintf(&b, "; %s", s.Note)
	}
	return b.String()
}

// add counts a further listing into the run's totals.
func (s *EventSummary) add(a AccountSummary) {
	s.Found += a.Found
	s.Known += a.Known
	s.WouldProcess += a.WouldProcess
	s.Processed += a.Processed
	s.Ignored += a.Ignored
	s.Parked += a.Parked
	s.StepFailed += a.StepFailed
	s.Raced += a.Raced
	s.Unreadable += a.Unreadable
	s.Failed += a.Failed
	s.Accounts = append(s.Accounts, a)
}

// Scope names the filters of a run, under which its cursor is kept: ""
// for every event, else "types=a,b" and/or "failed_only", and
// "account=acct_…" for a further listing.
func Scope(types []string, failedOnly bool, account string) string {
	var parts []string
	if len(types) > 0 {
		ts := slices.Clone(types)
		slices.Sort(ts)
		parts = append(parts, "types="+strings.Join(slices.Compact(ts), ","))
	}
	if failedOnly {
		parts = append(parts, "failed_only")
	}
	if account != "" {
		parts = append(parts, "account="+account)
	}
	return strings.Join(parts, ";")
}

func (e *Events) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

func (e *Events) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Run lists the events o selects, oldest first, and hands each one the
// receiver has no claim for to the processor, exactly as a delivery of it
// would be handled: the source's own listing, then each further one
// (Accounts). It returns ErrBusy when another run holds the lock,
// ErrNoCursor for Resume with neither a cursor nor Since, an error
// wrapping ErrIncomplete when events were left unprocessed, and one
// wrapping ErrStopped when a bound stopped the run; the summary says what
// was done either way.
func (e *Events) Run(ctx context.Context, o Options) (EventSummary, error) {
	name := "reconcile " + e.Source
	sum := e.summary(o, "")
	switch {
	case e.MaxTypes > 0 && len(o.Types) > e.MaxTypes:
		return sum, fmt.Errorf("%s: %s, at most %d", name, webhooks.Plural(len(o.Types), "type", "types"), e.MaxTypes)
	case o.Since < 0 || o.Settle < 0:
		return sum, fmt.Errorf("%s: negative duration", name)
	}
	ctx, run, err := Begin(ctx, e.Store, e.Source, o, e.Limits, e.Log)
	if err != nil {
		return sum, err
	}
	defer run.End()

	// Where each listing starts: the source's own, then each further one.
	now := e.now()
	base := Window{Types: o.Types, FailedOnly: o.FailedOnly}
	if o.Settle > 0 || e.Windowed {
		base.Until = now.Add(-o.Settle)
		sum.Until = base.Until
	}
	if o.Since > 0 {
		base.Since = now.Add(-o.Since)
		sum.From = Cursor{Created: base.Since}
	}
	listings := []*listing{{w: base, sum: &sum}}
	for _, acct := range e.Accounts {
		w := base
		w.Account = acct
		a := &AccountSummary{Account: acct, EventSummary: e.summary(o, acct)}
		a.From, a.Until = sum.From, sum.Until
		listings = append(listings, &listing{w: w, sum: &a.EventSummary, account: a})
	}
	sum.Note = e.Note
	if o.Resume {
		for _, l := range listings {
			c, ok, err := e.Store.Cursor(ctx, e.Source, l.sum.Scope)
			switch {
			case err != nil:
				return sum, Cause(ctx, err)
			case ok && e.Windowed:
				l.w.Since = c.Created.Add(-e.Overlap)
				l.sum.From = Cursor{Created: l.w.Since}
			case ok:
				l.w.After, l.w.Since, l.sum.From, l.sum.Cursor = c, time.Time{}, c, c
			case o.Since == 0:
				return sum, ErrNoCursor
			}
		}
	}

	if err := run.Start(ctx); err != nil {
		return sum, err
	}
	runID := run.ID()
	var errs []error
	for _, l := range listings {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		saved := l.sum.Cursor
		err := e.list(ctx, l.w, o, runID, l.sum, &saved)
		if !o.DryRun {
			// The cursor outlives a cancelled or stopped run.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			next := l.sum.Cursor
			switch {
			case e.Windowed && err == nil && l.sum.Failed == 0:
				next = Cursor{Created: l.w.Until}
			case e.Windowed:
				next = saved // the same window again
			case next.IsZero() && err == nil && !l.w.Since.IsZero():
				// Nothing found: pin the start of the window, so that the
				// next --resume (the periodic run's) starts there rather
				// than nowhere.
				next = Cursor{Created: l.w.Since}
			}
			if !next.Equal(saved) {
				if serr := e.Store.SaveCursor(sctx, e.Source, l.sum.Scope, next, runID); serr != nil {
					err = errors.Join(err, serr)
				}
			}
			cancel()
		}
		if l.account != nil {
			if err != nil {
				l.account.Error = Cause(ctx, err).Error()
				err = fmt.Errorf("account %s: %w", l.account.Account, err)
			}
			sum.add(*l.account)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return sum, run.Finish(ctx, sum, sum.Tally(), sum.Failed, "event", "events", errors.Join(errs...))
}

// summary is an empty summary of a run with o, of the listing account.
func (e *Events) summary(o Options, account string) EventSummary {
	return EventSummary{Source: e.Source, DryRun: o.DryRun, Scope: Scope(o.Types, o.FailedOnly, account)}
}

// listing is one listing of a run, with the summary it counts into.
type listing struct {
	w       Window
	sum     *EventSummary
	account *AccountSummary // nil: the source's own
}

// list walks one listing in batches: the claims of a batch are read at
// once, then each event is handled in order and the cursor saved (saved
// is the cursor as last stored). A process killed mid-batch leaves the
// cursor at the previous batch: the events after it that it processed are
// claimed, and the next run finds them known.
func (e *Events) list(ctx context.Context, w Window, o Options, runID int64, sum *EventSummary, saved *Cursor) error {
	name := "reconcile " + e.Source
	settled := true // every event so far is claimed: the cursor may advance
	failures := 0
	batch := make([]Listed, 0, batchSize)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		evs := make([]webhooks.Event, len(batch))
		errs := make([]error, len(batch))
		keys := make([]string, 0, len(batch))
		for i, le := range batch {
			if errs[i] = le.Unreadable; errs[i] == nil {
				evs[i], errs[i] = e.Decode(le)
			}
			if errs[i] == nil {
				keys = append(keys, evs[i].Key)
			}
		}
		known, err := e.Claims.Known(ctx, keys)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for i, le := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			rep := EventReport{Account: w.Account, ID: le.ID, Type: le.Type, At: le.At}
			if errs[i] != nil {
				rep.Disposition, rep.Err = DispUnreadable, errs[i]
			} else {
				rep.Type = evs[i].Type
				rep.Disposition, rep.Err = Handle(ctx, e.Processor, e.Provider, evs[i], known[evs[i].Key], o.DryRun)
			}
			sum.Count(rep.Disposition)
			if !le.At.IsZero() {
				sum.Through = le.At
			}
			switch rep.Disposition {
			case DispFailed:
				settled = false
				failures++
				e.log().Error(name+": event not processed", "event_id", le.ID, "event_type", rep.Type, "error", rep.Err)
			case DispUnreadable:
				failures = 0
				e.log().Warn(name+": event unreadable; skipped", "event_id", le.ID, "event_type", le.Type, "error", rep.Err)
			default:
				failures = 0
			}
			if settled && !e.Windowed {
				sum.Cursor = Cursor{ID: le.ID, Created: le.At}
			}
			if o.OnEvent != nil {
				o.OnEvent(rep)
			}
			o.print(rep)
			if failures >= maxConsecutiveFailures {
				return fmt.Errorf("%s: %s in a row not processed, last: %w", name, webhooks.Plural(failures, "event", "events"), rep.Err)
			}
		}
		if !o.DryRun && !e.Windowed && !sum.Cursor.Equal(*saved) {
			if err := e.Store.SaveCursor(ctx, e.Source, sum.Scope, sum.Cursor, runID); err != nil {
				return err
			}
			*saved = sum.Cursor
		}
		if o.Progress != nil {
			o.Progress(*sum)
		}
		if o.Out != nil && sum.Found%progressEvery < len(batch) && sum.Found >= progressEvery {
			fmt.Fprintf(o.Out, "… %s\n", sum)
		}
		return nil
	}
	for ev, err := range e.Lister.List(ctx, w) {
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("%s: %w", name, err)
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

// print writes the line of one event to o.Out: every event of a dry run,
// and every event not known before of a run that writes.
func (o Options) print(r EventReport) {
	if o.Out == nil || !o.DryRun && r.Disposition == DispKnown {
		return
	}
	line := fmt.Sprintf("%s %s %s %s", r.At.UTC().Format(time.RFC3339), r.ID, r.Type, r.Disposition)
	if r.Account != "" {
		line = r.Account + " " + line
	}
	if r.Err != nil {
		line += ": " + r.Err.Error()
	}
	fmt.Fprintln(o.Out, line)
}

// Job returns the periodic job: Resume from the cursor of the last run
// with the periodic types, or from lookback ago (DefaultLookback when 0)
// the first time, leaving events younger than settle (DefaultSettle when
// 0) to their delivery.
func (e *Events) Job(lookback, settle time.Duration) Job {
	if lookback <= 0 {
		lookback = DefaultLookback
	}
	if settle <= 0 {
		settle = DefaultSettle
	}
	o := Options{Types: e.PeriodicTypes, Resume: true, Since: lookback, Settle: settle, Trigger: TriggerPeriodic}
	return Job{Source: e.Source, Run: func(ctx context.Context) (Tally, error) {
		sum, err := e.Run(ctx, o)
		if err == nil {
			e.log().Info("reconcile "+e.Source, "summary", sum.String())
		}
		return sum.Tally(), err
	}}
}

// Instance is e as a Reconciler's Instance: `server reconcile`, the
// periodic job, the console.
func (e *Events) Instance() Instance { return eventsInstance{e} }

type eventsInstance struct{ e *Events }

func (i eventsInstance) Run(ctx context.Context, o Options) (Summary, error) { return i.e.Run(ctx, o) }
func (i eventsInstance) Job() Job                                            { return i.e.Job(0, 0) }
