// Package fulfillment is the client for the fulfillment API, the external
// HTTP service that ships what was paid for.
//
// The contract: POST {base URL}/fulfillments with a JSON Request body and an
// Idempotency-Key header that is the same on every attempt of the same step
// of the same event (see IdempotencyKey). A 2xx or 409 (already fulfilled
// under that key) means done; 408, 429 and 5xx are transient; any other 4xx
// is permanent. Timeouts and connection errors are transient.
//
// With a key (FULFILLMENT_SECRET), every call is also signed the Standard
// Webhooks way (internal/standardwebhooks), so that the API can tell the
// receiver's calls from anybody's with any Standard Webhooks library:
// webhook-id is the call's Idempotency-Key, webhook-timestamp the time of
// the attempt in Unix seconds, and webhook-signature "v1," followed by the
// standard base64 of the HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.
// <body>". A retry is signed anew, with its own timestamp.
//
// Client.Fulfill makes exactly one attempt and honours the context deadline;
// retrying is the caller's business. It never follows a redirect: a 3xx is
// the answer, a *StatusError (not permanent: the redriver tries again, and
// parks the step once its attempts run out). Followed, a 301, 302 or 303
// would turn the POST into a GET whose 2xx would count as done, and a 307
// or 308 would hand the body and its Idempotency-Key (and the signature
// headers) to whatever host the Location names.
package fulfillment

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/telemetry"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Request is the body of POST /fulfillments.
type Request struct {
	OrderID       int64  `json:"order_id"`
	Source        string `json:"source"`      // the order's source (orders.source)
	ExternalID    string `json:"external_id"` // the provider's id of the payment
	AmountCents   int64  `json:"amount_cents"`
	Currency      string `json:"currency"`
	CustomerEmail string `json:"customer_email"`
	// AccountID is the Stripe connected account (acct_…) whose sale the
	// order is; null for the platform's own sales and for the providers
	// that have no accounts.
	AccountID *string `json:"account_id"`
	// Livemode is the mode of the event that made the order (Stripe's
	// livemode); null where the provider does not say (GitHub, Paddle,
	// Polar), and for an order whose step was planned before the receiver
	// recorded it.
	Livemode *bool `json:"livemode"`
}

// Client calls the fulfillment API. The zero HTTP means http.DefaultClient's
// transport. It never follows a redirect, whatever HTTP's CheckRedirect.
type Client struct {
	BaseURL string // e.g. "https://fulfillment.internal"; a trailing slash is ignored
	HTTP    *http.Client
	// Key is the Standard Webhooks key every call is signed with (the key
	// of FULFILLMENT_SECRET, standardwebhooks.ParseSecret); nil sends the
	// calls unsigned.
	Key []byte

	timeout time.Duration // the backstop when ctx has no deadline; 0: none
}

// ParseSecret reads FULFILLMENT_SECRET, a Standard Webhooks secret
// ("whsec_" and the standard base64 of the key), into the key every call
// is signed with: 24 to 64 bytes, as the spec bounds a key. Its error
// follows the variable's name ("is …", "has a key of …"), says how to make
// a secret, and never quotes this one.
func ParseSecret(secret string) ([]byte, error) {
	const makeOne = `(make one with: echo "whsec_$(openssl rand -base64 32)")`
	key, err := standardwebhooks.ParseSecret(secret)
	switch {
	case err != nil:
		return nil, fmt.Errorf("is %v %s", err, makeOne)
	case len(key) < standardwebhooks.MinKeyLen || len(key) > standardwebhooks.MaxKeyLen:
		return nil, fmt.Errorf("has a key of %d bytes; Standard Webhooks keys are %d to %d %s",
			len(key), standardwebhooks.MinKeyLen, standardwebhooks.MaxKeyLen, makeOne)
	}
	return key, nil
}

// MaskKey is what may be shown of a signing key (start-up's log, the
// receiver's fingerprint): the secret's prefix; "" without a key.
func MaskKey(key []byte) string {
	if key == nil {
		return ""
	}
	return standardwebhooks.SecretPrefix + "****"
}

