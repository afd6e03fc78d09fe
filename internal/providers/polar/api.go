package polar

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// What this client relies on of Polar's API (polarsource/polar,
// server/polar/webhook/endpoints.py, schemas.py and service.py, and
// server/polar/kit/pagination.py):
//
//   - GET {base}/v1/webhooks/deliveries ("List Webhook Deliveries":
//     "Deliveries are all the attempts to deliver a webhook event to an
//     endpoint"), authenticated with `Authorization: Bearer <organization
//     access token>` whose scopes include webhooks:read; the base is
//     https://api.polar.sh, or https://sandbox-api.polar.sh for the
//     sandbox.
//   - Query: `endpoint_id` (the webhook endpoint's UUID), `start_timestamp`
//     and `end_timestamp` (ISO 8601 with a zone: deliveries created after
//     and before), `page` (from 1) and `limit` (at most 100). Deliveries
//     are listed newest first (created_at descending).
//   - Response: `{"items": [delivery…], "pagination": {"total_count",
//     "max_page"}}`; an error has a 4xx or 5xx status and
//     `{"error", "detail"}`.
//   - A delivery is `{"id", "created_at", "succeeded", "http_code",
//     "response", "webhook_event": {"id", "created_at", "type", "payload",
//     "succeeded", "skipped", "is_archived", …}}`. The webhook event's id is
//     the webhook-id of every delivery of it, and its payload is the body
//     every delivery sent, as a string (server/polar/webhook/tasks.py posts
//     event.payload and signs it); Polar archives events after 90 days
//     (WEBHOOK_EVENT_RETENTION_PERIOD), and then payload is null.
//   - What this listing cannot show: an event Polar never tried to deliver.
//     When Polar disables an endpoint after 10 failed events in a row, it
//     marks the endpoint's pending events skipped, and sends nothing until
//     the endpoint is enabled again (Polar > Settings > Webhooks); those
//     events are redelivered from the dashboard or with POST
//     /v1/webhooks/events/{id}/redeliver.
//
// The listing asks for one endpoint's deliveries within a closed window
// (the end is always set, so that deliveries made meanwhile do not shift
// the pages), builds each page's URL itself from the configured base, and
// holds the window's events whole (reconcile.Hold), each once however
// many deliveries it had, to hand them over oldest first.

// MaxPageSize is the largest limit Polar answers (API_PAGINATION_MAX_LIMIT).
const MaxPageSize = 100

// DefaultAPIBase is Polar's API (POLAR_API_BASE's default); the sandbox's
// is https://sandbox-api.polar.sh.
const DefaultAPIBase = "https://api.polar.sh"

// APIConfig configures the Polar API client.
type APIConfig struct {
	// Token is an organization access token (POLAR_API_KEY) with the
	// webhooks:read scope.
	Token string
	// BaseURL is the API's base URL (POLAR_API_BASE); empty: Polar's.
	BaseURL string
	// Endpoint is the id of the webhook endpoint whose deliveries are
	// listed (POLAR_WEBHOOK_ENDPOINT_ID).
	Endpoint string
	// HTTPClient makes the requests; nil: reconcile.NewClient's for
	// BaseURL.
	HTTPClient *http.Client
	// PageSize is limit; 0: MaxPageSize.
	PageSize int
	// MaxRetries is how often a request that failed with 429, a 5xx or no
	// answer is tried again; nil: 2.
	MaxRetries *int
}

// API is Polar's API.
type API struct {
	*reconcile.API
	endpoint string
	pageSize int
}

// NewAPI returns a client of Polar's API.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Token == "" {
		return nil, errors.New("polar api: no access token")
	}
	api, err := reconcile.NewAPI(reconcile.APIConfig{Base: cfg.BaseURL, DefaultBase: DefaultAPIBase,
		Header:     http.Header{"Authorization": {"Bearer " + cfg.Token}, "Accept": {"application/json"}},
		HTTPClient: cfg.HTTPClient, MaxRetries: cfg.MaxRetries, Error: apiError})
	if err != nil {
		return nil, fmt.Errorf("polar api: %w", err)
	}
	a := &API{API: api, endpoint: cfg.Endpoint, pageSize: cfg.PageSize}
	if a.pageSize <= 0 || a.pageSize > MaxPageSize {
		a.pageSize = MaxPageSize
	}
	return a, nil
}

// APIError is an error answer of Polar's API.
type APIError struct {
	Status int
	Name   string // Polar's error name (Unauthorized, ResourceNotFound, …), quoted and bounded
	Detail string // quoted and bounded
}

func (e *APIError) Error() string {
	return fmt.Sprintf("polar api: status %d, %s: %s", e.Status, e.Name, e.Detail)
}

