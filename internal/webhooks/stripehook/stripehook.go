// Package stripehook is the Stripe provider of the receiver: it verifies
// Stripe-Signature with stripe-go's webhook package, reads the events this
// receiver handles in whatever API version they were sent, and writes their
// orders and invoices inside the transaction that holds the event's claim.
package stripehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Source is the provider's name in keys, rows and metrics.
const Source = "stripe"

// Tolerance is how far a signed timestamp may be from now, in either
// direction. stripe-go checks only the past; this provider checks both.
const Tolerance = 5 * time.Minute

// Provider verifies and applies Stripe events.
type Provider struct {
	secrets []string
}

// New returns a provider that accepts deliveries signed with any of secrets
// (more than one while a secret is rolled).
func New(secrets []string) *Provider {
	return &Provider{secrets: secrets}
}

// Source implements webhooks.Provider.
func (p *Provider) Source() string { return Source }

// APIVersion is the version stripe-go v76 was built for. Events in other
// versions are accepted and counted, never refused for it.
func (p *Provider) APIVersion() string { return stripe.APIVersion }

// envelope is the part of a Stripe Event every handler relies on. The rest
// (request, which old API versions send as a string; previous_attributes)
// is never decoded.
type envelope struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Type       string `json:"type"`
	APIVersion string `json:"api_version"`
	Data       *struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// Verify implements webhooks.Provider: every v1 signature in the header
// against every configured secret, then the timestamp within Tolerance on
// both sides, then the body must be a Stripe Event with data.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) (webhooks.Event, error) {
	header := h.Get("Stripe-Signature")
	if header == "" {
		return webhooks.Event{}, webhooks.Reject("missing_signature", webhook.ErrNotSigned)
	}
	if ct := h.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return webhooks.Event{}, webhooks.Reject("unsupported_content_type", fmt.Errorf("content type %q", ct))
		}
	}
	ts, err := signedAt(header)
	if err != nil {
		return webhooks.Event{}, webhooks.Reject("invalid_header", err)
	}
	matched := -1
	for i, secret := range p.secrets {
		err = webhook.ValidatePayloadIgnoringTolerance(body, header, secret)
		if err == nil {
			matched = i
			break
		}
		if !errors.Is(err, webhook.ErrNoValidSignature) {
			break // the header itself is unusable; every secret would say so
		}
	}
	switch {
	case errors.Is(err, webhook.ErrInvalidHeader), errors.Is(err, webhook.ErrNotSigned):
		return webhooks.Event{}, webhooks.Reject("invalid_header", err)
	case matched < 0:
		return webhooks.Event{}, webhooks.Reject("no_valid_signature", err)
	case now.Sub(ts) > Tolerance:
		return webhooks.Event{}, webhooks.Reject("timestamp_too_old", fmt.Errorf("signed %s ago", now.Sub(ts).Round(time.Second)))
	case ts.Sub(now) > Tolerance:
		return webhooks.Event{}, webhooks.Reject("timestamp_in_future", fmt.Errorf("signed %s ahead", ts.Sub(now).Round(time.Second)))
	}
	ev, err := Decode(body)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev.SecretIndex = matched
	return ev, nil
}

// signedAt reads the t= element of a Stripe-Signature header.
func signedAt(header string) (time.Time, error) {
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			secs, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("timestamp %q: %w", v, webhook.ErrInvalidHeader)
			}
			return time.Unix(secs, 0), nil
		}
	}
	return time.Time{}, fmt.Errorf("no timestamp: %w", webhook.ErrInvalidHeader)
}

// Decode reads the envelope of a Stripe Event, verified or stored. It
// returns a *webhooks.RejectError for a body that is not an Event.
func Decode(body []byte) (webhooks.Event, error) {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		return webhooks.Event{}, webhooks.Reject("malformed_json", err)
	}
	if dec.More() {
		return webhooks.Event{}, webhooks.Reject("malformed_json", errors.New("data after the event"))
	}
	switch {
	case env.ID == "" || env.Type == "":
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("no id or type"))
	case env.Object != "" && env.Object != "event":
		return webhooks.Event{}, webhooks.Reject("not_an_event", fmt.Errorf("object %q", env.Object))
	case env.Data == nil || len(env.Data.Object) == 0 || string(env.Data.Object) == "null":
		return webhooks.Event{}, webhooks.Reject("missing_data", errors.New("event has no data.object"))
	}
	return webhooks.Event{
		Source:     Source,
		Key:        env.ID,
		ID:         env.ID,
		Type:       env.Type,
		APIVersion: env.APIVersion,
		Body:       body,
	}, nil
}

// object decodes the event's data.object into v, or says why it cannot.
func object(ev webhooks.Event, v any) error {
	var env envelope
	if err := json.Unmarshal(ev.Body, &env); err != nil || env.Data == nil {
		return webhooks.Unprocessable("event %s: no data.object", ev.ID)
	}
	if err := json.Unmarshal(env.Data.Object, v); err != nil {
		return webhooks.Unprocessable("%s %s: data.object: %v", ev.Type, ev.ID, err)
	}
	return nil
}

// expandable is a Stripe reference that is an id, an expanded object with
// an id, or null.
type expandable string

func (e *expandable) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*e = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*e = expandable(s)
		return nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("expandable field: %w", err)
	}
	*e = expandable(obj.ID)
	return nil
}
