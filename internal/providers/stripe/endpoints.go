package stripe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/reconcile"
)

// What the endpoint check relies on of Stripe's Webhook Endpoints API
// (docs.stripe.com/api/webhook_endpoints):
//
//   - GET /v1/webhook_endpoints lists them newest first, `limit` 1 to 100
//     (default 10), `starting_after` the last id of the page before,
//     `has_more`. An endpoint is `{"id": "we_…", "url", "status":
//     "enabled"|"disabled", "enabled_events": [...], "api_version": null
//     or "2023-10-16", "livemode", "application", "description", …}`:
//     `["*"]` is every event type (but those that need selecting by name),
//     an api_version of null sends in the account's default version, and
//     the listing shows the endpoints of the key's mode only.
//   - POST /v1/webhook_endpoints/{id} (form-encoded) takes
//     `enabled_events[]`, the whole list, and `disabled` (true or false);
//     it cannot change `api_version`.
//   - POST /v1/webhook_endpoints takes `url`, `enabled_events[]`,
//     `api_version` (the version its events are rendered in instead of
//     the account's default), `description`, `connect`; its answer carries
//     the endpoint's signing `secret`, which no later read shows. An
//     account has at most 16 endpoints.
//   - Whether an endpoint is a Connect endpoint (connect=true) is not in
//     the object: an account endpoint and a Connect endpoint to the same
//     URL are checked alike.

// WebhookEndpoint is a webhook endpoint as Stripe's API shows it.
type WebhookEndpoint struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	Status        string   `json:"status"` // enabled, disabled
	EnabledEvents []string `json:"enabled_events"`
	APIVersion    *string  `json:"api_version"` // nil: the account's default
	Livemode      bool     `json:"livemode"`
	// Secret is the signing secret, in the answer of a creation only.
	Secret string `json:"secret,omitempty"`
}

// WebhookEndpoints lists every webhook endpoint of the key's account and
// mode, following the pages within the run's bounds (endpoints.List).
func (a *API) WebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	list, err := endpoints.List(ctx, func(we WebhookEndpoint) string { return we.ID },
		func(after string) ([]WebhookEndpoint, bool, string, error) {
			q := url.Values{"limit": {strconv.FormatInt(a.pageSize, 10)}}
			if after != "" {
				q.Set("starting_after", after)
			}
			body, err := a.Get(ctx, "/v1/webhook_endpoints", q)
			if err != nil {
				return nil, false, "", err
			}
			var page struct {
				Data    []WebhookEndpoint `json:"data"`
				HasMore bool              `json:"has_more"`
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return nil, false, "", fmt.Errorf("page: %w", err)
			}
			for i := range page.Data {
				page.Data[i].Secret = "" // never kept from a listing
			}
			return page.Data, page.HasMore, "", nil
		})
	if err != nil {
		return nil, fmt.Errorf("list stripe webhook endpoints: %w", err)
	}
	return list, nil
}

// UpdateWebhookEndpoint re-enables the endpoint id when enable is set, and
// subscribes it to events (the whole list) when events is not nil.
func (a *API) UpdateWebhookEndpoint(ctx context.Context, id string, events []string, enable bool) (WebhookEndpoint, error) {
	if err := endpoints.ValidID(id); err != nil {
		return WebhookEndpoint{}, fmt.Errorf("update stripe webhook endpoint: %w", err)
	}
	form := url.Values{}
	if enable {
		form.Set("disabled", "false")
	}
	setEvents(form, events)
	we, err := a.post(ctx, "/v1/webhook_endpoints/"+url.PathEscape(id), form)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("update stripe webhook endpoint %s: %w", id, err)
	}
	return we, nil
}

// CreateWebhookEndpoint creates an endpoint of the key's account that
// sends events to u, rendered in version ("": the account's default),
// and returns it with its signing secret.
func (a *API) CreateWebhookEndpoint(ctx context.Context, u string, events []string, version string) (WebhookEndpoint, error) {
	form := url.Values{"url": {u}, "description": {"paywebhooks receiver (created by server endpoints check --create)"}}
	if version != "" {
		form.Set("api_version", version)
	}
	setEvents(form, events)
	we, err := a.post(ctx, "/v1/webhook_endpoints", form)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("create stripe webhook endpoint: %w", err)
	}
	return we, nil
}

// setEvents puts events in form as enabled_events[0], [1]…
func setEvents(form url.Values, events []string) {
	for i, t := range events {
		form.Set("enabled_events["+strconv.Itoa(i)+"]", t)
	}
}

