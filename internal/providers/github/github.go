// Package github is the GitHub provider of the receiver: it verifies
// X-Hub-Signature-256 over the raw body with every configured secret, reads
// JSON and form-encoded deliveries alike, and queues the orders of GitHub
// Marketplace purchases and GitHub Sponsors sponsorships on the transaction
// that holds the event's claim.
//
// # A delivery's identity
//
// GitHub signs the body and nothing else: X-GitHub-Delivery, X-GitHub-Hook-ID
// and X-GitHub-Event can be changed at will on a captured delivery. So what
// makes a delivery one event is what was signed, and the headers only name
// it:
//
//   - The body hash (Event.BodyHash) is SHA-256 of the delivery's JSON
//     payload (the body itself, or a form's payload field), and it is unique
//     among stored events. The same signed payload is one event whatever
//     GUID, hook id or content type it arrives with: a later arrival is a
//     copy of the event first received, answered as its copies are
//     (duplicate once it is done) and storing nothing. So are GitHub's own
//     redelivery (the same GUID and body) and another hook's delivery of
//     the same event (one GUID is shared by every hook that receives it).
//   - The key is "<X-GitHub-Hook-ID>:<X-GitHub-Delivery>:<the first 16 hex
//     digits of the body hash>": the headers as sent (so that an operator
//     finds every row of a delivery with LIKE '%<guid>%'), then the body.
//     A different body can therefore never take the key of another: a
//     captured ping or push sent under a purchase's hook id and GUID before
//     the purchase is an event of its own, and the purchase, arriving
//     after it, is still claimed and acted on. (64 bits of the hash: two
//     different payloads under one hook id and GUID would have to agree
//     on them, and nobody but GitHub can sign a payload.)
//   - The order an event creates records the event's key as
//     orders.provider_event_id (unique), not the bare GUID, for the same
//     reason: a signed purchase sent under another purchase's GUID makes
//     its own order and blocks nobody's.
//
// Keys stored by earlier versions, "<hook id>:<GUID>" with a hash of the
// hook id and the raw body, are left as they are; migration 000010 gives
// their rows the body hash defined here, so a redelivery of such an event
// (a new key now) is still a copy of it. The event type must agree with
// the body, and orders only move forward (an older Marketplace or
// sponsorship event changes nothing), whatever headers a replay carries.
package github

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"hash"
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

// Spec describes the GitHub provider to the registry.
var Spec = webhooks.Spec{
	Source: Source,
	Secret: webhooks.Var{
		Name:      "GITHUB_WEBHOOK_SECRET",
		Doc:       "GitHub webhook secret (at least 16 characters, and start-up warns under 32: a random one such as `openssl rand -hex 32` prints); comma-separated while rotating",
		List:      true,
		Secret:    true,
		DevPrefix: "ghsec_dev_",
		// GitHub signs no timestamp, so a captured delivery can be tried
		// against the secret offline for as long as it likes.
		MinLen:  16,
		WarnLen: 32,
	},
	Vars:             []webhooks.Var{appID, appKey, apiURL},
	SignatureHeaders: []string{HeaderSignature256, HeaderSignatureSHA1},
	Types:            []string{"ping", "marketplace_purchase", "sponsorship"},
	// GitHub signs no timestamp: a captured delivery stays valid for ever,
	// and its body hash is what makes a replay harmless.
	// GitHub's own redelivery window is 3 days; 90 days of keys is the floor.
	Retention:    90 * 24 * time.Hour,
	Retries:      "never retries a failed delivery: catch up with server reconcile, or redeliver by hand",
	OrderSources: []string{SourceMarketplace, SourceSponsors},
	New: func(s webhooks.Settings) (webhooks.Provider, error) {
		p := New(s.Secrets, s.NotifyEmail)
		p.entitlements = s.Entitlements
		return p, nil
	},
	// GitHub signs the body only: the delivery's id and time go nowhere.
	Sign: func(in webhooks.SignInput) http.Header {
		return http.Header{
			"Content-Type":     {"application/json"},
			"User-Agent":       {"GitHub-Hookshot/test"},
			HeaderSignature256: {"sha256=" + hex.EncodeToString(Sign(in.Body, in.Secret))},
		}
	},
	Example: example,
}

// Provider verifies and plans GitHub deliveries.
type Provider struct {
	secrets []string
	notify  string
	// entitlements: ENTITLEMENTS_FILE is set, and Marketplace plans follow
	// the orders that grant entitlements.
	entitlements bool
}

// New returns a provider that accepts deliveries signed with any of secrets
// (more than one while a secret is rotated). notifyEmail (NOTIFY_EMAIL)
// receives the notices that carry no customer address; empty skips them.
func New(secrets []string, notifyEmail string) *Provider {
	return &Provider{secrets: secrets, notify: notifyEmail}
}

// Verify implements webhooks.Provider: the signature over the raw body as
// sent, then the event and delivery headers, then the content type and the
// JSON object it carries, which must be the body of the event type the
// header names. GitHub signs no timestamp, so now is unused.
func (p *Provider) Verify(h http.Header, body []byte, _ time.Time) (webhooks.Event, error) {
	matched, err := p.verifySignature(h, body)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev, hookID, err := eventHeaders(h)
	if err != nil {
		return webhooks.Event{}, err
	}
	payload, err := jsonPayload(h.Get("Content-Type"), body)
	if err != nil {
		return webhooks.Event{}, err
	}
	shape, err := agree(ev.Type, hookID, payload)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev.Body = payload
	ev.Payload = shape
	ev.BodyHash = BodyHash(payload)
	ev.Key = Key(hookID, ev.ID, ev.BodyHash)
	ev.SecretIndex = matched
	return ev, nil
}

