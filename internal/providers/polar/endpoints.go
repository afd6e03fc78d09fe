package polar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// What the endpoint check relies on of Polar's webhook endpoints API
// (polarsource/polar, server/polar/webhook/endpoints.py and schemas.py):
//
//   - GET /v1/webhooks/endpoints, `page` (from 1) and `limit` (at most
//     100): `{"items": [...], "pagination": {"total_count", "max_page"}}`;
//     the token needs webhooks:read. An endpoint is `{"id" (a UUID),
//     "url", "name", "format": "raw"|"discord"|"slack", "secret",
//     "organization_id", "events": [...], "enabled", "created_at",
//     "modified_at"}`. The listing carries each endpoint's signing secret:
//     it is never kept, printed nor logged.
//   - PATCH /v1/webhooks/endpoints/{id} takes `url`, `name`, `format`,
//     `events` (the whole list) and `enabled`; POST /v1/webhooks/endpoints
//     takes `url`, `name`, `format` and `events` (and `organization_id`,
//     which an organization token does not need), and answers 201 with the
//     new endpoint and its `secret`. Both need webhooks:write.
//   - Polar has no API versions per endpoint, and disables an endpoint
//     after 10 consecutive failed deliveries, skipping its events until it
//     is enabled again.

// WebhookEndpoint is a webhook endpoint as Polar's API shows it, without
// its secret.
type WebhookEndpoint struct {
	ID      string   `json:"id"`
	URL     string   `json:"url"`
	Format  string   `json:"format"` // raw, discord, slack
	Events  []string `json:"events"`
	Enabled bool     `json:"enabled"`
}

// WebhookEndpoints lists every webhook endpoint the token can read,
// following the pages within the run's bounds (endpoints.List).
func (a *API) WebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	list, err := endpoints.List(ctx, func(we WebhookEndpoint) string { return we.ID },
		func(cursor string) ([]WebhookEndpoint, bool, string, error) {
			page := 1 // the cursor is the page's number, from 1
			if cursor != "" {
				page, _ = strconv.Atoi(cursor)
			}
			body, err := a.Get(ctx, "/v1/webhooks/endpoints", url.Values{"page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(a.pageSize)}})
			if err != nil {
				return nil, false, "", err
			}
			var p struct {
				Items      []WebhookEndpoint `json:"items"`
				Pagination struct {
					MaxPage int `json:"max_page"`
				} `json:"pagination"`
			}
			if err := json.Unmarshal(body, &p); err != nil {
				return nil, false, "", fmt.Errorf("page: %w", err)
			}
			return p.Items, page < p.Pagination.MaxPage && len(p.Items) > 0, strconv.Itoa(page + 1), nil
		})
	if err != nil {
		return nil, fmt.Errorf("list polar webhook endpoints: %w", err)
	}
	return list, nil
}

// UpdateWebhookEndpoint enables the endpoint id when enable is set, and
// subscribes it to events (the whole list) when events is not nil.
func (a *API) UpdateWebhookEndpoint(ctx context.Context, id string, events []string, enable bool) (WebhookEndpoint, error) {
	if err := endpoints.ValidID(id); err != nil {
		return WebhookEndpoint{}, fmt.Errorf("update polar webhook endpoint: %w", err)
	}
	u := map[string]any{}
	if enable {
		u["enabled"] = true
	}
	if events != nil {
		u["events"] = events
	}
	we, _, err := a.sendEndpoint(ctx, http.MethodPatch, "/v1/webhooks/endpoints/"+url.PathEscape(id), u)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("update polar webhook endpoint %s: %w", id, err)
	}
	return we, nil
}

// CreateWebhookEndpoint creates an endpoint that sends the events of types
// to u in the raw format the receiver reads, and returns it with its
// signing secret.
func (a *API) CreateWebhookEndpoint(ctx context.Context, u string, types []string) (WebhookEndpoint, string, error) {
	we, secret, err := a.sendEndpoint(ctx, http.MethodPost, "/v1/webhooks/endpoints", map[string]any{
		"url": u, "name": "paywebhooks receiver", "format": "raw", "events": types,
	})
	if err != nil {
		return WebhookEndpoint{}, "", fmt.Errorf("create polar webhook endpoint: %w", err)
	}
	return we, secret, nil
}

