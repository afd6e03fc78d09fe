// Package checkout is the buyer's way back from a provider's hosted
// checkout: GET /checkout/return?session_id=…, the page the checkout's
// success URL points at. The buyer may come back before the provider's
// webhook does (Stripe waits up to 10 s for the webhook's answer, and its
// own guide runs the same fulfilment from the success page), so the return
// reads the session from the provider's API and, when it is paid, makes
// the sale exactly as its webhook event would: through the provider's own
// plan, under a claim of its own keyed by the session, whose steps are the
// order's (webhooks.Step.Object, internal/sales). Whichever of the return
// and the event comes first, and however often each comes, there is one
// order, one confirmation email and one fulfillment call, with one
// Message-ID and one Idempotency-Key. Then the buyer is sent on to the
// app's success page (303).
//
// # A public, unsigned route
//
// Nobody signs a return: anybody can send one, with any id, as often as
// they like, and each may cost a call to the provider's API. So:
//
//   - The id's shape is checked first (Sessions.Valid); a malformed one is
//     400 and nothing else is read.
//   - Each client is held to a few API calls a second, and every client
//     together to a bound of their own (internal/ratelimit, in bounded
//     memory): a client over its rate is answered 429 with Retry-After,
//     and past the overall bound the buyer is redirected with nothing done
//     (the webhook will do it).
//   - An order already past payment (the webhook came first, or the page
//     was reloaded) is redirected to at once, with no call.
//   - At most MaxInFlight returns read and process at once; another is
//     redirected with nothing done.
//   - The read is bounded by the provider (time, requests, response size);
//     an API that fails or hangs redirects the buyer within a few seconds,
//     writes nothing, and is counted (outcome api_failed).
//   - The buyer waits for the sale's steps (the confirmation, the
//     fulfillment call) at most Wait; they go on after the redirect, on a
//     context the buyer cannot cancel, under their leases.
//
// Every outcome is counted in checkout_returns_total{outcome}; the id and
// the outcome are logged, nothing else of the request.
package checkout

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/ratelimit"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Route is the return's path on HTTP_ADDR.
const Route = "/checkout/return"

// Placeholder is what the success URL's occurrences of are replaced with
// the session id, as in Stripe's own success_url.
const Placeholder = "{CHECKOUT_SESSION_ID}"

// Sessions reads a provider's checkout sessions for the return (Stripe's:
// internal/providers/stripe).
type Sessions interface {
	// Valid reports whether id (and account, "" when the request names
	// none) have the shape of the provider's ids.
	Valid(id, account string) bool
	// Read reads the session from the provider's API, bounded in time,
	// requests and size, and returns the event that applies it (a paid
	// session of the mode and account the provider acts on), or, with no
	// event, why nothing is to be done (Skip). An error is the API's.
	Read(ctx context.Context, id, account string) (webhooks.Event, Skip, error)
	// Provider plans the events Read returns.
	Provider() webhooks.Provider
	// OrderSource is orders.source of the orders they make.
	OrderSource() string
}

// Skip is why a session read asks nothing of the receiver.
type Skip string

// The skips of Read.
const (
	SkipUnpaid  Skip = "unpaid"  // open, expired, or complete and not paid (yet)
	SkipUnknown Skip = "unknown" // the provider has no such session
	SkipIgnored Skip = "ignored" // of a mode or connected account the provider does not act on
)

// Provider is the registry's line of the provider whose checkout comes
// back here.
type Provider struct {
	// Source is the provider's Spec.Source, whose settings Setup reads.
	Source string
	// Setup builds the sessions and reads the success URL from the
	// provider's settings; with either missing, off says why the route is
	// not mounted ("" when the success URL is unset: the route is simply
	// off).
	Setup func(webhooks.Settings) (s Sessions, successURL, off string, err error)
}

// Processor runs an event as a delivery would (*webhooks.Processor).
type Processor interface {
	Process(ctx context.Context, prov webhooks.Provider, ev webhooks.Event) webhooks.Result
}

// Bounds of the return.
const (
	// MaxInFlight is how many returns read and process at once in a
	// process.
	MaxInFlight = 16
	// Wait is how long the buyer waits for the sale's steps before being
	// redirected anyway.
	Wait = 3 * time.Second
)

// Config is what a Handler is built from.
type Config struct {
	Sessions   Sessions
	SuccessURL string // CHECKOUT_SUCCESS_URL
	Processor  Processor
	// ProcessTimeout bounds the processing of one return's event, which
	// goes on after the redirect (the processor's DeliveryTimeout).
	ProcessTimeout time.Duration
	Orders         orders.Lister // the pool: is the order already past payment?
	// ClientIP is a request's client address (TRUSTED_PROXIES); nil: the
	// socket's peer.
	ClientIP   func(*http.Request) string
	Limits     ratelimit.Limits // zero: ratelimit.Defaults
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// Wait, when set, replaces Wait (tests).
	Wait time.Duration
	Now  func() time.Time
}

