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
//
// A platform with connected accounts (STRIPE_CONNECT_ACCOUNTS) has their
// events too: those are not in the platform's own listing, but in each
// account's, read with the Stripe-Account header. A run lists the
// platform's events, then each listed account's, each with a cursor of its
// own (its scope ends with "account=acct_…"). An account list of "*"
// cannot be enumerated from the events API: the run says so, and lists
// the platform's own events only.
//
// Every run is bounded (reconcile.Bound, CatchUp.Limits): its time, its
// requests and pages, each response; a listing that repeats a cursor, or
// says has_more after an empty page, stops it.

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
	// Limits bound every run (zero fields: reconcile's defaults).
	Limits reconcile.Limits
	// Accounts are the connected accounts (acct_…) whose events a run
	// lists after the platform's own (STRIPE_CONNECT_ACCOUNTS).
	Accounts []string
	// AllAccounts is STRIPE_CONNECT_ACCOUNTS=*: events of every connected
	// account are acted on, but which accounts there are cannot be listed
	// from the events API; a run says so in its summary (Note).
	AllAccounts bool
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

// EventReport is one event of a run and what became of it.
type EventReport struct {
	Account     string // the connected account whose event it is; "": the platform's
	ID          string
	Type        string
	Created     time.Time
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
	// Until is the end of the window (--settle); zero: the newest event.
	Until time.Time `json:"until,omitzero"`

	reconcile.Counts

	// Cursor is the last event reconciled: every event up to it was
	// looked at and is claimed. It stops before the first failed event.
	Cursor reconcile.Cursor `json:"cursor"`
	// Through is the creation time of the last event listed.
	Through time.Time `json:"through,omitzero"`

	// Accounts are the listings of connected accounts (CatchUp.Accounts),
	// each with its own scope, window and cursor; the counts above are the
	// totals of every listing, the platform's and theirs. From, Cursor and
	// Through above are the platform's.
	Accounts []AccountSummary `json:"accounts,omitempty"`
	// Note says what the run could not cover (STRIPE_CONNECT_ACCOUNTS=*).
	Note string `json:"note,omitempty"`
}

// AccountSummary is what a run found and did in one connected account's
// events.
type AccountSummary struct {
	Account string `json:"account"`
	CatchUpSummary
	// Error is why the account's listing failed, if it did; the run went
	// on with the next account.
	Error string `json:"error,omitempty"`
}

// NoteAllAccounts is the summary's Note when STRIPE_CONNECT_ACCOUNTS is *.
const NoteAllAccounts = "STRIPE_CONNECT_ACCOUNTS is *: the events API cannot enumerate connected accounts, " +
	"so no connected account's events were listed; list the accounts (acct_…) to reconcile theirs"

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

// add counts a connected account's listing into the run's totals.
func (s *CatchUpSummary) add(a AccountSummary) {
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

// AccountScope is the scope of a connected account's listing with the
// filters of scope: its cursor is kept apart from the platform's.
func AccountScope(scope, account string) string {
	if scope == "" {
		return "account=" + account
	}
	return scope + ";account=" + account
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
// it would be handled: the platform's events, then each connected
// account's (Accounts). It returns ErrBusy when another run holds the lock,
// ErrNoCursor for Resume with neither a cursor nor Since, an error wrapping
// ErrIncomplete when events were left unprocessed, and one wrapping
// reconcile.ErrStopped when a bound stopped the run; the summary says what
// was done either way.
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
	ctx, unbound := reconcile.Bound(ctx, s.Limits)
	defer unbound()
	if !o.DryRun {
		release, err := s.Store.Lock(ctx, Source)
		if err != nil {
			return sum, err
		}
		defer release()
	}

	// Where each listing starts: the platform's, then each account's.
	now := s.now()
	base := Query{Types: o.Types, FailedOnly: o.FailedOnly}
	if o.Settle > 0 {
		base.Until = now.Add(-o.Settle)
		sum.Until = base.Until
	}
	if o.Since > 0 {
		base.Since = now.Add(-o.Since)
		sum.From = reconcile.Cursor{Created: base.Since}
	}
	listings := []*listing{{q: base, sum: &sum}}
	for _, acct := range s.Accounts {
		q := base
		q.Account = acct
		a := &AccountSummary{Account: acct, CatchUpSummary: CatchUpSummary{DryRun: o.DryRun,
			Scope: AccountScope(sum.Scope, acct), From: sum.From, Until: sum.Until}}
		listings = append(listings, &listing{q: q, sum: &a.CatchUpSummary, account: a})
	}
	if s.AllAccounts {
		sum.Note = NoteAllAccounts
	}
	if o.Resume {
		for _, l := range listings {
			c, ok, err := s.Store.Cursor(ctx, Source, l.sum.Scope)
			switch {
			case err != nil:
				return sum, reconcile.Cause(ctx, err)
			case ok:
				l.q.After, l.q.Since, l.sum.From, l.sum.Cursor = c, time.Time{}, c, c
			case o.Since == 0:
				return sum, reconcile.ErrNoCursor
			}
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
	var errs []error
	for _, l := range listings {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		saved := l.sum.Cursor
		err := s.reconcile(ctx, l.q, o, runID, l.sum, &saved)
		if !o.DryRun {
			// The cursor outlives a cancelled or stopped run.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			next := l.sum.Cursor
			if next.IsZero() && err == nil && !l.q.Since.IsZero() {
				// Nothing found: pin the start of the window, so that the
				// next --resume (the periodic run's) starts there rather
				// than nowhere.
				next = reconcile.Cursor{Created: l.q.Since}
			}
			if !next.Equal(saved) {
				if e := s.Store.SaveCursor(sctx, Source, l.sum.Scope, next, runID); e != nil {
					err = errors.Join(err, e)
				}
			}
			cancel()
		}
		if l.account != nil {
			if err != nil {
				l.account.Error = reconcile.Cause(ctx, err).Error()
				err = fmt.Errorf("account %s: %w", l.account.Account, err)
			}
			sum.add(*l.account)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	err := reconcile.Cause(ctx, errors.Join(errs...))
	if errors.Is(err, reconcile.ErrStopped) {
		err = fmt.Errorf("reconcile stripe: %w", err)
	}
	if err == nil && sum.Failed > 0 {
		err = fmt.Errorf("reconcile stripe: %d events not processed: %w", sum.Failed, reconcile.ErrIncomplete)
	}
	if !o.DryRun {
		// The record outlives a cancelled or stopped run.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if e := s.Store.FinishRun(sctx, runID, sum.Tally(), sum, err); e != nil {
			s.log().Error("reconcile stripe: record run", "error", e)
		}
	}
	return sum, err
}

// listing is one listing of a run: the platform's events, or a connected
// account's, with the summary it counts into.
type listing struct {
	q       Query
	sum     *CatchUpSummary
	account *AccountSummary // nil: the platform's
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
			rep := EventReport{Account: q.Account, ID: se.ID, Type: se.Type, Created: se.Created}
			if errs[i] != nil {
				rep.Disposition, rep.Err = reconcile.DispUnreadable, errs[i]
			} else {
				rep.Disposition, rep.Err = reconcile.Handle(ctx, s.Processor, s.Provider, evs[i], known[evs[i].Key], o.DryRun)
			}
			sum.Count(rep.Disposition)
			sum.Through = se.Created
			switch rep.Disposition {
			case reconcile.DispFailed:
				settled = false
				failures++
				s.log().Error("reconcile stripe: event not processed", "event_id", se.ID, "event_type", se.Type, "error", rep.Err)
			case reconcile.DispUnreadable:
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