// sendEndpoint sends v as JSON and reads the endpoint Polar answers with,
// and its secret.
func (a *API) sendEndpoint(ctx context.Context, method, path string, v any) (WebhookEndpoint, string, error) {
	out, err := a.SendJSON(ctx, method, path, v)
	if err != nil {
		return WebhookEndpoint{}, "", err
	}
	var answer struct {
		WebhookEndpoint
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(out, &answer); err != nil || answer.ID == "" {
		return WebhookEndpoint{}, "", errors.New("the answer is not a webhook endpoint")
	}
	return answer.WebhookEndpoint, answer.Secret, nil
}

// Endpoints is Polar's endpoint settings, for `server endpoints check` and
// the periodic check: the webhook endpoints POLAR_API_KEY reads (it needs
// webhooks:read, and webhooks:write for --fix and --create). Beside the
// check's own findings, an endpoint whose format is not raw (a Discord or
// Slack message instead of the event) is one, and so is this receiver's
// endpoint when POLAR_WEBHOOK_ENDPOINT_ID names another (the catch-up
// would read another endpoint's deliveries).
var Endpoints = endpoints.Provider{
	Source:       Source,
	Where:        "Polar > Settings > Webhooks",
	Unconfigured: reconcile.Requires(apiKey.Name),
	New: func(e endpoints.Env) (endpoints.Client, error) {
		api, err := NewAPI(APIConfig{Token: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name),
			HTTPClient: e.HTTPClient, PageSize: e.PageSize})
		if err != nil {
			return nil, err
		}
		w := webhookEndpoints{api: api, reconciled: e.Settings.Env(endpointID.Name)}
		return endpoints.ClientOf[WebhookEndpoint]{List: api.WebhookEndpoints, Read: w.endpoint, Apply: w.apply, Add: w.add}, nil
	},
}

// webhookEndpoints are Polar's calls for the check (endpoints.ClientOf).
type webhookEndpoints struct {
	api        *API
	reconciled string // POLAR_WEBHOOK_ENDPOINT_ID
}

// endpoint is we as the check reads it.
func (w webhookEndpoints) endpoint(we WebhookEndpoint) endpoints.Endpoint {
	ep := endpoints.Endpoint{ID: we.ID, URL: we.URL, Enabled: we.Enabled, Events: we.Events,
		Status: "enabled false: Polar disables an endpoint after 10 failed deliveries in a row, and skips its events " +
			"until it is enabled; redeliver them from Polar > Settings > Webhooks"}
	if we.Format != "raw" {
		ep.Problems = append(ep.Problems, endpoints.Problem{Kind: "format", Text: fmt.Sprintf(
			"sends in the %s format, a chat message the receiver cannot read, not the event: set its format to raw "+
				"at Polar > Settings > Webhooks", webhooks.Quote(we.Format, 64))})
	}
	if w.reconciled != "" && w.reconciled != we.ID {
		ep.Problems = append(ep.Problems, endpoints.Problem{Kind: "catch_up", Text: fmt.Sprintf(
			"is not the endpoint %s names (%s): server reconcile polar reads another endpoint's deliveries; set it to this one's id",
			endpointID.Name, webhooks.Quote(w.reconciled, 64))})
	}
	return ep
}

// apply makes the changes of ch (endpoints.Updater).
func (w webhookEndpoints) apply(ctx context.Context, ep endpoints.Endpoint, ch endpoints.Change) (WebhookEndpoint, error) {
	return w.api.UpdateWebhookEndpoint(ctx, ep.ID, ch.Events, ch.Enable)
}

// add creates an endpoint (endpoints.Creator); Polar's have no version.
func (w webhookEndpoints) add(ctx context.Context, u string, types []string, _ string) (WebhookEndpoint, string, error) {
	return w.api.CreateWebhookEndpoint(ctx, u, types)
}
