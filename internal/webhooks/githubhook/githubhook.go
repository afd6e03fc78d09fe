// Package githubhook is the GitHub provider of the receiver: it verifies
// X-Hub-Signature-256 over the raw body with every configured secret, reads
// JSON and form-encoded deliveries alike, and writes the orders of GitHub
// Marketplace purchases and GitHub Sponsors sponsorships inside the
// transaction that holds the event's claim.
//
// A delivery's dedupe key is "<X-GitHub-Hook-ID>:<X-GitHub-Delivery>": a
// redelivery keeps its GUID, and one GUID is shared by every hook that
// receives the event, so each hook's copy is claimed once. Orders are keyed
// on the event's GUID and on their business key, so two hooks' copies of
// one purchase still make one order.
package githubhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Source is the provider's name in keys, rows and metrics.
const Source = "github"

// Headers GitHub sends with every delivery.
const (
	HeaderSignature256  = "X-Hub-Signature-256"
	HeaderSignatureSHA1 = "X-Hub-Signature"
	HeaderEvent         = "X-GitHub-Event"
	HeaderDelivery      = "X-GitHub-Delivery"
	HeaderHookID        = "X-GitHub-Hook-ID"
)

// maxIDLen bounds the delivery GUID and hook id that go into a key.
const maxIDLen = 100

// Provider verifies and applies GitHub deliveries.
type Provider struct {
	secrets []string
	notify  string
}

// New returns a provider that accepts deliveries signed with any of secrets
// (more than one while a secret is rotated). notifyEmail (NOTIFY_EMAIL)
// receives the notices that carry no customer address; empty skips them.
func New(secrets []string, notifyEmail string) *Provider {
	return &Provider{secrets: secrets, notify: notifyEmail}
}

// Source implements webhooks.Provider.
func (p *Provider) Source() string { return Source }

// Verify implements webhooks.Provider: the signature over the raw body as
// sent, then the event and delivery headers, then the content type and the
// JSON object it carries. GitHub signs no timestamp, so now is unused: the
// dedupe claims are what stop a replayed request.
func (p *Provider) Verify(h http.Header, body []byte, _ time.Time) (webhooks.Event, error) {
	matched, err := p.verifySignature(h, body)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev, err := eventHeaders(h)
	if err != nil {
		return webhooks.Event{}, err
	}
	payload, err := jsonPayload(h.Get("Content-Type"), body)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev.Body = payload
	ev.SecretIndex = matched
	return ev, nil
}

// verifySignature checks X-Hub-Signature-256 against every configured
// secret in constant time and returns the position of the one that matched.
func (p *Provider) verifySignature(h http.Header, body []byte) (int, error) {
	header := h.Get(HeaderSignature256)
	if header == "" {
		if h.Get(HeaderSignatureSHA1) != "" {
			return -1, webhooks.Reject("sha1_only", errors.New("only the legacy SHA-1 X-Hub-Signature was sent; SHA-1 is not accepted"))
		}
		return -1, webhooks.Reject("missing_signature", errors.New("no X-Hub-Signature-256 header"))
	}
	got, err := parseSignature(header)
	if err != nil {
		return -1, webhooks.Reject("invalid_header", err)
	}
	for i, secret := range p.secrets {
		if hmac.Equal(got, Sign(body, secret)) {
			return i, nil
		}
	}
	return -1, webhooks.Reject("no_valid_signature", fmt.Errorf("signature matches none of %d secrets", len(p.secrets)))
}

// parseSignature reads "sha256=<64 hex digits>".
func parseSignature(header string) ([]byte, error) {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok {
		return nil, errors.New("signature does not start with sha256=")
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil || len(sig) != sha256.Size {
		return nil, errors.New("signature is not 64 hex digits")
	}
	return sig, nil
}

// Sign is the HMAC-SHA256 of body keyed with secret, as GitHub computes it
// for X-Hub-Signature-256 (which carries it hex-encoded after "sha256=").
func Sign(body []byte, secret string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return mac.Sum(nil)
}

// eventHeaders builds the event's identity from the delivery headers.
func eventHeaders(h http.Header) (webhooks.Event, error) {
	typ := h.Get(HeaderEvent)
	if typ == "" {
		return webhooks.Event{}, webhooks.Reject("missing_event_header", errors.New("no X-GitHub-Event header"))
	}
	guid := h.Get(HeaderDelivery)
	if guid == "" {
		return webhooks.Event{}, webhooks.Reject("missing_delivery_header", errors.New("no X-GitHub-Delivery header"))
	}
	hookID := h.Get(HeaderHookID)
	if hookID == "" {
		hookID = "0"
	}
	if !keySafe(guid) || !keySafe(hookID) {
		return webhooks.Event{}, webhooks.Reject("invalid_delivery_header",
			fmt.Errorf("delivery %q or hook id %q is not up to %d letters, digits, '.', '_' or '-'", guid, hookID, maxIDLen))
	}
	return webhooks.Event{
		Source: Source,
		Key:    hookID + ":" + guid,
		ID:     guid,
		Type:   typ,
	}, nil
}

// keySafe reports whether s can go into a claim key as it was sent: no ':'
// or '/', which separate the parts of keys, and nothing an operator's LIKE
// would trip on.
func keySafe(s string) bool {
	if len(s) > maxIDLen {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}

// jsonPayload returns the JSON object a delivery carries: the body itself
// for application/json, the payload field for a form.
func jsonPayload(contentType string, body []byte) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, webhooks.Reject("unsupported_content_type", fmt.Errorf("content type %q", contentType))
	}
	var payload []byte
	switch mt {
	case "application/json":
		payload = body
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, webhooks.Reject("malformed_form", fmt.Errorf("form body: %w", err))
		}
		if !form.Has("payload") {
			return nil, webhooks.Reject("malformed_form", errors.New("form body has no payload field"))
		}
		payload = []byte(form.Get("payload"))
	default:
		return nil, webhooks.Reject("unsupported_content_type", fmt.Errorf("content type %q", mt))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return nil, webhooks.Reject("malformed_json", fmt.Errorf("payload is not a JSON object: %w", err))
	}
	if obj == nil {
		return nil, webhooks.Reject("malformed_json", errors.New("payload is null"))
	}
	return payload, nil
}
