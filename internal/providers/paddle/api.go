package paddle

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
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// What this client relies on of Paddle's List Events API ("List events",
// developer.paddle.com/api-reference/events/list-events, and the Go SDK
// v4.1.0's ListEventsRequest, Collection and response.Response):
//
//   - GET {base}/events, authenticated with `Authorization: Bearer <API
//     key>`; the base is https://api.paddle.com, or
//     https://sandbox-api.paddle.com for the sandbox.
//   - Query: `after` (an event id: the events after it in the listing's
//     order; Paddle's meta.pagination.next is this URL with after = the last
//     event of the page), `order_by` (`id[ASC]` or `id[DESC]`, id being the
//     event_id), `per_page` (default 50, at most 200; more is answered with
//     200), and `event_type` (a comma-separated list of types: the SDK's,
//     though the reference page does not list it).
//   - Response: `{"data": [event…], "meta": {"request_id", "pagination":
//     {"per_page", "next", "has_more", "estimated_total"}}}`; an error is
//     `{"error": {"type", "code", "detail", "documentation_url"}, "meta"}`
//     with a 4xx or 5xx status.
//   - An event is `{"event_id", "event_type", "occurred_at", "data"}`: the
//     notification a webhook delivers, less its notification_id (which one
//     version of the reference lists in the response too), so Decode reads
//     it as it reads a delivery, keyed on event_id.
//   - Event ids sort in the order the events were created (they are
//     time-ordered, ULID-like: evt_01h…), so id order is creation order.
//   - Events older than 90 days are not returned (Paddle's changelog,
//     2024: "Events and notifications older than 90 days are no longer
//     available").
//
// The listing asks for id[ASC] explicitly (the reference does not say
// which order is the default) and builds each next page's URL itself,
// `after` the last event it read, rather than following meta.pagination.next:
// the key goes to the configured base only.

// MaxPageSize is the largest per_page Paddle answers.
const MaxPageSize = 200

// APIConfig configures the Paddle API client.
type APIConfig struct {
	// Key is the API key (PADDLE_API_KEY), with the permission to read
	// events (event.read).
	Key string
	// BaseURL is the API's base URL (PADDLE_API_BASE); empty: Paddle's.
	BaseURL string
	// HTTPClient makes the requests; nil: reconcile.NewClient's for
	// BaseURL.
	HTTPClient *http.Client
	// PageSize is per_page; 0: MaxPageSize.
	PageSize int
	// MaxRetries is how often a request that failed with 429, a 5xx or no
	// answer is tried again; nil: 2.
	MaxRetries *int
}

// DefaultAPIBase is Paddle's API (PADDLE_API_BASE's default); the sandbox's
// is https://sandbox-api.paddle.com.
const DefaultAPIBase = "https://api.paddle.com"

// API is Paddle's API.
type API struct {
	*reconcile.API
	pageSize int
}

// NewAPI returns a client of Paddle's API.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Key == "" {
		return nil, errors.New("paddle api: no API key")
	}
	api, err := reconcile.NewAPI(reconcile.APIConfig{Base: cfg.BaseURL, DefaultBase: DefaultAPIBase,
		Header:     http.Header{"Authorization": {"Bearer " + cfg.Key}, "Accept": {"application/json"}},
		HTTPClient: cfg.HTTPClient, MaxRetries: cfg.MaxRetries, Error: apiError})
	if err != nil {
		return nil, fmt.Errorf("paddle api: %w", err)
	}
	a := &API{API: api, pageSize: cfg.PageSize}
	if a.pageSize <= 0 || a.pageSize > MaxPageSize {
		a.pageSize = MaxPageSize
	}
	return a, nil
}

// APIError is an error answer of Paddle's API.
type APIError struct {
	Status int
	Code   string // Paddle's error code (forbidden, not_found, …), quoted and bounded
	Detail string // quoted and bounded
}

func (e *APIError) Error() string {
	return fmt.Sprintf("paddle api: status %d, code %s: %s", e.Status, e.Code, e.Detail)
}

