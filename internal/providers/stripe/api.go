package stripe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// MaxListTypes is how many event types one listing may filter on
// (Stripe's limit on types[]).
const MaxListTypes = 20

// stripeRetention is how far back Stripe keeps events.
const stripeRetention = 30 * 24 * time.Hour

// The listing's events are reconcile.Listed: Raw is the event's JSON
// object byte for byte as it appears in the API's response (indentation
// included), never a re-marshal of stripe-go's struct, which would drop the
// fields it does not know; At is its created. Of a reconcile.Window, Since
// and Until filter on created (created[gte], created[lte]); After lists
// the events after the cursor's, in Stripe's order, and when Stripe no
// longer knows that event (events are kept 30 days) starts at its Created
// time instead, listing again the events of that second that came before
// it; Types are types[] (at most MaxListTypes); FailedOnly is
// delivery_success=false (events not yet delivered successfully to every
// endpoint, pending ones included); Account lists the events of a
// connected account (acct_…) instead of the platform's own, with the
// Stripe-Account header (such events carry the account in their top-level
// "account", as their deliveries to a Connect endpoint do).

// APIConfig configures the Stripe API client.
type APIConfig struct {
	// Key is the API key (STRIPE_API_KEY): a restricted key that can read
	// events is enough.
	Key string
	// BaseURL is the API's base URL (STRIPE_API_BASE); empty: Stripe's.
	BaseURL string
	// HTTPClient makes the requests; nil: reconcile.NewClient's for
	// BaseURL, which sends the key to BaseURL's origin only and bounds
	// every run (see reconcile.Bound).
	HTTPClient *http.Client
	// MaxNetworkRetries is how often a request that failed with 429, a
	// 5xx or no answer is tried again; nil: 2.
	MaxNetworkRetries *int64
	// PageSize is the limit of each request; 0: 100, the most Stripe
	// allows.
	PageSize int64
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// DefaultAPIBase is Stripe's API (STRIPE_API_BASE's default).
const DefaultAPIBase = "https://api.stripe.com"

// APIVersion is the Stripe-Version every request of the receiver's is
// pinned to: the version stripe-go v76, which the receiver reads events
// with, was built against, so that an object read from the API has the
// shape of the same object in an event.
const APIVersion = "2023-10-16"

// API is Stripe's API, called over raw HTTP (reconcile.API: the key to
// BaseURL's origin only, retries, bounds) with a pinned Stripe-Version.
// stripe-go's clients are not used for it: their iterators decode every
// event into stripe-go's structs (an event of an old API version fails
// that, stripe-go #441, #1333) and re-marshal what the receiver must keep
// byte for byte, and v76 has no client for the API's newer resources.
type API struct {
	*reconcile.API
	pageSize int64
	now      func() time.Time
}

// NewAPI returns a client of Stripe's API.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Key == "" {
		return nil, errors.New("stripe api: no API key")
	}
	var retries *int
	if cfg.MaxNetworkRetries != nil {
		n := int(*cfg.MaxNetworkRetries)
		retries = &n
	}
	api, err := reconcile.NewAPI(reconcile.APIConfig{Base: cfg.BaseURL, DefaultBase: DefaultAPIBase,
		Header: http.Header{"Authorization": {"Bearer " + cfg.Key}, "Stripe-Version": {APIVersion},
			"Accept": {"application/json"}},
		HTTPClient: cfg.HTTPClient, MaxRetries: retries, Error: apiError})
	if err != nil {
		return nil, fmt.Errorf("stripe api: %w", err)
	}
	a := &API{API: api, pageSize: cfg.PageSize, now: cfg.Now}
	if a.pageSize <= 0 || a.pageSize > 100 {
		a.pageSize = 100
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// APIError is an error answer of Stripe's API: {"error": {"type", "code",
// "param", "message"}}.
type APIError struct {
	Status  int
	Type    string // invalid_request_error, api_error, …
	Code    string // resource_missing, …
	Param   string
	Message string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("stripe api: status %d, %s", e.Status, webhooks.Quote(e.Type, 64))
	if e.Code != "" {
		s += " (" + webhooks.Quote(e.Code, 64) + ")"
	}
	return s + ": " + webhooks.Quote(e.Message, 200)
}

// apiError reads an error answer. Its fields are kept as Stripe wrote
// them, and quoted when printed.
func apiError(status int, body []byte) error {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Param   string `json:"param"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return &APIError{Status: status, Type: e.Error.Type, Code: e.Error.Code, Param: e.Error.Param, Message: e.Error.Message}
}

// account is the header of a request made for a connected account.
func account(acct string) http.Header {
	if acct == "" {
		return nil
	}
	return http.Header{"Stripe-Account": {acct}}
}

// List lists the events q selects in creation order, oldest first,
// yielding each with its raw JSON; a failure is yielded once, last.
//
// Stripe lists newest first. Its cursor ending_before gives the page of
// events just newer than a given event, and stripe-go's iterator, given
// EndingBefore, reverses each page and moves the cursor to the newest
// event seen: it walks forward in time, one page in memory, as far as the
// newest event. That needs a first event to stand on:
//
//   - After a cursor, the cursor's event is the first step.
//   - From Since, the oldest matching event is found first, by listing
//     windows of created[gte, lt) from Since that widen while empty and
//     narrow while they hold more than one page; the oldest event of the
//     first window that fits in one page is the oldest of all. That costs
//     a few requests (logarithmic in the span), never a walk over the
//     whole window, and keeps memory at one page, where collecting the
//     window newest first and reversing it would hold all of it.
//
// The window walk needs more than a page only when more than a page of
// events share the first second; that second is then paged through.
func (a *API) List(ctx context.Context, q reconcile.Window) iter.Seq2[reconcile.Listed, error] {
	return func(yield func(reconcile.Listed, error) bool) {
		if len(q.Types) > MaxListTypes {
			yield(reconcile.Listed{}, fmt.Errorf("list stripe events: %d types, at most %d", len(q.Types), MaxListTypes))
			return
		}
		stopped := false
		emit := func(ev reconcile.Listed) bool {
			if !yield(ev, nil) {
				stopped = true
			}
			return !stopped
		}
		if q.After.ID != "" {
			err := a.walk(ctx, q, q.After.ID, emit)
			if !errors.Is(err, errCursorGone) {
				if err != nil && !stopped {
					yield(reconcile.Listed{}, err)
				}
				return
			}
			if q.After.Created.After(q.Since) {
				q.Since = q.After.Created
			}
		} else if !q.After.Created.IsZero() && q.After.Created.After(q.Since) {
			q.Since = q.After.Created
		}
		first, ok, err := a.oldest(ctx, q)
		switch {
		case err != nil:
			yield(reconcile.Listed{}, err)
			return
		case !ok:
			return
		}
		if first.ID != q.After.ID && !emit(first) {
			return
		}
		if err := a.walk(ctx, q, first.ID, emit); err != nil && !stopped {
			yield(reconcile.Listed{}, err)
		}
	}
}

// errCursorGone is a walk's first page refused because Stripe does not
// know the cursor's event (any more).
var errCursorGone = errors.New("stripe no longer has the cursor's event")

// errStopped ends a walk whose consumer stopped.
var errStopped = errors.New("stopped")

// params are the filters of q as list parameters, with the page size.
func (a *API) params(q reconcile.Window) url.Values {
	v := url.Values{}
	v.Set("limit", strconv.FormatInt(a.pageSize, 10))
	for i, t := range q.Types {
		v.Set("types["+strconv.Itoa(i)+"]", t)
	}
	if q.FailedOnly {
		v.Set("delivery_success", "false")
	}
	if !q.Since.IsZero() {
		v.Set("created[gte]", strconv.FormatInt(q.Since.Unix(), 10))
	}
	if !q.Until.IsZero() {
		v.Set("created[lte]", strconv.FormatInt(q.Until.Unix(), 10))
	}
	return v
}

// page is one page of events, newest first as Stripe lists them.
type page struct {
	events []reconcile.Listed
	more   bool
}

// list fetches one page with the parameters v, counted against the
// listing's pages: a cursor given before, or has_more after a page with
// nothing new, stops the run.
func (a *API) list(ctx context.Context, q reconcile.Window, v url.Values, pages *reconcile.Pages) (page, error) {
	cursor := ""
	for _, name := range []string{"ending_before", "starting_after"} {
		if c := v.Get(name); c != "" {
			cursor = name + "=" + c
		}
	}
	if err := pages.Next(cursor); err != nil {
		return page{}, err
	}
	body, err := a.Do(ctx, http.MethodGet, "/v1/events", v, nil, account(q.Account))
	if err != nil {
		return page{}, fmt.Errorf("list stripe events: %w", err)
	}
	var raw struct {
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return page{}, fmt.Errorf("list stripe events: page: %w", err)
	}
	p := page{more: raw.HasMore, events: make([]reconcile.Listed, len(raw.Data))}
	for i, obj := range raw.Data {
		var head struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Created int64  `json:"created"`
		}
		if err := json.Unmarshal(obj, &head); err != nil || head.ID == "" {
			return page{}, fmt.Errorf("list stripe events: event %d of the page has no id", i)
		}
		p.events[i] = reconcile.Listed{ID: head.ID, Type: head.Type, At: time.Unix(head.Created, 0), Raw: bytes.Clone(obj)}
	}
	if err := pages.Got(len(p.events), p.more); err != nil {
		return page{}, err
	}
	return p, nil
}

// walk yields every event after anchor (newer, in Stripe's order) that q
// selects, oldest first: pages of ending_before, each newest first and
// turned round, the next after the newest of the last.
func (a *API) walk(ctx context.Context, q reconcile.Window, anchor string, emit func(reconcile.Listed) bool) error {
	pages := reconcile.NewPages(ctx)
	v := a.params(q)
	for seen := 0; ; {
		v.Set("ending_before", anchor)
		p, err := a.list(ctx, q, v, pages)
		var ae *APIError
		if seen == 0 && errors.As(err, &ae) && ae.Type == "invalid_request_error" &&
			(ae.Code == "resource_missing" || ae.Param == "ending_before") {
			return errCursorGone
		}
		if err != nil {
			return err
		}
		for i := len(p.events) - 1; i >= 0; i-- {
			seen++
			if !emit(p.events[i]) {
				return errStopped
			}
		}
		if !p.more || len(p.events) == 0 {
			return nil
		}
		anchor = p.events[0].ID
	}
}

// oldest finds the oldest event q selects at or after q.Since (see List).
//
// It first gallops from Since with windows four times wider each time
// while they are empty. A window holding at most one page gives the answer
// (its last event); one holding more becomes [a, b), known to hold more
// than a page, and is halved: if [a, mid) is empty the oldest event is in
// [mid, b), if it holds more than a page it is in [a, mid), which keeps
// the invariant, until a half fits in a page or b-a is one second.
func (a *API) oldest(ctx context.Context, q reconcile.Window) (reconcile.Listed, bool, error) {
	now := a.now()
	lo := q.Since
	if lo.IsZero() {
		lo = now.Add(-stripeRetention - 24*time.Hour)
	}
	lo = time.Unix(lo.Unix(), 0)
	hi := q.Until
	if hi.IsZero() {
		hi = now.Add(time.Minute)
	}
	end := time.Unix(hi.Unix(), 0).Add(time.Second) // exclusive

	// Gallop.
	w := time.Hour
	for {
		if !lo.Before(end) {
			return reconcile.Listed{}, false, nil
		}
		b := lo.Add(w)
		if b.After(end) {
			b = end
		}
		last, n, more, err := a.window(ctx, q, lo, b)
		switch {
		case err != nil:
			return reconcile.Listed{}, false, err
		case n == 0:
			lo, w = b, 4*w
			continue
		case !more:
			return last, true, nil
		}
		end = b
		break
	}
	// Halve [lo, end), which holds more than a page.
	for end.Sub(lo) > time.Second {
		mid := lo.Add((end.Sub(lo) / 2).Truncate(time.Second))
		last, n, more, err := a.window(ctx, q, lo, mid)
		switch {
		case err != nil:
			return reconcile.Listed{}, false, err
		case n == 0:
			lo = mid
		case more:
			end = mid
		default:
			return last, true, nil
		}
	}
	return a.lastOf(ctx, q, lo, end)
}

// window lists the first page of the events q selects created in [lo, end),
// newest first, and returns its last (oldest) event, how many it holds and
// whether there are more.
func (a *API) window(ctx context.Context, q reconcile.Window, lo, end time.Time) (last reconcile.Listed, n int, more bool, err error) {
	p, err := a.list(ctx, q, a.between(q, lo, end), reconcile.NewPages(ctx))
	if err != nil || len(p.events) == 0 {
		return reconcile.Listed{}, 0, false, err
	}
	return p.events[len(p.events)-1], len(p.events), p.more, nil
}

// lastOf pages through the events of [lo, end) newest first and returns the
// last one, the oldest: for a second that holds more than one page.
func (a *API) lastOf(ctx context.Context, q reconcile.Window, lo, end time.Time) (reconcile.Listed, bool, error) {
	pages := reconcile.NewPages(ctx)
	v := a.between(q, lo, end)
	var last reconcile.Listed
	found := false
	for {
		p, err := a.list(ctx, q, v, pages)
		if err != nil {
			return reconcile.Listed{}, false, err
		}
		if len(p.events) > 0 {
			last, found = p.events[len(p.events)-1], true
		}
		if !p.more || len(p.events) == 0 {
			return last, found, nil
		}
		v.Set("starting_after", last.ID)
	}
}

// between is q's parameters for the events created in [lo, end).
func (a *API) between(q reconcile.Window, lo, end time.Time) url.Values {
	v := a.params(q)
	v.Del("created[lte]")
	v.Set("created[gte]", strconv.FormatInt(lo.Unix(), 10))
	v.Set("created[lt]", strconv.FormatInt(end.Unix(), 10))
	return v
}