// apiError reads an error answer: {"error", "detail"}.
func apiError(status int, body []byte) error {
	var e struct {
		Error  string          `json:"error"`
		Detail json.RawMessage `json:"detail"` // a string, or FastAPI's list of validation errors
	}
	_ = json.Unmarshal(body, &e)
	return &APIError{Status: status, Name: webhooks.Quote(e.Error, 64), Detail: webhooks.Quote(string(e.Detail), 200)}
}

// List lists the webhook events of the endpoint's deliveries within the
// window w (Events), oldest first.
func (a *API) List(ctx context.Context, w reconcile.Window) iter.Seq2[reconcile.Listed, error] {
	return func(yield func(reconcile.Listed, error) bool) {
		evs, err := a.Events(ctx, w)
		if err != nil {
			yield(reconcile.Listed{}, err)
			return
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Events returns the webhook events whose deliveries were made within the
// window w (after Since, before Until, which must be set), each once,
// oldest first (by the event's creation, then its id): ID is the webhook-id
// its deliveries carried, Type as the listing says (the payload's own type
// is what counts), At when Polar created the webhook event, Raw the body
// its deliveries sent, byte for byte, or nil and Unreadable when Polar has
// archived the event.
func (a *API) Events(ctx context.Context, w reconcile.Window) ([]reconcile.Listed, error) {
	if w.Until.IsZero() {
		return nil, errors.New("list polar webhook deliveries: no end to the window")
	}
	pages, held := reconcile.NewPages(ctx), reconcile.Hold(ctx)
	seen := map[string]bool{} // deliveries
	byID := map[string]int{}  // events, by webhook event id: their position in out
	var out []reconcile.Listed
	for page := 1; ; page++ {
		ds, maxPage, err := a.page(ctx, w, page, pages)
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, d := range ds {
			if seen[d.ID] {
				continue
			}
			seen[d.ID] = true
			fresh++
			if _, ok := byID[d.Event.ID]; ok {
				continue
			}
			byID[d.Event.ID] = len(out)
			out = append(out, d.Event)
			if err := held.Add(1); err != nil {
				return nil, fmt.Errorf("list polar webhook deliveries: %w", err)
			}
		}
		more := page < maxPage && len(ds) > 0
		if err := pages.Got(fresh, more); err != nil {
			return nil, fmt.Errorf("list polar webhook deliveries: %w", err)
		}
		if !more {
			break
		}
	}
	slices.SortStableFunc(out, func(a, b reconcile.Listed) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// delivery is one delivery of the listing, as read.
type delivery struct {
	ID    string
	Event reconcile.Listed
}

// page fetches one page of deliveries and the listing's last page number.
func (a *API) page(ctx context.Context, q reconcile.Window, n int, pages *reconcile.Pages) ([]delivery, int, error) {
	if err := pages.Next("page=" + strconv.Itoa(n)); err != nil {
		return nil, 0, fmt.Errorf("list polar webhook deliveries: %w", err)
	}
	v := url.Values{}
	if a.endpoint != "" {
		v.Set("endpoint_id", a.endpoint)
	}
	if !q.Since.IsZero() {
		v.Set("start_timestamp", q.Since.UTC().Format(time.RFC3339Nano))
	}
	v.Set("end_timestamp", q.Until.UTC().Format(time.RFC3339Nano))
	v.Set("page", strconv.Itoa(n))
	v.Set("limit", strconv.Itoa(a.pageSize))
	body, err := a.Get(ctx, "/v1/webhooks/deliveries", v)
	if err != nil {
		return nil, 0, fmt.Errorf("list polar webhook deliveries: %w", err)
	}
	var p struct {
		Items []struct {
			ID    string `json:"id"`
			Event *struct {
				ID        string  `json:"id"`
				CreatedAt string  `json:"created_at"`
				Type      string  `json:"type"`
				Payload   *string `json:"payload"`
			} `json:"webhook_event"`
		} `json:"items"`
		Pagination *struct {
			MaxPage int `json:"max_page"`
		} `json:"pagination"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Pagination == nil {
		return nil, 0, fmt.Errorf("list polar webhook deliveries: page %d is not a listing (%v)", n, err)
	}
	out := make([]delivery, 0, len(p.Items))
	for i, it := range p.Items {
		if it.ID == "" || it.Event == nil || it.Event.ID == "" {
			return nil, 0, fmt.Errorf("list polar webhook deliveries: delivery %d of page %d has no id or webhook event", i, n)
		}
		ev := reconcile.Listed{ID: it.Event.ID, Type: it.Event.Type, Unreadable: errArchived}
		if at, err := time.Parse(time.RFC3339Nano, it.Event.CreatedAt); err == nil {
			ev.At = at
		}
		if it.Event.Payload != nil {
			ev.Raw, ev.Unreadable = []byte(*it.Event.Payload), nil
		}
		out = append(out, delivery{ID: it.ID, Event: ev})
	}
	return out, p.Pagination.MaxPage, nil
}

// errArchived is why an event whose payload Polar archived is unreadable.
var errArchived = errors.New("archived by Polar: its payload is no longer available")
