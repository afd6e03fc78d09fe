package paddle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/reconcile"
)

// What the endpoint check relies on of Paddle's notification settings API
// (developer.paddle.com/api-reference/notification-settings: list, update,
// create):
//
//   - GET /notification-settings, with `after` (an id: the settings after
//     it), `per_page` (default and at most 200), `order_by` (`id[ASC]` or
//     `id[DESC]`, the default); `{"data": [...], "meta": {"pagination":
//     {"per_page", "next", "has_more", "estimated_total"}}}`. The key
//     needs `notification_setting.read`.
//   - A setting (a "notification destination") is `{"id": "ntfset_…",
//     "description", "type": "url"|"email", "destination", "active",
//     "api_version": 1, "include_sensitive_fields", "subscribed_events":
//     [{"name", "description", "group", "available_versions"}],
//     "endpoint_secret_key", "traffic_source":
//     "platform"|"simulation"|"all"}`. The listing carries each
//     destination's secret key: it is never kept, printed nor logged.
//   - PATCH /notification-settings/{id} takes `active`, `api_version` and
//     `subscribed_events` (the whole list of names: a type left out is
//     unsubscribed); POST /notification-settings takes `description`,
//     `type`, `destination`, `api_version`, `subscribed_events`,
//     `traffic_source`, and answers with the new destination and its
//     `endpoint_secret_key`. Both need `notification_setting.write`. At
//     most 10 destinations are active at once.

// NotificationAPIVersion is the version of Paddle's API the receiver reads
// notifications in (Paddle Billing's only one, 1): a destination in
// another is a finding, which --fix corrects.
const NotificationAPIVersion = 1

// NotificationSetting is a notification destination as Paddle's API shows
// it, without its secret key.
type NotificationSetting struct {
	ID               string `json:"id"`
	Type             string `json:"type"` // url, email
	Destination      string `json:"destination"`
	Active           bool   `json:"active"`
	APIVersion       int    `json:"api_version"`
	TrafficSource    string `json:"traffic_source"` // platform, simulation, all
	SubscribedEvents []struct {
		Name string `json:"name"`
	} `json:"subscribed_events"`
}

// Events are the names of the types it is subscribed to.
func (n NotificationSetting) Events() []string {
	out := make([]string, len(n.SubscribedEvents))
	for i, e := range n.SubscribedEvents {
		out[i] = e.Name
	}
	return out
}

// NotificationSettings lists every notification destination, oldest
// first, following the pages within the run's bounds (endpoints.List).
func (a *API) NotificationSettings(ctx context.Context) ([]NotificationSetting, error) {
	list, err := endpoints.List(ctx, func(n NotificationSetting) string { return n.ID },
		func(after string) ([]NotificationSetting, bool, string, error) {
			q := url.Values{"per_page": {strconv.Itoa(a.pageSize)}, "order_by": {"id[ASC]"}}
			if after != "" {
				q.Set("after", after)
			}
			body, err := a.Get(ctx, "/notification-settings", q)
			if err != nil {
				return nil, false, "", err
			}
			var page struct {
				Data []NotificationSetting `json:"data"`
				Meta struct {
					Pagination *struct {
						HasMore bool `json:"has_more"`
					} `json:"pagination"`
				} `json:"meta"`
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return nil, false, "", fmt.Errorf("page: %w", err)
			}
			more := page.Meta.Pagination != nil && page.Meta.Pagination.HasMore
			return page.Data, more, "", nil
		})
	if err != nil {
		return nil, fmt.Errorf("list paddle notification settings: %w", err)
	}
	return list, nil
}

// NotificationSettingUpdate is what UpdateNotificationSetting changes; a
// nil field is left as it is.
type NotificationSettingUpdate struct {
	Active           *bool    `json:"active,omitempty"`
	APIVersion       *int     `json:"api_version,omitempty"`
	SubscribedEvents []string `json:"subscribed_events,omitempty"`
}

// UpdateNotificationSetting changes the destination id.
func (a *API) UpdateNotificationSetting(ctx context.Context, id string, u NotificationSettingUpdate) (NotificationSetting, error) {
	if err := endpoints.ValidID(id); err != nil {
		return NotificationSetting{}, fmt.Errorf("update paddle notification setting: %w", err)
	}
	n, _, err := a.send(ctx, http.MethodPatch, "/notification-settings/"+url.PathEscape(id), u)
	if err != nil {
		return NotificationSetting{}, fmt.Errorf("update paddle notification setting %s: %w", id, err)
	}
	return n, nil
}

