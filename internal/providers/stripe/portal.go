package stripe

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

// Portal is the billing portal's line of the registry: with STRIPE_API_KEY
// set, a customer's billing-portal link (internal/portal) opens a session
// of Stripe's customer portal, POST /v1/billing_portal/sessions (the key
// needs Customer portal write access; the portal's configuration is the
// account's default, set up in the Dashboard).
var Portal = portal.Provider{Source: Source, Opener: func(s webhooks.Settings) (portal.Opener, error) {
	key := s.Env(apiKey.Name)
	if key == "" {
		return nil, nil
	}
	retries := int64(0)
	api, err := NewAPI(APIConfig{Key: key, BaseURL: s.Env(apiBase.Name), MaxNetworkRetries: &retries})
	if err != nil {
		return nil, err
	}
	return portalOpener{api}, nil
}}

// portalOpener opens Stripe's billing portal (portal.Opener).
type portalOpener struct{ api *API }

// Open implements portal.Opener: a billing portal session of customer
// (cus_…; of account, a connected account, when set) that returns to
// returnURL ("": the portal configuration's default), and its url.
func (o portalOpener) Open(ctx context.Context, customer, account, returnURL string) (string, error) {
	if !strings.HasPrefix(customer, "cus_") || !stripeID(customer) || (account != "" && !connectAccountID(account)) {
		return "", fmt.Errorf("stripe billing portal: customer %s", quote(customer))
	}
	form := url.Values{"customer": {customer}}
	if returnURL != "" {
		form.Set("return_url", returnURL)
	}
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	if account != "" {
		h.Set("Stripe-Account", account)
	}
	body, err := o.api.Do(ctx, http.MethodPost, "/v1/billing_portal/sessions", nil, []byte(form.Encode()), h)
	if err != nil {
		return "", fmt.Errorf("stripe billing portal: %w", err)
	}
	var s struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.URL == "" {
		return "", fmt.Errorf("stripe billing portal: the answer has no url")
	}
	return s.URL, nil
}
