package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A provider's API is trusted for the events it returns (fetched over TLS
// with the key), never for how much it returns or how it pages: a
// misconfigured base URL, a proxy or a hostile server can say has_more for
// ever, hand back a cursor it gave before, grow a listing without end,
// answer slowly, or redirect elsewhere. Every run is therefore bounded, the
// same way for every provider: Bound gives the run a context that ends
// after Limits.Timeout and carries its budget of requests and pages;
// NewClient's transport spends the requests and bounds each response;
// Pages follows one listing's pagination; Hold bounds a listing that must
// be held whole. A bound that is reached ends the run's context with its
// cause (context.Cause), so that every request, retry and database call of
// the run stops at once, and Cause names it in the run's error, which is
// recorded in reconcile_runs, printed by the CLI (exit status 1), and
// counted as an "error" run by the periodic job. The run's lock is released
// as on any other error, and what it reconciled before it stopped is kept:
// the cursor, for a listing that resumes.

// Limits bound one run of a provider's catch-up. A zero field takes its
// default.
type Limits struct {
	// Timeout bounds the whole run, from the lock to the record of its
	// end; 0: DefaultTimeout.
	Timeout time.Duration
	// MaxRequests bounds the HTTP requests the run makes to the API,
	// retries included; 0: DefaultMaxRequests.
	MaxRequests int
	// MaxPages bounds the pages the run's listings read, all of them
	// together; 0: DefaultMaxPages.
	MaxPages int
	// MaxBody bounds each response body, in bytes; 0: DefaultMaxBody.
	MaxBody int64
	// MaxHeld bounds the items a listing that is held whole (the
	// Marketplace's accounts) may hold; 0: DefaultMaxHeld.
	MaxHeld int
	// MaxHeldBytes bounds the response bytes such a listing may read, and
	// so the memory it holds; 0: DefaultMaxHeldBytes.
	MaxHeldBytes int64
}

// The default limits: far above what a genuine API needs in one run (a
// run that reaches one stops, and a listing that resumes continues from its
// cursor the next time), far below what a runaway one costs.
const (
	DefaultTimeout      = time.Hour
	DefaultMaxRequests  = 10_000
	DefaultMaxPages     = 5_000 // 500,000 Stripe events, 1,000,000 Paddle events
	DefaultMaxBody      = 32 << 20
	DefaultMaxHeld      = 100_000
	DefaultMaxHeldBytes = 128 << 20
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxRequests <= 0 {
		l.MaxRequests = DefaultMaxRequests
	}
	if l.MaxPages <= 0 {
		l.MaxPages = DefaultMaxPages
	}
	if l.MaxBody <= 0 {
		l.MaxBody = DefaultMaxBody
	}
	if l.MaxHeld <= 0 {
		l.MaxHeld = DefaultMaxHeld
	}
	if l.MaxHeldBytes <= 0 {
		l.MaxHeldBytes = DefaultMaxHeldBytes
	}
	return l
}

// ErrStopped is wrapped by every error of a bound that stopped a run:
// errors.Is(err, ErrStopped) tells a run the API (or the clock) stopped
// from one that failed otherwise. Each bound has its own error below.
var ErrStopped = errors.New("reconciliation stopped")

// stop is the error of one bound.
type stop struct{ msg string }

func (s *stop) Error() string        { return s.msg }
func (s *stop) Is(target error) bool { return target == ErrStopped }

// The bounds' errors; each also matches ErrStopped.
var (
	ErrTimeout          error = &stop{"the run reached its time limit"}
	ErrTooManyRequests  error = &stop{"the run reached its limit of requests to the API"}
	ErrTooManyPages     error = &stop{"the run reached its limit of pages"}
	ErrCursorRepeated   error = &stop{"the API gave a cursor it had given before"}
	ErrNoProgress       error = &stop{"the API said more followed a page that brought nothing new"}
	ErrResponseTooLarge error = &stop{"a response of the API is larger than a response may be"}
	ErrRedirect         error = &stop{"the API redirected the request, or it went to another origin (scheme, host or port): never followed"}
	ErrTooManyHeld      error = &stop{"the listing is larger than a run may hold"}
)

// bound is the budget of one run, carried by its context.
type bound struct {
	limits   Limits
	cancel   context.CancelCauseFunc // nil: a listing's own bound, outside any run
	requests atomic.Int64
	pages    atomic.Int64
	read     atomic.Int64 // response bytes read
}

type boundKey struct{}

// Bound returns a context for one run, bounded by l (see Limits), and a
// function that releases it; call it when the run ends.
func Bound(ctx context.Context, l Limits) (context.Context, context.CancelFunc) {
	l = l.WithDefaults()
	ctx, cancel := context.WithCancelCause(ctx)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, l.Timeout, fmt.Errorf("%w (%s)", ErrTimeout, l.Timeout))
	ctx = context.WithValue(ctx, boundKey{}, &bound{limits: l, cancel: cancel})
	return ctx, func() {
		cancelTimeout()
		cancel(context.Canceled)
	}
}

