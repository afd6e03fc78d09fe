package stripe

import (
	"bytes"
	"context"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/checkout"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The buyer's return from Checkout (internal/checkout: GET
// /checkout/return?session_id=cs_…[&account=acct_…]): the session is read
// from GET /v1/checkout/sessions/<id> (with Stripe-Account for a connected
// account's session) and, when it is complete and paid, applied as a thin
// event's fetched state is (thin.go): a synthetic snapshot event planned
// by this provider's own plan, of the type recoveryType gives a paid
// session (checkout.session.async_payment_succeeded: the order is created
// paid, or a pending one moved to paid, as checkout.session.completed
// would have created it), keyed ReturnKey(id). Its stored body is that
// event, so a replay plans it again through the Stripe provider without
// reading anything. The sale's steps are the order's (internal/sales), so
// the return and the session's events share them, whichever plans them
// first.
//
// The Filter holds as for events: a session of another mode, or of a
// connected account STRIPE_CONNECT_ACCOUNTS does not list (the account is
// checked before any call), is not acted on.

// successURL is CHECKOUT_SUCCESS_URL.
var successURL = webhooks.Var{
	Name: "CHECKOUT_SUCCESS_URL",
	Doc: "where `GET /checkout/return?session_id=…` (the Checkout Session's `success_url`: " +
		"`https://<host>/checkout/return?session_id={CHECKOUT_SESSION_ID}`) sends the buyer (303) once the paid session " +
		"has become its order, confirmation and fulfillment call, as `checkout.session.completed` makes them; " +
		"`{CHECKOUT_SESSION_ID}` is replaced with the session's id. An absolute `https://` URL (`http://` to a loopback " +
		"host). Needs `STRIPE_API_KEY`, which reads the session",
	Check: checkSuccessURL,
}

// checkSuccessURL accepts an absolute https:// URL, or http:// to a
// loopback host, with the placeholder anywhere.
func checkSuccessURL(v string) error {
	u, err := url.Parse(strings.ReplaceAll(v, checkout.Placeholder, "cs_test_x"))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return errors.New("must be an absolute https:// URL (the app's success page)")
	}
	if u.Scheme == "http" && reconcile.CheckAPIBase(u.Scheme+"://"+u.Host) != nil {
		return errors.New("must be https:// (http:// only to a loopback host)")
	}
	return nil
}

// ReturnKey is the claim key, and the id of the synthetic event, of the
// return of the Checkout Session id: every row of the return contains the
// session id.
func ReturnKey(sessionID string) string { return "checkout_return:" + sessionID }

// Bounds of a return's read of its session, retries included: the buyer is
// redirected within ReturnReadTimeout of a failing or hanging API.
const (
	ReturnReadTimeout  = 3 * time.Second
	returnReadRequests = 2
	returnReadBody     = 1 << 20
)

// Checkout is the checkout return's line of the registry.
var Checkout = checkout.Provider{Source: Source, Setup: func(s webhooks.Settings) (checkout.Sessions, string, string, error) {
	success := s.Env(successURL.Name)
	if success == "" {
		return nil, "", "", nil
	}
	key := s.Env(apiKey.Name)
	if key == "" {
		return nil, "", successURL.Name + " is set but " + apiKey.Name + " is not: the session cannot be read", nil
	}
	filter, _, err := FilterOf(s.Env)
	if err != nil {
		return nil, "", "", err
	}
	retries := int64(1)
	api, err := NewAPI(APIConfig{Key: key, BaseURL: s.Env(apiBase.Name), MaxNetworkRetries: &retries})
	if err != nil {
		return nil, "", "", err
	}
	return NewReturns(api, WithFilter(filter), WithNotifyEmail(s.NotifyEmail)), success, "", nil
}}

// Returns reads Checkout Sessions for the return (checkout.Sessions).
type Returns struct {
	api  *API
	snap *Provider
	now  func() time.Time
}

// NewReturns returns the sessions read with api, acted on as the Stripe
// provider built with opts acts (its Filter).
func NewReturns(api *API, opts ...Option) *Returns {
	return &Returns{api: api, snap: New(nil, opts...), now: time.Now}
}

// Valid implements checkout.Sessions: a Checkout Session id (cs_…) and, if
// named, a connected account id.
func (r *Returns) Valid(id, account string) bool {
	return strings.HasPrefix(id, "cs_") && len(id) > len("cs_") && stripeID(id) && (account == "" || connectAccountID(account))
}

// Provider implements checkout.Sessions: the Stripe provider.
func (r *Returns) Provider() webhooks.Provider { return r.snap }

// OrderSource implements checkout.Sessions.
func (r *Returns) OrderSource() string { return Source }

// session is what Read reads of a Checkout Session besides objectState.
type sessionHead struct {
	ID       text `json:"id"`
	Object   text `json:"object"`
	Livemode flag `json:"livemode"`
}

// Read implements checkout.Sessions.
func (r *Returns) Read(ctx context.Context, id, account string) (webhooks.Event, checkout.Skip, error) {
	if account != "" && r.snap.filter.ignores(&envelope{eventHead: eventHead{Account: text(account),
		Livemode: flag(r.snap.filter.Livemode != nil && *r.snap.filter.Livemode)}}) != "" {
		return webhooks.Event{}, checkout.SkipIgnored, nil
	}
	ctx, done := reconcile.Bound(ctx, reconcile.Limits{Timeout: ReturnReadTimeout, MaxRequests: returnReadRequests,
		MaxBody: returnReadBody})
	defer done()
	fetchedAt := r.now().UTC().Truncate(time.Second)
	b, err := r.api.Object(ctx, "/v1/checkout/sessions/"+id, account)
	switch {
	case notFound(err):
		return webhooks.Event{}, checkout.SkipUnknown, nil
	case err != nil:
		return webhooks.Event{}, "", reconcile.Cause(ctx, err)
	}
	state := jsontext.Value(bytes.TrimSpace(b))
	var head sessionHead
	var s objectState
	if state.Kind() != '{' || !webhooks.ValidSigned(state) || webhooks.UnmarshalSigned(state, &head) != nil ||
		webhooks.UnmarshalSigned(state, &s) != nil {
		return webhooks.Event{}, "", fmt.Errorf("GET /v1/checkout/sessions/%s: the answer is not a Checkout Session", id)
	}
	if head.ID != text(id) || (head.Object != "" && head.Object != "checkout.session") {
		return webhooks.Event{}, "", fmt.Errorf("GET /v1/checkout/sessions/%s: stripe's API returned %s %s", id,
			quote(string(head.Object)), quote(string(head.ID)))
	}
	if r.snap.filter.ignores(&envelope{eventHead: eventHead{Livemode: head.Livemode, Account: text(account)}}) != "" {
		return webhooks.Event{}, checkout.SkipIgnored, nil
	}
	typ, _ := recoveryType("checkout.session", "", s)
	if typ != "checkout.session.async_payment_succeeded" {
		return webhooks.Event{}, checkout.SkipUnpaid, nil
	}
	ev, err := synthetic(ReturnKey(id), typ, head.Livemode, account, fetchedAt, state)
	if err != nil {
		return webhooks.Event{}, "", fmt.Errorf("checkout session %s: %w", id, err)
	}
	ev.Via = webhooks.ViaCheckoutReturn
	return ev, "", nil
}