// apiError reads an error answer: {"error": {"type", "code", "detail"}}.
func apiError(status int, body []byte) error {
	var e struct {
		Error struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return &APIError{Status: status, Code: webhooks.Quote(e.Error.Code, 64), Detail: webhooks.Quote(e.Error.Detail, 200)}
}

// List lists the events of the window w in creation order, oldest first,
// each with its raw JSON (At its occurred_at; zero when it cannot be read,
// and such an event is in every window); a failure is yielded once, last.
// It holds one page in memory.
//
// Paddle's events API has no time filter: from w.Since, the listing starts
// after the newest event older than Since, found by listing newest first
// down to it; zero: every event Paddle keeps (90 days). It stops at the
// first event that occurred after w.Until (ids are in creation order:
// every later one is younger still). w.After (an event id) overrides Since;
// an id Paddle refuses (older than it keeps) is replaced by Since, or by
// the oldest event Paddle keeps. w.Types filter on event_type.
func (a *API) List(ctx context.Context, w reconcile.Window) iter.Seq2[reconcile.Listed, error] {
	if w.After.ID == "" && !w.After.Created.IsZero() {
		w.Since = w.After.Created // a window's start pinned by a run that found nothing
	}
	return func(yield func(reconcile.Listed, error) bool) {
		after := w.After.ID
		if after == "" && !w.Since.IsZero() {
			b, err := a.boundary(ctx, w)
			if err != nil {
				yield(reconcile.Listed{}, err)
				return
			}
			after = b
		}
		pages := reconcile.NewPages(ctx)
		first := true
		for {
			evs, more, err := a.page(ctx, "id[ASC]", after, w.Types, pages)
			var ae *APIError
			if first && after != "" && after == w.After.ID && errors.As(err, &ae) &&
				(ae.Status == http.StatusNotFound || ae.Status == http.StatusBadRequest) {
				// Paddle does not take the cursor (any more): start again
				// from Since, or from the oldest event it keeps.
				after, first = "", false
				if !w.Since.IsZero() {
					if after, err = a.boundary(ctx, w); err != nil {
						yield(reconcile.Listed{}, err)
						return
					}
				}
				pages = reconcile.NewPages(ctx)
				continue
			}
			first = false
			if err != nil {
				yield(reconcile.Listed{}, err)
				return
			}
			for _, ev := range evs {
				if !w.Until.IsZero() && ev.At.After(w.Until) {
					return
				}
				if !yield(ev, nil) {
					return
				}
			}
			if !more || len(evs) == 0 {
				return
			}
			after = evs[len(evs)-1].ID
		}
	}
}

// boundary finds where a listing from w.Since starts: the newest event
// that occurred before it, listing newest first ("": every event Paddle
// keeps is within the window).
func (a *API) boundary(ctx context.Context, w reconcile.Window) (string, error) {
	pages := reconcile.NewPages(ctx)
	after := ""
	for {
		evs, more, err := a.page(ctx, "id[DESC]", after, w.Types, pages)
		if err != nil {
			return "", err
		}
		for _, ev := range evs {
			if !ev.At.IsZero() && ev.At.Before(w.Since) {
				return ev.ID, nil
			}
		}
		if !more || len(evs) == 0 {
			return "", nil
		}
		after = evs[len(evs)-1].ID
	}
}

// page fetches one page of events in order, after an event id, following
// the listing's pages.
func (a *API) page(ctx context.Context, order, after string, types []string, pages *reconcile.Pages) ([]reconcile.Listed, bool, error) {
	if err := pages.Next("after=" + after); err != nil {
		return nil, false, fmt.Errorf("list paddle events: %w", err)
	}
	v := url.Values{}
	v.Set("order_by", order)
	v.Set("per_page", strconv.Itoa(a.pageSize))
	if after != "" {
		v.Set("after", after)
	}
	if len(types) > 0 {
		v.Set("event_type", strings.Join(types, ","))
	}
	body, err := a.Get(ctx, "/events", v)
	if err != nil {
		return nil, false, fmt.Errorf("list paddle events: %w", err)
	}
	var p struct {
		Data []json.RawMessage `json:"data"`
		Meta struct {
			Pagination *struct {
				HasMore bool `json:"has_more"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, false, fmt.Errorf("list paddle events: page: %w", err)
	}
	more := p.Meta.Pagination != nil && p.Meta.Pagination.HasMore
	evs := make([]reconcile.Listed, 0, len(p.Data))
	for i, raw := range p.Data {
		var head struct {
			EventID    string `json:"event_id"`
			EventType  string `json:"event_type"`
			OccurredAt string `json:"occurred_at"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.EventID == "" {
			return nil, false, fmt.Errorf("list paddle events: event %d of the page has no event_id", i)
		}
		ev := reconcile.Listed{ID: head.EventID, Type: head.EventType, Raw: bytes.Clone(raw)}
		if at, err := time.Parse(time.RFC3339Nano, head.OccurredAt); err == nil {
			ev.At = at
		}
		evs = append(evs, ev)
	}
	if err := pages.Got(len(evs), more); err != nil {
		return nil, false, fmt.Errorf("list paddle events: %w", err)
	}
	return evs, more, nil
}
