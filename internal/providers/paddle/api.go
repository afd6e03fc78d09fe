package paddle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// ListedEvent is one event as Paddle's API returned it.
type ListedEvent struct {
	ID   string
	Type string
	// OccurredAt is the event's occurred_at; zero when it cannot be read
	// (such an event is in every window).
	OccurredAt time.Time
	// Raw is the event's JSON object byte for byte as it appears in the
	// API's response.
	Raw []byte
}

// Query selects the events to list.
type Query struct {
	// Since lists the events that occurred at or after it: the listing
	// starts after the newest event older than Since, found by listing
	// newest first down to it (Paddle's events API has no time filter).
	// Zero: every event Paddle keeps (90 days).
	Since time.Time
	// Until stops the listing at the first event that occurred after it
	// (ids are in creation order: every later one is younger still). Zero:
	// up to the newest.
	Until time.Time
	// After lists the events after this one (an event id), and overrides
	// Since. An id Paddle refuses (older than it keeps) is replaced by
	// Since, or by the oldest event Paddle keeps.
	After string
	// Types filters on event types (event_type).
	Types []string
}

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

// API lists events from Paddle's List Events API.
type API struct {
	base     string
	key      string
	hc       *http.Client
	pageSize int
	retries  int
}

// NewAPI returns a client of Paddle's List Events API.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Key == "" {
		return nil, errors.New("paddle api: no API key")
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultAPIBase
	}
	hc := cfg.HTTPClient
	if hc == nil {
		c, err := reconcile.NewClient(base)
		if err != nil {
			return nil, fmt.Errorf("paddle api: %w", err)
		}
		hc = c
	}
	a := &API{base: base, key: cfg.Key, hc: hc, pageSize: cfg.PageSize, retries: 2}
	if a.pageSize <= 0 || a.pageSize > MaxPageSize {
		a.pageSize = MaxPageSize
	}
	if cfg.MaxRetries != nil {
		a.retries = max(*cfg.MaxRetries, 0)
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

// Events lists the events q selects in creation order, oldest first,
// yielding each with its raw JSON; a failure is yielded once, last. It
// holds one page in memory.
func (a *API) Events(ctx context.Context, q Query) iter.Seq2[ListedEvent, error] {
	return func(yield func(ListedEvent, error) bool) {
		after := q.After
		if after == "" && !q.Since.IsZero() {
			b, err := a.boundary(ctx, q)
			if err != nil {
				yield(ListedEvent{}, err)
				return
			}
			after = b
		}
		pages := reconcile.NewPages(ctx)
		first := true
		for {
			evs, more, err := a.page(ctx, "id[ASC]", after, q.Types, pages)
			var ae *APIError
			if first && after != "" && after == q.After && errors.As(err, &ae) &&
				(ae.Status == http.StatusNotFound || ae.Status == http.StatusBadRequest) {
				// Paddle does not take the cursor (any more): start again
				// from Since, or from the oldest event it keeps.
				after, first = "", false
				if !q.Since.IsZero() {
					if after, err = a.boundary(ctx, q); err != nil {
						yield(ListedEvent{}, err)
						return
					}
				}
				pages = reconcile.NewPages(ctx)
				continue
			}
			first = false
			if err != nil {
				yield(ListedEvent{}, err)
				return
			}
			for _, ev := range evs {
				if !q.Until.IsZero() && ev.OccurredAt.After(q.Until) {
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

// boundary finds where a listing from q.Since starts: the newest event
// that occurred before it, listing newest first ("": every event Paddle
// keeps is within the window).
func (a *API) boundary(ctx context.Context, q Query) (string, error) {
	pages := reconcile.NewPages(ctx)
	after := ""
	for {
		evs, more, err := a.page(ctx, "id[DESC]", after, q.Types, pages)
		if err != nil {
			return "", err
		}
		for _, ev := range evs {
			if !ev.OccurredAt.IsZero() && ev.OccurredAt.Before(q.Since) {
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
func (a *API) page(ctx context.Context, order, after string, types []string, pages *reconcile.Pages) ([]ListedEvent, bool, error) {
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
	body, err := a.get(ctx, a.base+"/events?"+v.Encode())
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
	evs := make([]ListedEvent, 0, len(p.Data))
	for i, raw := range p.Data {
		var head struct {
			EventID    string `json:"event_id"`
			EventType  string `json:"event_type"`
			OccurredAt string `json:"occurred_at"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.EventID == "" {
			return nil, false, fmt.Errorf("list paddle events: event %d of the page has no event_id", i)
		}
		ev := ListedEvent{ID: head.EventID, Type: head.EventType, Raw: bytes.Clone(raw)}
		if at, err := time.Parse(time.RFC3339Nano, head.OccurredAt); err == nil {
			ev.OccurredAt = at
		}
		evs = append(evs, ev)
	}
	if err := pages.Got(len(evs), more); err != nil {
		return nil, false, fmt.Errorf("list paddle events: %w", err)
	}
	return evs, more, nil
}

// get fetches url with the key, trying again after 429, a 5xx or no
// answer, and returns the body of a 2xx.
func (a *API) get(ctx context.Context, u string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		body, retryAfter, err := a.getOnce(ctx, u)
		if err == nil || attempt >= a.retries || retryAfter < 0 || ctx.Err() != nil {
			return body, err
		}
		wait := max(retryAfter, time.Second<<attempt)
		t := time.NewTimer(min(wait, 30*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// getOnce makes one request. retryAfter is negative when trying again
// cannot help, else how long the API asked to wait (0: not said).
func (a *API) getOnce(ctx context.Context, u string) (body []byte, retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, -1, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Accept", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		if errors.Is(err, reconcile.ErrStopped) {
			return nil, -1, err
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, -1, err
	}
	if resp.StatusCode/100 == 2 {
		return body, 0, nil
	}
	var e struct {
		Error struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	apiErr := &APIError{Status: resp.StatusCode, Code: webhooks.Quote(e.Error.Code, 64), Detail: webhooks.Quote(e.Error.Detail, 200)}
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return nil, -1, apiErr
	}
	retryAfter = 0
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	return nil, retryAfter, apiErr
}
