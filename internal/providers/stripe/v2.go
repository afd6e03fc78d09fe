package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// V2APIVersion is the Stripe-Version of every request of the receiver's
// to Stripe's /v2 namespace. Stripe versions /v2 objects as it versions
// /v1's, by the header (the Stripe CLI sends its dated version on /v2
// paths, and its .preview version for preview resources): the v2 Event of
// v2.core.health.event_generation_failure.resolved, a public preview, has
// its data.related_object (in place of related_object_id) from
// 2025-11-17.preview and its data.severity from 2026-11-18.preview, the
// version pinned here. A thin event's notification and a v1 object read
// for it are not affected: the former is unversioned, the latter read with
// APIVersion, as snapshot events are.
const V2APIVersion = "2026-11-18.preview"

// The /v2 reads of thin events are made here, over the same API as the
// Events listing (reconcile.API: the key to the base URL's origin only,
// retries of a GET after a 429, a 5xx or no answer, each response bounded,
// Stripe's error answer as *APIError), with V2APIVersion pinned per
// request. Not with a second Stripe SDK: stripe-go v76, which the receiver
// keeps for the shape of its events, has neither a /v2 client nor a
// thin-event parser (they arrive in v80 to v83, with another major version
// of every type the receiver reads), and a thin event needs two GETs of
// JSON, which a raw client keeps byte for byte as Stripe returned them.

// V2Event returns the v2 Event id (evt_…) as GET /v2/core/events/<id>
// returns it, byte for byte; context is the thin event's context (a
// connected account, acct_…), sent as Stripe-Context, or "" for the
// platform's own.
func (a *API) V2Event(ctx context.Context, id, context string) ([]byte, error) {
	if !stripeID(id) {
		return nil, fmt.Errorf("stripe api: event id %s", quote(id))
	}
	h := http.Header{"Stripe-Version": {V2APIVersion}}
	if context != "" {
		if !stripeContext(context) {
			return nil, fmt.Errorf("stripe api: context %s", quote(context))
		}
		h.Set("Stripe-Context", context)
	}
	body, err := a.Do(ctx, http.MethodGet, "/v2/core/events/"+url.PathEscape(id), nil, nil, h)
	if err != nil {
		return nil, fmt.Errorf("fetch v2 event %s: %w", id, err)
	}
	return body, nil
}

// Object returns a v1 object's current state as GET <path> returns it
// (path is an API path, /v1/…, as ObjectPath makes it), byte for byte, in
// APIVersion; account, when set, is the connected account (acct_…) it
// belongs to, sent as Stripe-Account.
func (a *API) Object(ctx context.Context, path, account string) ([]byte, error) {
	if !apiPath(path) {
		return nil, fmt.Errorf("stripe api: object path %s", quote(path))
	}
	body, err := a.Do(ctx, http.MethodGet, path, nil, nil, accountHeader(account))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", path, err)
	}
	return body, nil
}

// accountHeader is account's Stripe-Account header; an id that is no
// connected account's sends none (and the read is the platform's).
func accountHeader(acct string) http.Header {
	if !connectAccountID(acct) {
		return nil
	}
	return account(acct)
}

// objectPaths are the v1 paths of the objects a thin event may name that
// the receiver reads, by their object type (related_object.type).
var objectPaths = map[string]string{
	"checkout.session": "/v1/checkout/sessions/",
	"subscription":     "/v1/subscriptions/",
	"invoice":          "/v1/invoices/",
	"charge":           "/v1/charges/",
	"refund":           "/v1/refunds/",
	"dispute":          "/v1/disputes/",
	"customer":         "/v1/customers/",
}

// ObjectPath is the API path of an object a thin event names: its url
// when that is a plain /v1 path (as Stripe gives it: /v1/checkout/sessions/
// cs_…), else the path of its type and id; "" for a type the receiver does
// not read, or an id that is not one.
func ObjectPath(typ, id, u string) string {
	prefix, known := objectPaths[typ]
	if !known || !stripeID(id) {
		return ""
	}
	if apiPath(u) && strings.HasSuffix(u, "/"+id) {
		return u
	}
	return prefix + id
}

// notFound reports whether err is Stripe's 404 (resource_missing): asking
// again does not help.
func notFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// stripeID reports whether id looks like a Stripe id: letters, digits and
// underscores, at most 255 of them.
func stripeID(id string) bool {
	if id == "" || len(id) > 255 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// stripeContext reports whether c is a Stripe-Context: account ids
// separated by slashes.
func stripeContext(c string) bool {
	for _, part := range strings.Split(c, "/") {
		if !stripeID(part) {
			return false
		}
	}
	return len(c) <= 512
}

// apiPath reports whether p is a plain /v1 path: segments of letters,
// digits, underscores and dots, none of them "." or "..", no query.
func apiPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/v1/")
	if !ok || len(p) > 512 {
		return false
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
				return false
			}
		}
	}
	return true
}