// BodyHash is what makes a signed payload one event, whatever GUID, hook
// id or content type it arrives with: SHA-256 of the JSON payload (the
// body, or a form's payload field), as stored in processed_events.body.
func BodyHash(payload []byte) []byte {
	sum := sha256.Sum256(payload)
	return sum[:]
}

// keyHashLen is how many hex digits of the body hash end a key.
const keyHashLen = 16

// Key is the claim key of a delivery: the hook id and delivery GUID as
// sent, then the first 16 hex digits of its body hash, so that no body
// takes the key of another (see the package comment).
func Key(hookID, guid string, bodyHash []byte) string {
	return hookID + ":" + guid + ":" + hex.EncodeToString(bodyHash[:keyHashLen/2])
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
	if i := (webhooks.Signatures{got}).Match(p.secrets, func(mac hash.Hash) { mac.Write(body) }); i >= 0 {
		return i, nil
	}
	return -1, webhooks.Reject("no_valid_signature", fmt.Errorf("the signature does not match %s", webhooks.ConfiguredSecrets(len(p.secrets))))
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

// eventHeaders reads the event's type, delivery GUID and hook id from the
// delivery headers; Verify keys the event once the body is read.
func eventHeaders(h http.Header) (webhooks.Event, string, error) {
	typ := h.Get(HeaderEvent)
	if typ == "" {
		return webhooks.Event{}, "", webhooks.Reject("missing_event_header", errors.New("no X-GitHub-Event header"))
	}
	guid := h.Get(HeaderDelivery)
	if guid == "" {
		return webhooks.Event{}, "", webhooks.Reject("missing_delivery_header", errors.New("no X-GitHub-Delivery header"))
	}
	hookID := h.Get(HeaderHookID)
	if hookID == "" {
		hookID = "0"
	}
	if !keySafe(typ) || !keySafe(guid) || !keySafe(hookID) {
		return webhooks.Event{}, "", webhooks.Reject("invalid_delivery_header",
			fmt.Errorf("event %s, delivery %s or hook id %s is not up to %d letters, digits, '.', '_' or '-'",
				webhooks.Quote(typ, maxIDLen), webhooks.Quote(guid, maxIDLen), webhooks.Quote(hookID, maxIDLen), maxIDLen))
	}
	return webhooks.Event{Source: Source, ID: guid, Type: typ}, hookID, nil
}

// keySafe reports whether s can go into a claim key or a row as it was
// sent: no ':' or '/', which separate the parts of keys, and nothing an
// operator's LIKE would trip on.
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
	mt, err := webhooks.MediaType(contentType)
	if err != nil {
		return nil, webhooks.Reject("unsupported_content_type", fmt.Errorf("content type %s", webhooks.Quote(contentType, 64)))
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
		return nil, webhooks.Reject("unsupported_content_type", fmt.Errorf("content type %s", webhooks.Quote(mt, 64)))
	}
	if t := bytes.TrimLeft(payload, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, webhooks.Reject("malformed_json", errors.New("payload is not a JSON object"))
	}
	return payload, nil
}

// shape is the top level of a payload: enough to tell which event it is
// the body of, decoded once and kept as the Event's Payload; the part an
// event type acts on is decoded from it by Plan.
type shape struct {
	Action        *string         `json:"action"`
	EffectiveDate *string         `json:"effective_date"`
	Purchase      json.RawMessage `json:"marketplace_purchase"`
	Sponsorship   json.RawMessage `json:"sponsorship"`
	Zen           *string         `json:"zen"`
	HookID        json.RawMessage `json:"hook_id"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// agree checks that the payload is the body of the event type the header
// names, for the types the receiver acts on: a marketplace_purchase body
// for marketplace_purchase, a sponsorship body for sponsorship, a zen and
// the hook's own id for ping. Other types are stored and acknowledged,
// and nothing acts on them.
func agree(typ, hookID string, payload []byte) (*shape, error) {
	var s shape
	// One pass: the JSON is checked whole, and the top level read.
	if err := webhooks.UnmarshalSigned(payload, &s); err != nil {
		var syntax *jsontext.SyntacticError
		if errors.As(err, &syntax) || !webhooks.ValidSigned(payload) {
			return nil, webhooks.Reject("malformed_json", fmt.Errorf("payload is not a JSON object: %w", err))
		}
		// Valid JSON whose fields cannot be read: Plan parks it.
		return nil, nil
	}
	mismatch := func(what string) error {
		return webhooks.Reject("event_type_mismatch", fmt.Errorf("X-GitHub-Event %s, but %s", typ, what))
	}
	switch typ {
	case "ping":
		if s.Zen == nil || !present(s.HookID) {
			return nil, mismatch("the body has no zen and hook_id")
		}
		if id := strings.Trim(string(s.HookID), `"`); hookID != "0" && id != hookID {
			return nil, mismatch("the body's hook_id is not X-GitHub-Hook-ID")
		}
	case "marketplace_purchase":
		if !present(s.Purchase) || present(s.Sponsorship) || s.Zen != nil {
			return nil, mismatch("the body is not a marketplace_purchase")
		}
	case "sponsorship":
		if !present(s.Sponsorship) || present(s.Purchase) || s.Zen != nil {
			return nil, mismatch("the body is not a sponsorship")
		}
	default:
		if present(s.Purchase) || present(s.Sponsorship) || (s.Zen != nil && present(s.HookID)) {
			return nil, mismatch("the body is one of the events the receiver acts on")
		}
	}
	return &s, nil
}
