package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// API is a provider's HTTP API as the receiver calls it (a listing of
// events, an object's current state, an endpoint's settings): every request
// goes to Base with the headers of Header (the credential, a pinned API
// version), over NewClient's client (the origin only, each response
// bounded, a run's requests counted), and an answer other than 2xx becomes
// the provider's own error (Error). A request that can be repeated safely
// (a GET, or a request carrying an Idempotency-Key) is tried again after a
// 429, a 5xx or no answer, Retries times, waiting what Retry-After asks or
// one, two, four… seconds, at most 30 s.
//
// A provider's client embeds one and adds what is its own: paths, query
// parameters, how a page and an error read.
type API struct {
	base    string
	header  http.Header
	hc      *http.Client
	retries int
	errorOf func(status int, body []byte) error
}

// APIConfig configures an API.
type APIConfig struct {
	// Base is the API's base URL (checked by CheckAPIBase); empty:
	// DefaultBase.
	Base, DefaultBase string
	// Header is sent with every request: the credential, Accept, a pinned
	// version. Its values are never logged.
	Header http.Header
	// HTTPClient makes the requests; nil: NewClient's for Base.
	HTTPClient *http.Client
	// MaxRetries is how often a request that can be repeated is tried
	// again; nil: 2.
	MaxRetries *int
	// Error returns the error of an answer whose status is not 2xx, from
	// its status and body; nil: an *HTTPError.
	Error func(status int, body []byte) error
}

// HTTPError is an answer other than 2xx, for an API that says nothing more.
type HTTPError struct{ Status int }

func (e *HTTPError) Error() string { return fmt.Sprintf("status %d", e.Status) }

// NewAPI returns the client of the API cfg describes.
func NewAPI(cfg APIConfig) (*API, error) {
	base := strings.TrimRight(cmp.Or(cfg.Base, cfg.DefaultBase), "/")
	hc := cfg.HTTPClient
	if hc == nil {
		c, err := NewClient(base)
		if err != nil {
			return nil, err
		}
		hc = c
	}
	a := &API{base: base, header: cfg.Header.Clone(), hc: hc, retries: 2, errorOf: cfg.Error}
	if cfg.MaxRetries != nil {
		a.retries = max(*cfg.MaxRetries, 0)
	}
	if a.errorOf == nil {
		a.errorOf = func(status int, _ []byte) error { return &HTTPError{Status: status} }
	}
	return a, nil
}

// Base is the API's base URL, without a trailing slash.
func (a *API) Base() string { return a.base }

// Get fetches path (below Base) with the query q, and returns the body of
// a 2xx answer.
func (a *API) Get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	return a.Do(ctx, http.MethodGet, path, q, nil, nil)
}

// SendJSON sends v as JSON to path (below Base) with method, and returns
// the body of a 2xx answer; as with Do, it is tried again only when it can
// be repeated safely.
func (a *API) SendJSON(ctx context.Context, method, path string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return a.Do(ctx, method, path, nil, body, http.Header{"Content-Type": {"application/json"}})
}

// Do sends a request to path (below Base) with the query q, the body (nil:
// none) and header beside the API's own, and returns the body of a 2xx
// answer. It is tried again only when it can be repeated safely: a GET, or
// a request whose header carries an Idempotency-Key.
func (a *API) Do(ctx context.Context, method, path string, q url.Values, body []byte, header http.Header) ([]byte, error) {
	u := a.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	retries := 0
	if method == http.MethodGet || header.Get("Idempotency-Key") != "" {
		retries = a.retries
	}
	for attempt := 0; ; attempt++ {
		out, retryAfter, err := a.once(ctx, method, u, body, header)
		if err == nil || attempt >= retries || retryAfter < 0 || ctx.Err() != nil {
			return out, err
		}
		wait := max(retryAfter, time.Second<<attempt)
		t := time.NewTimer(min(wait, 30*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// once makes one request. retryAfter is negative when trying again cannot
// help, else how long the API asked to wait (0: not said).
func (a *API) once(ctx context.Context, method, u string, body []byte, header http.Header) (out []byte, retryAfter time.Duration, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, -1, err
	}
	for k, vs := range a.header {
		req.Header[k] = vs
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		if errors.Is(err, ErrStopped) {
			return nil, -1, err
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	out, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, -1, err
	}
	if resp.StatusCode/100 == 2 {
		return out, 0, nil
	}
	apiErr := a.errorOf(resp.StatusCode, out)
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
		return nil, -1, apiErr
	}
	retryAfter = 0
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	return nil, retryAfter, apiErr
}