// boundOf returns the bound of ctx's run, or nil outside a run.
func boundOf(ctx context.Context) *bound {
	b, _ := ctx.Value(boundKey{}).(*bound)
	return b
}

// limitsOf returns the limits in force for ctx.
func limitsOf(ctx context.Context) Limits {
	if b := boundOf(ctx); b != nil {
		return b.limits
	}
	return Limits{}.WithDefaults()
}

// Stop ends the run of ctx with cause, which should wrap one of the
// bounds' errors, and returns cause. Outside a run it only returns cause.
func Stop(ctx context.Context, cause error) error {
	if b := boundOf(ctx); b != nil && b.cancel != nil {
		b.cancel(cause)
	}
	return cause
}

// Cause returns the error a run ends with: when a bound stopped the run of
// ctx, that bound's error, as "stopped: <cause>" (whatever error the
// stopped request or query returned, usually "context canceled"), else
// err. It returns nil when err is nil.
func Cause(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if c := context.Cause(ctx); c != nil && errors.Is(c, ErrStopped) {
		return fmt.Errorf("stopped: %w", c)
	}
	return err
}

// Pages follows the pagination of one listing within a run: it counts the
// run's pages, and stops the run when the API gives a cursor twice or says
// more follows a page that brought nothing new. It is not safe for
// concurrent use; a listing reads its pages one after the other.
type Pages struct {
	ctx     context.Context
	b       *bound
	cursors map[string]struct{}
	first   bool
}

// NewPages starts following a listing of the run of ctx. Outside a run,
// the listing is bounded on its own, by the default limits.
func NewPages(ctx context.Context) *Pages {
	b := boundOf(ctx)
	if b == nil {
		b = &bound{limits: Limits{}.WithDefaults()}
	}
	return &Pages{ctx: ctx, b: b, cursors: map[string]struct{}{}}
}

// Next is called before a page is fetched, with the cursor that fetches it
// ("" for the first page; for a paged listing, the page number). It
// returns an error, and stops the run, when the listing fetched a page
// with that cursor before, or when the run has read as many pages as it
// may.
func (p *Pages) Next(cursor string) error {
	if _, ok := p.cursors[cursor]; ok || (cursor == "" && p.first) {
		return Stop(p.ctx, fmt.Errorf("%w (%s)", ErrCursorRepeated, quoteCursor(cursor)))
	}
	if n := p.b.pages.Add(1); n > int64(p.b.limits.MaxPages) {
		return Stop(p.ctx, fmt.Errorf("%w (%d)", ErrTooManyPages, p.b.limits.MaxPages))
	}
	if cursor == "" {
		p.first = true
	} else {
		p.cursors[cursor] = struct{}{}
	}
	return nil
}

// Got is called with what a fetched page brought: fresh, how many items
// the listing had not seen before (the items of a page fetched with a new
// cursor, for a listing that cannot tell), and more, whether the API says
// more pages follow. It returns an error, and stops the run, when more
// follows a page that brought nothing.
func (p *Pages) Got(fresh int, more bool) error {
	if more && fresh == 0 {
		return Stop(p.ctx, ErrNoProgress)
	}
	return nil
}

// size is n bytes in MiB, or KiB below a MiB.
func size(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// quoteCursor is a cursor as an error shows it: the API's, so bounded.
func quoteCursor(c string) string {
	if len(c) > 64 {
		c = c[:64] + "…"
	}
	return fmt.Sprintf("%q", c)
}

// Held bounds a listing that must be held whole, in memory, before it can
// be compared (the Marketplace's accounts: an account listed on two plans
// is only known once every plan is read): its items, and the response
// bytes read since it began, which bound the memory it holds.
type Held struct {
	ctx   context.Context
	b     *bound
	start int64
	mu    sync.Mutex
	items int
}

// Hold starts bounding such a listing within the run of ctx.
func Hold(ctx context.Context) *Held {
	b := boundOf(ctx)
	if b == nil {
		b = &bound{limits: Limits{}.WithDefaults()}
	}
	return &Held{ctx: ctx, b: b, start: b.read.Load()}
}

// Add counts n more items held. It returns an error, and stops the run,
// past MaxHeld items or MaxHeldBytes read.
func (h *Held) Add(n int) error {
	h.mu.Lock()
	h.items += n
	items := h.items
	h.mu.Unlock()
	l := h.b.limits
	switch {
	case items > l.MaxHeld:
		return Stop(h.ctx, fmt.Errorf("%w (more than %d items)", ErrTooManyHeld, l.MaxHeld))
	case h.b.read.Load()-h.start > l.MaxHeldBytes:
		return Stop(h.ctx, fmt.Errorf("%w (more than %s of responses read)", ErrTooManyHeld, size(l.MaxHeldBytes)))
	}
	return nil
}
