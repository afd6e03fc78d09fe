package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// RequestTimeout bounds one request of NewClient's clients, the response
// body included.
const RequestTimeout = time.Minute

// CheckAPIBase validates the base URL of a provider's API, a setting
// (STRIPE_API_BASE, GITHUB_API_URL, PADDLE_API_BASE) that the requests
// carrying its key are sent to: it must be an absolute https:// URL, or
// http:// to a loopback host (127.0.0.0/8, ::1, localhost: a local fake of
// the API), so that no key travels in clear. It carries no user or
// password.
func CheckAPIBase(v string) error {
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("must be an absolute https:// URL")
	case u.User != nil:
		return errors.New("must carry no user or password")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return errors.New("must be https:// (http:// only to a loopback host: 127.0.0.0/8, ::1, localhost), or the API key would travel in clear")
	}
	return errors.New("must be an absolute https:// URL")
}

// loopback reports whether host names this machine: localhost, or an
// address of 127.0.0.0/8 or ::1.
func loopback(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewClient returns the HTTP client for a provider's API at base (see
// CheckAPIBase, which base must pass), with the bounds every catch-up
// shares:
//
//   - It sends requests to base's origin (scheme, host and port) only, and
//     follows no redirect, within the origin or out of it: a redirect stops
//     the run (ErrRedirect) before anything is sent where it points. A
//     client that carries a credential (an API key, the GitHub App's JWT,
//     the Stripe-Account header) never hands it to another host, and never
//     in clear, whatever the API answers; a request that a transport
//     wrapping this one (ghinstallation's, which adds the credential
//     itself) sends to another origin is refused too.
//   - Within a run (Bound), it counts the requests and refuses past
//     Limits.MaxRequests (ErrTooManyRequests).
//   - Each response body is bounded by Limits.MaxBody
//     (ErrResponseTooLarge), and each request, body included, by
//     RequestTimeout.
func NewClient(base string) (*http.Client, error) {
	if err := CheckAPIBase(base); err != nil {
		return nil, fmt.Errorf("api base %s: %w", base, err)
	}
	u, _ := url.Parse(base)
	t := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{
		Transport:     &transport{next: t, origin: originOf(u)},
		CheckRedirect: checkRedirect,
		Timeout:       RequestTimeout,
	}, nil
}

// checkRedirect refuses every redirect: the providers' APIs answer where
// they are asked.
func checkRedirect(req *http.Request, _ []*http.Request) error {
	return Stop(req.Context(), fmt.Errorf("%w: to %s", ErrRedirect, originOf(req.URL)))
}

// originOf is u's scheme, host and port, the port made explicit.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return strings.ToLower(u.Scheme) + "://" + host + ":" + port
}

// transport is NewClient's: every request goes to the origin, within the
// run's budget, and every response body is bounded.
type transport struct {
	next   http.RoundTripper
	origin string
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if o := originOf(req.URL); o != t.origin {
		closeBody(req)
		return nil, Stop(ctx, fmt.Errorf("%w: a request to %s", ErrRedirect, o))
	}
	b := boundOf(ctx)
	if b != nil {
		if n := b.requests.Add(1); n > int64(b.limits.MaxRequests) {
			closeBody(req)
			return nil, Stop(ctx, fmt.Errorf("%w (%d)", ErrTooManyRequests, b.limits.MaxRequests))
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	limit := limitsOf(ctx).MaxBody
	if resp.ContentLength > limit {
		resp.Body.Close()
		return nil, Stop(ctx, fmt.Errorf("%w (%d bytes announced, at most %d)", ErrResponseTooLarge, resp.ContentLength, limit))
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, ctx: ctx, b: b, left: limit, limit: limit}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// boundedBody is a response body that fails past limit bytes, and counts
// what is read towards the run's bytes read (Hold).
type boundedBody struct {
	io.ReadCloser
	ctx   context.Context
	b     *bound
	left  int64
	limit int64
}

func (r *boundedBody) Read(p []byte) (int, error) {
	if r.left <= 0 {
		// One byte more tells a body of exactly max bytes from a longer one.
		var one [1]byte
		if n, err := r.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, Stop(r.ctx, fmt.Errorf("%w (more than %d bytes)", ErrResponseTooLarge, r.limit))
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	if r.b != nil {
		r.b.read.Add(int64(n))
	}
	return n, err
}
