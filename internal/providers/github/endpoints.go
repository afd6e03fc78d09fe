package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/paywebhooks/receiver/internal/endpoints"
)

// What the endpoint check relies on of GitHub's API for the App itself,
// authenticated with the App's JWT (docs.github.com/rest/apps/webhooks and
// /rest/apps/apps):
//
//   - GET /app/hook/config: the App's webhook, `{"content_type": "json"|
//     "form", "insecure_ssl": "0"|"1", "secret": "********", "url"}`.
//   - GET /app: the App, whose `events` are the events its webhook is
//     subscribed to.
//   - marketplace_purchase is sent by the webhook of the App's Marketplace
//     listing and sponsorship by the Sponsors dashboard's: neither is an
//     App event, and no API shows where either sends. The check says so,
//     and checks what the App's own webhook sends when it sends here.

// HookConfig is the App's webhook as GitHub's API shows it.
type HookConfig struct {
	URL         string
	ContentType string
	InsecureSSL bool
	// Events are the events the App is subscribed to.
	Events []string
}

// AppHook reads the App's webhook and the events it is subscribed to (a
// URL of "": the App has no webhook).
func (a *API) AppHook(ctx context.Context) (HookConfig, error) {
	cfg, resp, err := a.client.Apps.GetHookConfig(ctx)
	if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound) {
		return HookConfig{}, fmt.Errorf("read the github app's webhook: %w", err)
	}
	app, _, err := a.client.Apps.Get(ctx, "")
	if err != nil {
		return HookConfig{}, fmt.Errorf("read the github app: %w", err)
	}
	h := HookConfig{Events: app.Events}
	if cfg != nil {
		h.URL, h.ContentType, h.InsecureSSL = cfg.GetURL(), cfg.GetContentType(), cfg.GetInsecureSSL() == "1"
	}
	return h, nil
}

// Endpoints is GitHub's endpoint settings, for `server endpoints check`
// and the periodic check: the GitHub App's webhook (GITHUB_APP_ID and
// GITHUB_APP_PRIVATE_KEY). The events the receiver acts on are set up
// elsewhere (Elsewhere); the App's webhook, when it sends here, is checked
// for what it sends that nothing handles and for a TLS check turned off.
var Endpoints = endpoints.Provider{
	Source: Source,
	Where: "the Marketplace listing's webhook (marketplace_purchase) and the Sponsors dashboard's webhook (sponsorship); " +
		"ping comes with either",
	Elsewhere: "marketplace_purchase and sponsorship are sent by the Marketplace listing's webhook and the Sponsors " +
		"dashboard's, which no API shows: check by hand that they send here",
	Unconfigured: Reconciler.Unconfigured,
	New: func(e endpoints.Env) (endpoints.Client, error) {
		key, err := ReadPrivateKey(e.Settings.Env(appKey.Name))
		if err != nil {
			return nil, err
		}
		id, err := strconv.ParseInt(e.Settings.Env(appID.Name), 10, 64)
		if err != nil {
			return nil, errors.New(appID.Name + " must be the app's numeric id")
		}
		api, err := NewAPI(APIConfig{AppID: id, PrivateKey: key, BaseURL: e.Settings.Env(apiURL.Name), HTTPClient: e.HTTPClient})
		if err != nil {
			return nil, err
		}
		return appHook{api}, nil
	},
}

// appHook is GitHub's endpoints.Client: the App's webhook, its one
// endpoint ("app"), which the check only reads.
type appHook struct{ api *API }

// Endpoints implements endpoints.Client.
func (h appHook) Endpoints(ctx context.Context) ([]endpoints.Endpoint, error) {
	cfg, err := h.api.AppHook(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.URL == "" {
		return nil, nil
	}
	ep := endpoints.Endpoint{ID: "app", URL: cfg.URL, Enabled: true, Events: cfg.Events}
	if cfg.InsecureSSL {
		ep.Problems = append(ep.Problems, endpoints.Problem{Kind: "tls", Text: "does not verify this receiver's TLS " +
			"certificate (insecure_ssl 1): whoever is on the path can read its deliveries; turn SSL verification on in the App's settings"})
	}
	return []endpoints.Endpoint{ep}, nil
}
