package stripe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/event"
	"github.com/stripe/stripe-go/v76/form"
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
	// MaxNetworkRetries is how often stripe-go retries a request that
	// failed in a way Stripe says is safe to retry; nil: stripe-go's
	// default (2).
	MaxNetworkRetries *int64
	// PageSize is the limit of each request; 0: 100, the most Stripe
	// allows.
	PageSize int64
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// API lists events from Stripe's API with stripe-go v76.
type API struct {
	client   event.Client
	pageSize int64
	now      func() time.Time
}

// NewAPI returns a client of Stripe's Events API. It logs nothing of
// its own (stripe-go's logger is silenced): errors are returned.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Key == "" {
		return nil, errors.New("stripe api: no API key")
	}
	if cfg.HTTPClient == nil {
		base := cfg.BaseURL
		if base == "" {
			base = stripego.APIURL
		}
		hc, err := reconcile.NewClient(base)
		if err != nil {
			return nil, fmt.Errorf("stripe api: %w", err)
		}
		cfg.HTTPClient = hc
	}
	bc := &stripego.BackendConfig{
		HTTPClient:        cfg.HTTPClient,
		MaxNetworkRetries: cfg.MaxNetworkRetries,
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
		EnableTelemetry:   stripego.Bool(false),
	}
	if cfg.BaseURL != "" {
		bc.URL = stripego.String(cfg.BaseURL)
	}
	a := &API{
		client:   event.Client{B: eventsBackend{stripego.GetBackendWithConfig(stripego.APIBackend, bc)}, Key: cfg.Key},
		pageSize: cfg.PageSize,
		now:      cfg.Now,
	}
	if a.pageSize <= 0 || a.pageSize > 100 {
		a.pageSize = 100
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
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

// params are the filters of q as stripe-go list parameters.
func (a *API) params(ctx context.Context, q reconcile.Window) *stripego.EventListParams {
	p := &stripego.EventListParams{}
	// Each listing (each stripe-go iterator) follows its own pages within
	// the run (see eventsBackend.CallRaw).
	p.Context = context.WithValue(ctx, pagesKey{}, reconcile.NewPages(ctx))
	p.Limit = stripego.Int64(a.pageSize)
	if q.Account != "" {
		p.SetStripeAccount(q.Account)
	}
	if len(q.Types) > 0 {
		p.Types = stripego.StringSlice(q.Types)
	}
	if q.FailedOnly {
		p.DeliverySuccess = stripego.Bool(false)
	}
	if !q.Since.IsZero() || !q.Until.IsZero() {
		p.CreatedRange = &stripego.RangeQueryParams{}
		if !q.Since.IsZero() {
			p.CreatedRange.GreaterThanOrEqual = q.Since.Unix()
		}
		if !q.Until.IsZero() {
			p.CreatedRange.LesserThanOrEqual = q.Until.Unix()
		}
	}
	return p
}

// walk yields every event after anchor (newer, in Stripe's order) that q
// selects, oldest first, with stripe-go's iterator walking ending_before.
func (a *API) walk(ctx context.Context, q reconcile.Window, anchor string, emit func(reconcile.Listed) bool) error {
	p := a.params(ctx, q)
	p.EndingBefore = stripego.String(anchor)
	it := a.client.List(p)
	var page pageEvents
	seen := 0
	for it.Next() {
		ev, err := page.event(it.EventList(), it.Event())
		if err != nil {
			return err
		}
		seen++
		if !emit(ev) {
			return errStopped
		}
	}
	if err := it.Err(); err != nil {
		var se *stripego.Error
		if seen == 0 && errors.As(err, &se) && se.Type == stripego.ErrorTypeInvalidRequest &&
			(se.Code == stripego.ErrorCodeResourceMissing || se.Param == "ending_before") {
			return errCursorGone
		}
		return fmt.Errorf("list stripe events: %w", err)
	}
	return nil
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
	p := a.params(ctx, q)
	p.CreatedRange = &stripego.RangeQueryParams{GreaterThanOrEqual: lo.Unix(), LesserThan: end.Unix()}
	p.Single = true
	it := a.client.List(p)
	var page pageEvents
	for it.Next() {
		ev, err := page.event(it.EventList(), it.Event())
		if err != nil {
			return reconcile.Listed{}, 0, false, err
		}
		last, n = ev, n+1
	}
	if err := it.Err(); err != nil {
		return reconcile.Listed{}, 0, false, fmt.Errorf("list stripe events: %w", err)
	}
	return last, n, it.Meta().HasMore, nil
}

// lastOf pages through the events of [lo, end) newest first and returns the
// last one, the oldest: for a second that holds more than one page.
func (a *API) lastOf(ctx context.Context, q reconcile.Window, lo, end time.Time) (reconcile.Listed, bool, error) {
	p := a.params(ctx, q)
	p.CreatedRange = &stripego.RangeQueryParams{GreaterThanOrEqual: lo.Unix(), LesserThan: end.Unix()}
	it := a.client.List(p)
	var page pageEvents
	var last reconcile.Listed
	found := false
	for it.Next() {
		ev, err := page.event(it.EventList(), it.Event())
		if err != nil {
			return reconcile.Listed{}, false, err
		}
		last, found = ev, true
	}
	if err := it.Err(); err != nil {
		return reconcile.Listed{}, false, fmt.Errorf("list stripe events: %w", err)
	}
	return last, found, nil
}

// pageEvents holds the raw JSON of the events of the page an iterator is
// on. stripe-go decodes each page into a *stripego.EventList whose
// LastResponse.RawJSON is the response body as received; its data array,
// decoded as json.RawMessage, gives each event's object as the API wrote
// it. The page changes when the iterator fetches the next one, which shows
// as a new *stripego.EventList.
type pageEvents struct {
	list *stripego.EventList
	raw  map[string][]byte
}

func (p *pageEvents) event(list *stripego.EventList, ev *stripego.Event) (reconcile.Listed, error) {
	if list != p.list {
		raw, err := rawEvents(list)
		if err != nil {
			return reconcile.Listed{}, err
		}
		p.list, p.raw = list, raw
	}
	raw, ok := p.raw[ev.ID]
	if !ok {
		return reconcile.Listed{}, fmt.Errorf("list stripe events: event %s is not in the raw page", ev.ID)
	}
	return reconcile.Listed{ID: ev.ID, Type: string(ev.Type), At: time.Unix(ev.Created, 0), Raw: raw}, nil
}

// rawEvents maps each event of a page to its JSON object as received.
func rawEvents(list *stripego.EventList) (map[string][]byte, error) {
	if list.LastResponse == nil {
		return nil, errors.New("list stripe events: the page has no raw response")
	}
	var body struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(list.LastResponse.RawJSON, &body); err != nil {
		return nil, fmt.Errorf("list stripe events: raw page: %w", err)
	}
	if len(body.Data) != len(list.Data) {
		return nil, fmt.Errorf("list stripe events: raw page has %d events, decoded %d", len(body.Data), len(list.Data))
	}
	raw := make(map[string][]byte, len(body.Data))
	for i, obj := range body.Data {
		var head struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(obj, &head); err != nil || head.ID != list.Data[i].ID {
			return nil, fmt.Errorf("list stripe events: raw event %d is not %s", i, list.Data[i].ID)
		}
		raw[head.ID] = bytes.Clone(obj)
	}
	return raw, nil
}

// eventsBackend is stripe-go's backend, but decodes a page of events one
// event at a time, so that an event stripe-go's struct cannot hold (an old
// API version's "request" as a string: stripe-go #441, #1333) does not
// fail the whole page and stop the reconciliation: such an event is kept
// with its envelope (id, type, created), which is all the iterator and the
// listing use, and its raw JSON, which is all the processor uses.
//
// It also follows each listing's pages (reconcile.Pages): stripe-go's
// iterator asks for the next page, with the newest (ending_before) or
// oldest (starting_after) event of the last one as its cursor, for as long
// as the API says has_more, so an API that repeats a page would be listed
// for ever; one that says has_more with an empty page would end the
// listing silently, as if it were complete. Both stop the run instead.
type eventsBackend struct {
	stripego.Backend
}

// pagesKey carries a listing's reconcile.Pages in its requests' context.
type pagesKey struct{}

// CallRaw is what event.Client.List calls for each page.
func (b eventsBackend) CallRaw(method, path, key string, body *form.Values, params *stripego.Params, v stripego.LastResponseSetter) error {
	list, ok := v.(*stripego.EventList)
	if !ok {
		return b.Backend.CallRaw(method, path, key, body, params, v)
	}
	var pages *reconcile.Pages
	if params != nil && params.Context != nil {
		pages, _ = params.Context.Value(pagesKey{}).(*reconcile.Pages)
	}
	if pages != nil {
		cursor := ""
		if body != nil {
			for _, name := range []string{"ending_before", "starting_after"} {
				if c := body.Get(name); len(c) > 0 {
					cursor = name + "=" + c[0]
				}
			}
		}
		if err := pages.Next(cursor); err != nil {
			return err
		}
	}
	var page rawList
	if err := b.Backend.CallRaw(method, path, key, body, params, &page); err != nil {
		return err
	}
	if pages != nil {
		if err := pages.Got(len(page.Data), page.HasMore); err != nil {
			return err
		}
	}
	list.HasMore, list.URL = page.HasMore, page.URL
	list.Data = make([]*stripego.Event, len(page.Data))
	for i, raw := range page.Data {
		ev, err := decodeListedEvent(raw)
		if err != nil {
			return fmt.Errorf("event %d of the page: %w", i, err)
		}
		list.Data[i] = ev
	}
	list.SetLastResponse(page.resp)
	return nil
}

// rawList is a page of events with each event left as it was received.
type rawList struct {
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
	URL     string            `json:"url"`
	resp    *stripego.APIResponse
}

func (l *rawList) SetLastResponse(r *stripego.APIResponse) { l.resp = r }

// decodeListedEvent decodes an event with stripe-go's struct, or, when the
// struct cannot hold it, its envelope alone.
func decodeListedEvent(raw json.RawMessage) (*stripego.Event, error) {
	ev := &stripego.Event{}
	if err := json.Unmarshal(raw, ev); err == nil && ev.ID != "" {
		return ev, nil
	}
	var head struct {
		ID              string             `json:"id"`
		Object          string             `json:"object"`
		APIVersion      string             `json:"api_version"`
		Created         int64              `json:"created"`
		Livemode        bool               `json:"livemode"`
		PendingWebhooks int64              `json:"pending_webhooks"`
		Type            stripego.EventType `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	if head.ID == "" {
		return nil, errors.New("event without an id")
	}
	return &stripego.Event{ID: head.ID, Object: head.Object, APIVersion: head.APIVersion, Created: head.Created,
		Livemode: head.Livemode, PendingWebhooks: head.PendingWebhooks, Type: head.Type}, nil
}