// CreateNotificationSetting creates a destination that sends the real
// (platform) events of types to u in API version, and returns it with its
// secret key.
func (a *API) CreateNotificationSetting(ctx context.Context, u string, types []string, version int) (NotificationSetting, string, error) {
	n, secret, err := a.send(ctx, http.MethodPost, "/notification-settings", map[string]any{
		"description": "paywebhooks receiver (created by server endpoints check --create)", "type": "url", "destination": u,
		"api_version": version, "subscribed_events": types, "traffic_source": "platform",
	})
	if err != nil {
		return NotificationSetting{}, "", fmt.Errorf("create paddle notification setting: %w", err)
	}
	return n, secret, nil
}

// send sends v as JSON and reads the destination Paddle answers with, and
// its secret key.
func (a *API) send(ctx context.Context, method, path string, v any) (NotificationSetting, string, error) {
	out, err := a.SendJSON(ctx, method, path, v)
	if err != nil {
		return NotificationSetting{}, "", err
	}
	var answer struct {
		Data struct {
			NotificationSetting
			Secret string `json:"endpoint_secret_key"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &answer); err != nil || answer.Data.ID == "" {
		return NotificationSetting{}, "", errors.New("the answer is not a notification setting")
	}
	return answer.Data.NotificationSetting, answer.Data.Secret, nil
}

// Endpoints is Paddle's endpoint settings, for `server endpoints check`
// and the periodic check: the notification destinations PADDLE_API_KEY
// reads (it needs notification_setting.read, and .write for --fix and
// --create). Beside the check's own findings, a destination that receives
// simulated events only (traffic_source simulation) is one.
var Endpoints = endpoints.Provider{
	Source:         Source,
	Where:          "Paddle > Developer tools > Notifications",
	Version:        strconv.Itoa(NotificationAPIVersion),
	UpdatesVersion: true,
	Unconfigured:   reconcile.Requires(apiKey.Name),
	New: func(e endpoints.Env) (endpoints.Client, error) {
		api, err := NewAPI(APIConfig{Key: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name),
			HTTPClient: e.HTTPClient, PageSize: e.PageSize})
		if err != nil {
			return nil, err
		}
		d := destinations{api}
		return endpoints.ClientOf[NotificationSetting]{List: d.list, Read: endpoint, Apply: d.apply, Add: d.add}, nil
	},
}

// destinations are Paddle's calls for the check (endpoints.ClientOf).
type destinations struct{ api *API }

// list lists the url destinations (an email one sends to no URL).
func (d destinations) list(ctx context.Context) ([]NotificationSetting, error) {
	list, err := d.api.NotificationSettings(ctx)
	return slices.DeleteFunc(list, func(n NotificationSetting) bool { return n.Type != "url" }), err
}

// endpoint is n as the check reads it.
func endpoint(n NotificationSetting) endpoints.Endpoint {
	ep := endpoints.Endpoint{ID: n.ID, URL: n.Destination, Enabled: n.Active, Status: "active false",
		Events: n.Events(), Version: strconv.Itoa(n.APIVersion)}
	if n.TrafficSource == "simulation" {
		ep.Problems = append(ep.Problems, endpoints.Problem{Kind: "traffic", Text: "receives simulated events only " +
			"(traffic_source simulation), none of the real ones: set it to platform at Paddle > Developer tools > Notifications"})
	}
	return ep
}

// apply makes the changes of ch (endpoints.Updater).
func (d destinations) apply(ctx context.Context, ep endpoints.Endpoint, ch endpoints.Change) (NotificationSetting, error) {
	var u NotificationSettingUpdate
	if ch.Enable {
		on := true
		u.Active = &on
	}
	u.SubscribedEvents = ch.Events
	if ch.Version != "" {
		v, err := strconv.Atoi(ch.Version)
		if err != nil {
			return NotificationSetting{}, fmt.Errorf("api version %q", ch.Version)
		}
		u.APIVersion = &v
	}
	return d.api.UpdateNotificationSetting(ctx, ep.ID, u)
}

// add creates a destination (endpoints.Creator).
func (d destinations) add(ctx context.Context, u string, types []string, version string) (NotificationSetting, string, error) {
	v, err := strconv.Atoi(version)
	if err != nil {
		return NotificationSetting{}, "", fmt.Errorf("api version %q", version)
	}
	return d.api.CreateNotificationSetting(ctx, u, types, v)
}