// post sends a form with an Idempotency-Key of its own, which makes it
// safe to retry (reconcile.API.Do): a retry of this request is answered
// as the first was, and another request (a later run's) is never taken
// for it.
func (a *API) post(ctx context.Context, path string, form url.Values) (WebhookEndpoint, error) {
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	body, err := a.Do(ctx, http.MethodPost, path, nil, []byte(form.Encode()), http.Header{
		"Content-Type":    {"application/x-www-form-urlencoded"},
		"Idempotency-Key": {"paywebhooks-endpoints-" + hex.EncodeToString(key)},
	})
	if err != nil {
		return WebhookEndpoint{}, err
	}
	var we WebhookEndpoint
	if err := json.Unmarshal(body, &we); err != nil || we.ID == "" {
		return WebhookEndpoint{}, errors.New("the answer is not a webhook endpoint")
	}
	return we, nil
}

// Endpoints is Stripe's endpoint settings, for `server endpoints check`
// and the periodic check: the webhook endpoints of STRIPE_API_KEY's
// account and mode. Beside the check's own findings, an endpoint of
// another mode than the one acted on (STRIPE_LIVEMODE, else the key's) is
// one. The endpoints are pinned to APIVersion, the version the receiver
// reads (stripe-go v76's); an endpoint's version cannot be changed, so one
// of another version is replaced by an endpoint --create makes.
var Endpoints = endpoints.Provider{
	Source:       Source,
	Where:        "Stripe Dashboard > Developers > Webhooks",
	Version:      APIVersion,
	Unconfigured: reconcile.Requires(apiKey.Name),
	New: func(e endpoints.Env) (endpoints.Client, error) {
		api, err := NewAPI(APIConfig{Key: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name),
			HTTPClient: e.HTTPClient, PageSize: int64(e.PageSize)})
		if err != nil {
			return nil, err
		}
		filter, _, err := FilterOf(e.Settings.Env)
		if err != nil {
			return nil, err
		}
		w := webhookEndpoints{api: api, live: filter.Livemode}
		return endpoints.ClientOf[WebhookEndpoint]{List: api.WebhookEndpoints, Read: w.endpoint, Apply: w.apply, Add: w.add}, nil
	},
}

// ThinEndpoints is where the thin route's events are set up, for the
// first hour's list: an event destination, which Stripe's v1 API (the one
// the check reads) does not show, so no check reads it.
var ThinEndpoints = endpoints.Provider{
	Source: ThinSource,
	Where: "a Stripe event destination of payload style Thin (Workbench > Webhooks > Create an event destination), " +
		"only to take thin events; server endpoints check does not read it",
}

// webhookEndpoints are Stripe's calls for the check (endpoints.ClientOf).
type webhookEndpoints struct {
	api  *API
	live *bool // the mode acted on; nil: both
}

// endpoint is we as the check reads it.
func (w webhookEndpoints) endpoint(we WebhookEndpoint) endpoints.Endpoint {
	ep := endpoints.Endpoint{ID: we.ID, URL: we.URL, Enabled: we.Status == "enabled", Status: "status " + we.Status}
	for _, t := range we.EnabledEvents {
		if t == "*" {
			ep.All = true
			continue
		}
		ep.Events = append(ep.Events, t)
	}
	if we.APIVersion != nil {
		ep.Version = *we.APIVersion
	}
	if w.live != nil && we.Livemode != *w.live {
		ep.Problems = append(ep.Problems, endpoints.Problem{Kind: "mode", Text: fmt.Sprintf(
			"a %s-mode endpoint, and only %s-mode events are acted on (%s, else the mode of %s): every event it sends is "+
				"acknowledged and ignored", modeName(we.Livemode), modeName(*w.live), liveMode.Name, apiKey.Name)})
	}
	return ep
}

// apply makes the changes of ch (endpoints.Updater); an endpoint
// subscribed to every type ("*") stays so.
func (w webhookEndpoints) apply(ctx context.Context, ep endpoints.Endpoint, ch endpoints.Change) (WebhookEndpoint, error) {
	events := ch.Events
	if events != nil && ep.All {
		events = append([]string{"*"}, events...)
	}
	return w.api.UpdateWebhookEndpoint(ctx, ep.ID, events, ch.Enable)
}

// add creates an endpoint (endpoints.Creator); its secret is in the answer.
func (w webhookEndpoints) add(ctx context.Context, u string, types []string, version string) (WebhookEndpoint, string, error) {
	we, err := w.api.CreateWebhookEndpoint(ctx, u, types, version)
	return we, we.Secret, err
}
