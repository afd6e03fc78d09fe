package paddle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/paywebhooks/receiver/internal/portal"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Portal is the customer portal's line of the registry: with PADDLE_API_KEY
// set, a customer's billing-portal link (internal/portal) opens a session
// of Paddle's customer portal, POST /customers/{customer_id}/portal-sessions
// (the key needs the customer_portal_session.write permission), at its
// overview page.
var Portal = portal.Provider{Source: Source, Opener: func(s webhooks.Settings) (portal.Opener, error) {
	key := s.Env(apiKey.Name)
	if key == "" {
		return nil, nil
	}
	none := 0
	api, err := NewAPI(APIConfig{Key: key, BaseURL: s.Env(apiBase.Name), MaxRetries: &none})
	if err != nil {
		return nil, err
	}
	return portalOpener{api}, nil
}}

// portalOpener opens Paddle's customer portal (portal.Opener).
type portalOpener struct{ api *API }

// Open implements portal.Opener: a customer portal session of customer
// (ctm_…), and its overview URL. Paddle's portal has no return URL.
func (o portalOpener) Open(ctx context.Context, customer, _, _ string) (string, error) {
	if !strings.HasPrefix(customer, "ctm_") || strings.ContainsAny(customer, "/?#%") {
		return "", fmt.Errorf("paddle customer portal: customer %s", webhooks.Quote(customer, 40))
	}
	body, err := o.api.SendJSON(ctx, http.MethodPost, "/customers/"+url.PathEscape(customer)+"/portal-sessions", struct{}{})
	if err != nil {
		return "", fmt.Errorf("paddle customer portal: %w", err)
	}
	var s struct {
		Data struct {
			URLs struct {
				General struct {
					Overview string `json:"overview"`
				} `json:"general"`
			} `json:"urls"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.Data.URLs.General.Overview == "" {
		return "", fmt.Errorf("paddle customer portal: the answer has no urls.general.overview")
	}
	return s.Data.URLs.General.Overview, nil
}