// New returns a Client for baseURL whose calls are bounded by 30 s when
// the caller's ctx has no earlier deadline, as a backstop; callers should
// still pass a ctx with a deadline. (The bound is the context's, not
// http.Client.Timeout: with a transport other than *http.Transport, as the
// traced one is, Timeout costs a goroutine and a timer per call.)
//
// Its transport keeps up to 64 idle connections to the API: steps of many
// deliveries run at once, and Go's default of 2 idle connections per host
// would open a new connection for most calls. While tracing is on, each
// call is a client span ("POST /fulfillments") of the step that makes it,
// and its traceparent header carries the trace to the API.
func New(baseURL string) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 128
	t.MaxIdleConnsPerHost = 64
	return &Client{BaseURL: baseURL, HTTP: &http.Client{Transport: telemetry.Transport(t), CheckRedirect: refuseRedirect},
		timeout: 30 * time.Second}
}

// refuseRedirect is every Client's redirect policy (http.Client's
// CheckRedirect): the redirect itself is the answer.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxErrorBody bounds how much of a response body is read into a StatusError.
const maxErrorBody = 512

// StatusError is a reply with an unexpected status.
type StatusError struct {
	Code int
	Body string // the start of the response body, at most maxErrorBody bytes
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("fulfillment: status %d", e.Code)
	}
	return fmt.Sprintf("fulfillment: status %d: %s", e.Code, e.Body)
}

// Permanent reports whether sending the same request again cannot succeed:
// true for 4xx other than 408 (timeout), 409 (never an error) and 429 (rate
// limited); false for 5xx and anything else.
func (e *StatusError) Permanent() bool {
	switch e.Code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return e.Code >= 400 && e.Code < 500
}

// invalidError is a request the client refuses to send; it is permanent.
type invalidError struct{ msg string }

func (e *invalidError) Error() string   { return "fulfillment: " + e.msg }
func (e *invalidError) Permanent() bool { return true }

// IdempotencyKey returns the Idempotency-Key for one step of one event, such
// as stepKey "evt_123/fulfil": "fulfil-" + the first 40 hex digits of
// SHA-256(stepKey). It is the same on every attempt of that step and differs
// for every other step or event. Hashing rather than sending the step key
// keeps the header a fixed-size token whatever characters the step key
// holds, and does not reveal internal identifiers to the external service.
func IdempotencyKey(stepKey string) string {
	sum := sha256.Sum256([]byte(stepKey))
	return "fulfil-" + hex.EncodeToString(sum[:])[:40]
}

// Fulfill asks the API to fulfil r, once. It returns nil when the API answers
// 2xx or 409, a *StatusError for any other status, and a wrapped transport
// error (transient) when there is no answer, including when ctx ends first.
func (c *Client) Fulfill(ctx context.Context, idempotencyKey string, r Request) error {
	body, err := json.Marshal(r)
	if err != nil {
		return &invalidError{msg: err.Error()}
	}
	return c.Post(ctx, "/fulfillments", idempotencyKey, body)
}

// Post sends body (JSON) to path below the base URL, once, as Fulfill
// sends its request: the same headers, signature, answers and errors. The
// other calls of the API (POST /entitlements) go through it.
func (c *Client) Post(ctx context.Context, path, idempotencyKey string, body []byte) error {
	if idempotencyKey == "" || strings.ContainsAny(idempotencyKey, "\r\n") {
		return &invalidError{msg: fmt.Sprintf("invalid idempotency key %q", idempotencyKey)}
	}
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	url := strings.TrimRight(c.BaseURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &invalidError{msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	if c.Key != nil {
		for k, v := range standardwebhooks.Headers(idempotencyKey, time.Now(), body, c.Key) {
			req.Header[k] = v
		}
	}

	hc := http.Client{CheckRedirect: refuseRedirect}
	if c.HTTP != nil {
		hc = *c.HTTP
		hc.CheckRedirect = refuseRedirect // whatever the caller's client says
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fulfillment: %w", err) // *url.Error: method, URL and cause
	}
	defer resp.Body.Close()

	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusConflict {
		webhooks.Answered(ctx, resp.StatusCode)
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody)) // the status is what matters
	return &StatusError{
		Code: resp.StatusCode,
		Body: strings.TrimSpace(strings.ToValidUTF8(string(snippet), string(utf8.RuneError))),
	}
}