// Handler serves GET /checkout/return.
type Handler struct {
	cfg      Config
	limiter  *ratelimit.Limiter
	slots    chan struct{}
	outcomes *prometheus.CounterVec
	wg       sync.WaitGroup
}

// Outcomes are the values of checkout_returns_total's outcome label.
var Outcomes = []string{"fulfilled", "pending", "failed", "known", "unpaid", "unknown", "ignored", "api_failed",
	"busy", "throttled", "malformed"}

// New returns the handler cfg describes, its series registered.
func New(cfg Config) *Handler {
	if cfg.Wait <= 0 {
		cfg.Wait = Wait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ProcessTimeout <= 0 {
		cfg.ProcessTimeout = time.Minute
	}
	return &Handler{cfg: cfg, limiter: ratelimit.New(cfg.Limits), slots: make(chan struct{}, MaxInFlight),
		outcomes: ratelimit.Outcomes("checkout_returns_total", "Buyers back from checkout (GET /checkout/return), by what "+
			"became of the return: fulfilled (the sale's steps ran, or were done), pending (still running at the redirect), "+
			"failed, known (the order was past payment: no call), unpaid, unknown, ignored (another mode or account), "+
			"api_failed, busy, throttled (429), malformed (400).", Outcomes, cfg.Registerer)}
}

// ServeHTTP answers a return: 400 for a malformed id, 429 for a client over
// its rate, else 303 to the success URL, once the session has been read and
// acted on (or not, and why is counted).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ids, accounts := q["session_id"], q["account"]
	account := ""
	if len(accounts) == 1 {
		account = accounts[0]
	}
	if len(ids) != 1 || len(accounts) > 1 || !h.cfg.Sessions.Valid(ids[0], account) {
		h.outcomes.WithLabelValues("malformed").Inc()
		ratelimit.Page(w, http.StatusBadRequest, 0, "This link is not a checkout return: its session_id is missing or malformed.")
		return
	}
	id := ids[0]
	ctx := reqlog.With(r.Context(), "checkout_session", id)
	switch v, wait := h.limiter.Allow(ratelimit.ClientOf(r, h.cfg.ClientIP), h.cfg.Now()); v {
	case ratelimit.ClientLimited:
		h.outcomes.WithLabelValues("throttled").Inc()
		ratelimit.Page(w, http.StatusTooManyRequests, wait, "Too many requests from your address: try again in a moment.")
		return
	case ratelimit.OverallLimited:
		h.done(ctx, w, id, "busy")
		return
	}
	if l, ok, err := orders.ListingOf(ctx, h.cfg.Orders, h.cfg.Sessions.OrderSource(), id); err != nil {
		h.cfg.Log.WarnContext(ctx, "checkout return: order not looked up; the webhook will make the sale", "error", err)
		h.done(ctx, w, id, "failed")
		return
	} else if ok && l.Status != orders.StatusPendingPayment {
		h.done(ctx, w, id, "known")
		return
	}
	select {
	case h.slots <- struct{}{}:
	default:
		h.done(ctx, w, id, "busy")
		return
	}
	ev, skip, err := h.cfg.Sessions.Read(ctx, id, account)
	switch {
	case err != nil:
		<-h.slots
		h.cfg.Log.WarnContext(ctx, "checkout return: session not read; redirected, the webhook will make the sale", "error", err)
		h.done(ctx, w, id, "api_failed")
		return
	case skip != "":
		<-h.slots
		h.done(ctx, w, id, string(skip))
		return
	}
	h.done(ctx, w, id, h.process(ctx, ev))
}

// process runs the session's event on a context the buyer cannot cancel,
// and waits for it at most Wait: the outcome, or pending when it runs on.
func (h *Handler) process(ctx context.Context, ev webhooks.Event) string {
	result := make(chan string, 1)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer func() { <-h.slots }()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.ProcessTimeout)
		defer cancel()
		res := h.cfg.Processor.Process(pctx, h.cfg.Sessions.Provider(), ev)
		outcome := "fulfilled"
		switch {
		case res.Outcome == webhooks.OutcomeLeaseConflict:
			outcome = "pending" // another return, or the event, holds the steps: they finish there
		case !res.Outcome.Acknowledged():
			outcome = "failed"
			h.cfg.Log.WarnContext(ctx, "checkout return: the sale's steps did not all finish; they are retried", "outcome", res.Outcome,
				"error", res.Err)
		}
		result <- outcome
	}()
	t := time.NewTimer(h.cfg.Wait)
	defer t.Stop()
	select {
	case o := <-result:
		return o
	case <-t.C:
	case <-ctx.Done():
	}
	return "pending"
}

// done counts the outcome, logs it and redirects the buyer.
func (h *Handler) done(ctx context.Context, w http.ResponseWriter, id, outcome string) {
	h.outcomes.WithLabelValues(outcome).Inc()
	h.cfg.Log.InfoContext(ctx, "checkout return", "outcome", outcome)
	w.Header().Set("Location", strings.ReplaceAll(h.cfg.SuccessURL, Placeholder, id))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusSeeOther)
}

// Wait waits until the returns still processing after their redirect have
// finished, or ctx ends.
func (h *Handler) Wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
