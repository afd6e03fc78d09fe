// Package sendername is the Sendername provider of the receiver, made from
// the template of a Standard Webhooks sender
// (internal/providers/_template, docs/adding-an-integration.md): it
// verifies Sendername's signatures with the shared verifier
// (internal/standardwebhooks), reads the events this receiver handles with
// types of its own, and queues their writes and steps on the transaction
// that holds the event's claim. Say here what is Sendername's own, as
// internal/providers/polar does: how it keys a secret, what its ids are,
// where a customer's address comes from, whether its API lists what it
// sent (a catch-up) and shows its endpoints.
//
// # Secrets
//
// SENDERNAME_WEBHOOK_SECRET is the endpoint's secret as Sendername shows it,
// written the spec's way: "whsec_" and the standard base64 of its key,
// which signs. Start-up refuses any other text (Spec.Secret.Check), and
// the development and test secrets are written the same way
// (Spec.Secret.Dev).
//
// # Keys
//
// A delivery's dedupe key is its webhook-id, which Sendername signs and
// keeps on every retry. A sender that gives each endpoint its own id for
// one event makes the business key (the order id) what turns the second
// copy into a no-op.
//
// # Addresses
//
// An order names its customer's address in data.customer.email: the
// confirmation goes to it; without one, none is planned.
package sendername

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/paywebhooks/receiver/internal/endpoints"
	swh "github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Source is the provider's name in keys, rows, routes and metrics, and the
// orders.source of its orders.
const Source = "sendername"

// Spec describes the Sendername provider to the registry.
var Spec = webhooks.Spec{
	Source: Source,
	Secret: webhooks.Var{
		Name:      "SENDERNAME_WEBHOOK_SECRET",
		Doc:       "Sendername webhook endpoint's signing secret, as shown (`whsec_` and the base64 of its key); comma-separated while rotating",
		List:      true,
		Secret:    true,
		DevPrefix: swh.SecretPrefix,
		// make run's secret and the test receivers' are written the spec's
		// way too: "whsec_" and the base64 of random characters.
		Dev:     func(random string) string { return swh.FormatSecret([]byte(random)) },
		DevHint: "  Sendername signs with the secret of the webhook endpoint it sends to: set SENDERNAME_WEBHOOK_SECRET to it, as shown.",
		MinLen:  len(swh.SecretPrefix) + 32, // a key of 24 bytes, the least the spec allows
		Check: func(v string) error {
			_, err := swh.ParseSecret(v)
			return err
		},
		Mask: func(string) string { return swh.SecretPrefix + "****" },
	},
	SignatureHeaders: []string{swh.HeaderSignature, swh.SvixHeaderSignature},
	Types:            handledTypes,
	// How long Sendername retries a delivery, at least: a key is kept this
	// long (events prune), so that a retry is known for a duplicate.
	Retention:    3 * 24 * time.Hour,
	Retries:      "retries a failed delivery with back-off",
	OrderSources: []string{Source},
	New: func(s webhooks.Settings) (webhooks.Provider, error) {
		v, err := swh.NewVerifier(s.Secrets...)
		if err != nil {
			return nil, err
		}
		return &Provider{verifier: *v}, nil
	},
	WrongSecretHint: "the signature does not match any configured secret although it was signed just now: " +
		"use the secret of the webhook endpoint that sends here, as Sendername shows it",
	Sign:    sign,
	Example: example,
}

// Endpoints names where Sendername's endpoint is set up, for make run's
// list of the event types to enable (docs/endpoints.md). With the
// sender's API, New and the listing make `server endpoints check` hold
// its endpoints to Spec.Types (internal/providers/polar/endpoints.go).
var Endpoints = endpoints.Provider{Source: Source, Where: "Sendername's dashboard > Webhooks"}

// sign is Spec.Sign, the sender's side (tests, cmd/loadgen): the Standard
// Webhooks headers of a delivery signed with the secret's key. A secret
// that is not written the spec's way (a test's wrong secret) signs with
// its own bytes, which no configured key matches.
func sign(in webhooks.SignInput) http.Header {
	key, err := swh.ParseSecret(in.Secret)
	if err != nil {
		key = []byte(in.Secret)
	}
	h := swh.Headers(in.MessageID(), in.At, in.Body, key)
	h.Set("Content-Type", "application/json")
	return h
}

// Provider verifies and plans Sendername deliveries.
type Provider struct {
	verifier swh.Verifier
}

// Verify implements webhooks.Provider: the Standard Webhooks headers (or
// Svix's names for them) are verified over the raw body, every signature
// against every secret, the timestamp within five minutes either way; the
// body must be an event with a type and data.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) (webhooks.Event, error) {
	m, err := p.verifier.Verify(h, body, now)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev, err := Decode(m.ID, body)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev.SecretIndex = m.Secret
	return ev, nil
}

// event is a Sendername event's envelope, decoded once and kept as the
// Event's Payload; Plan reads its data for the types it handles.
type event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// Decode reads a Sendername event, verified or stored, whose webhook-id is
// id. It returns a *webhooks.RejectError for a body that is not an event,
// or an id that cannot be a claim key as sent.
func Decode(id string, body []byte) (webhooks.Event, error) {
	if !webhooks.KeySafe(id) {
		return webhooks.Event{}, webhooks.Reject("invalid_webhook_id",
			fmt.Errorf("webhook-id %s is not up to 100 letters, digits, '_', '.' or '-'", webhooks.Quote(id, 100)))
	}
	e := new(event)
	switch err := webhooks.UnmarshalSigned(body, e); {
	case err != nil:
		return webhooks.Event{}, webhooks.Reject("malformed_json", err)
	case e.Type == "":
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("no type"))
	case len(e.Data) == 0 || e.Data[0] != '{':
		return webhooks.Event{}, webhooks.Reject("missing_data", errors.New("the event's data is not an object"))
	}
	return webhooks.Event{Source: Source, Key: id, ID: id, Type: e.Type, Body: body, Payload: e}, nil
}
