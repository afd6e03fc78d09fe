package polar

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/paywebhooks/receiver/internal/portal"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Portal is the customer portal's line of the registry: with POLAR_API_KEY
// set, a customer's billing-portal link (internal/portal) opens a customer
// session, POST /v1/customer-sessions/ (the token needs the
// customer_sessions:write scope), at its customer_portal_url.
var Portal = portal.Provider{Source: Source, Opener: func(s webhooks.Settings) (portal.Opener, error) {
	token := s.Env(apiKey.Name)
	if token == "" {
		return nil, nil
	}
	none := 0
	api, err := NewAPI(APIConfig{Token: token, BaseURL: s.Env(apiBase.Name), MaxRetries: &none})
	if err != nil {
		return nil, err
	}
	return portalOpener{api}, nil
}}

// portalOpener opens Polar's customer portal (portal.Opener).
type portalOpener struct{ api *API }

// Open implements portal.Opener: a customer session of customer (Polar's
// customer id) that returns to returnURL when set, and its portal URL.
func (o portalOpener) Open(ctx context.Context, customer, _, returnURL string) (string, error) {
	if !webhooks.KeySafe(customer) {
		return "", fmt.Errorf("polar customer portal: customer %s", webhooks.Quote(customer, 40))
	}
	req := map[string]any{"customer_id": customer}
	if returnURL != "" {
		req["return_url"] = returnURL
	}
	body, err := o.api.SendJSON(ctx, http.MethodPost, "/v1/customer-sessions/", req)
	if err != nil {
		return "", fmt.Errorf("polar customer portal: %w", err)
	}
	var s struct {
		URL string `json:"customer_portal_url"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.URL == "" {
		return "", fmt.Errorf("polar customer portal: the answer has no customer_portal_url")
	}
	return s.URL, nil
}
