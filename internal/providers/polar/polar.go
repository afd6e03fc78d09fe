// Package polar is the Polar (polar.sh) provider of the receiver: it
// verifies Polar's Standard Webhooks signatures with the shared verifier
// (internal/standardwebhooks), reads the events this receiver handles with
// types of its own, decoded once, and queues their orders, refunds and
// subscriptions on the transaction that holds the event's claim.
//
// # Secrets
//
// POLAR_WEBHOOK_SECRET is the endpoint's secret as Polar's dashboard shows
// it, and the text does not say how Polar keys it: a secret generated since
// September 2026 is "whsec_" and the standard base64 of 32 random bytes,
// keyed the spec's way with the decoded bytes; an older one ("whsec_" and
// 43 letters and digits, or before July 2026 "polar_whs_" and 43) is keyed
// with the UTF-8 bytes of the whole string, prefix included. So every
// configured secret stands for two candidate keys (Keys): its decoded key,
// when the text after "whsec_" is standard base64, and its own bytes; every
// signature is tried against every key of every secret.
//
// # Keys
//
// A delivery's dedupe key is its webhook-id, which Polar signs: the id of
// its webhook event, one per event and endpoint, kept by every retry and
// every redelivery (each signed anew, with a fresh webhook-timestamp, over
// the same stored body). The body carries no id of its own. The same event
// sent to two endpoints has two webhook-ids, so the business keys make the
// second copy a no-op: an order is unique by its Polar order id, a refund
// counts once per order and amount, a subscription converges to its newest
// state.
//
// # Addresses
//
// An order's payload names its customer with an email address
// (data.customer.email, nullable): the confirmation goes to it, and the
// refund email to it or, when the refund's payload has none, to the
// order's; without an address no email step is planned.
package polar

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	swh "github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Source is the provider's name in keys, rows and metrics, and the
// orders.source of its orders.
const Source = "polar"

// LegacySecretPrefix starts the secrets Polar generated before
// 2026-06-29; "whsec_" (standardwebhooks.SecretPrefix) every later one.
const LegacySecretPrefix = "polar_whs_"

// UserAgent is the User-Agent of Polar's deliveries.
const UserAgent = "polar.sh webhooks"

// Spec describes the Polar provider to the registry.
var Spec = webhooks.Spec{
	Source: Source,
	Secret: webhooks.Var{
		Name: "POLAR_WEBHOOK_SECRET",
		Doc: "Polar webhook endpoint's secret as the dashboard shows it (`whsec_…`, or an older `polar_whs_…`: " +
			"both ways Polar keys a secret are tried; at least 32 characters, and start-up warns under 43); comma-separated while rotating",
		List:      true,
		Secret:    true,
		DevPrefix: swh.SecretPrefix,
		DevHint: "  Polar signs with the secret of the webhook endpoint it sends to " +
			"(Polar > Settings > Webhooks): set POLAR_WEBHOOK_SECRET to it, as shown.",
		// Polar generates whsec_ and 44 characters (base64 of 32 bytes), or
		// before September 2026 whsec_ or polar_whs_ and 43; its early
		// dashboard, 43. A secret set through its API can be any text of 32
		// characters or more: shorter is refused, shorter than Polar
		// generates is warned of.
		MinLen:  32,
		WarnLen: 43,
		Check: func(v string) error {
			if strings.ContainsAny(v, " \t\r\n") {
				return errors.New("contains white space: paste the secret as the endpoint's settings show it")
			}
			return nil
		},
		Mask: func(v string) string {
			for _, p := range []string{swh.SecretPrefix, LegacySecretPrefix} {
				if strings.HasPrefix(v, p) {
					return p + "****"
				}
			}
			return "****"
		},
	},
	Vars:             []webhooks.Var{apiKey, apiBase, endpointID}, // the catch-up's (reconcile.go)
	SignatureHeaders: []string{swh.HeaderSignature, swh.SvixHeaderSignature},
	Types:            handledTypes,
	// Polar retries a failed delivery 10 times, its back-off capped at
	// 20 minutes (about 35 minutes in all); a redelivery asked for later
	// (up to 90 days) past its pruned key changes nothing: every write and
	// step of an event is safe to run again.
	Retention:    3 * 24 * time.Hour,
	Retries:      "retries up to 10 times with back-off, and disables the endpoint after 10 failures in a row",
	OrderSources: []string{Source},
	New: func(s webhooks.Settings) (webhooks.Provider, error) {
		p := New(s.Secrets)
		p.entitlements = s.Entitlements
		return p, nil
	},
	WrongSecretHint: "the signature does not match any configured secret although it was signed just now: " +
		"use the secret of the webhook endpoint that sends here (Polar > Settings > Webhooks), as shown",
	Sign:    sign,
	Example: example,
}

// sign is Spec.Sign: the Standard Webhooks headers of a delivery, signed
// with the key Polar uses for the secret (Key), and Polar's Content-Type
// and User-Agent.
func sign(in webhooks.SignInput) http.Header {
	h := swh.Headers(in.MessageID(), in.At, in.Body, Key(in.Secret))
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	return h
}

// Key is the key Polar signs with for a secret whose text tells: the
// decoded key of a secret written the spec's way (Polar's since September
// 2026), else the UTF-8 bytes of the whole string (an older secret, which
// is no standard base64). For the sender's side (Spec.Sign); the receiver
// tries both (Keys).
func Key(secret string) []byte {
	if k, err := swh.ParseSecret(secret); err == nil {
		return k
	}
	return []byte(secret)
}

// Keys are the candidate keys of each secret, in order: its decoded key
// when it is written the spec's way, then the UTF-8 bytes of the whole
// string, the two ways Polar keys a secret.
func Keys(secrets []string) [][][]byte {
	keys := make([][][]byte, len(secrets))
	for i, s := range secrets {
		if k, err := swh.ParseSecret(s); err == nil {
			keys[i] = append(keys[i], k)
		}
		keys[i] = append(keys[i], []byte(s))
	}
	return keys
}

// Provider verifies and plans Polar deliveries.
type Provider struct {
	verifier swh.Verifier
	// entitlements: ENTITLEMENTS_FILE is set, and plans follow the rows
	// that grant entitlements.
	entitlements bool
}

// New returns a provider that accepts deliveries signed with any of
// secrets (more than one while a secret is rotated), each keyed both ways
// Polar keys a secret, within Standard Webhooks' five minutes either way.
func New(secrets []string) *Provider {
	return &Provider{verifier: swh.Verifier{Keys: Keys(secrets)}}
}

// Verify implements webhooks.Provider: the Standard Webhooks headers (or
// Svix's names for them) are verified over the raw body, every signature
// against every key of every secret, the timestamp within five minutes
// either way; the body must be an event with a type and data. It never
// looks at Content-Type: the body is what is signed.
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
	// Polar signs every attempt and redelivery anew over the stored body:
	// one signed long after the event happened is a retry or a
	// redelivery.
	ev.Resent = webhooks.LikelyResent(m.Timestamp, ev.Payload.(*event).Timestamp.Time())
	return ev, nil
}

// event is a Polar event as this receiver reads it: the envelope and, in
// one union, the fields of an order and a subscription that the handlers
// need, decoded in one pass and kept as the Event's Payload.
type event struct {
	Type string `json:"type"`
	// Timestamp is when the event happened, read only as a hint (see
	// webhooks.LikelyResent).
	Timestamp webhooks.TimeHint `json:"timestamp"`
	Data      *data             `json:"data"`
	// dataErr says why data could not be read into data (a field of a
	// type this receiver did not expect): Plan parks a handled event.
	dataErr error
}

// data is the part of an order or a subscription the handlers read. A
// JSON null reads as the zero value.
type data struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Order: the amounts in cents. total_amount is what the customer paid
	// (net_amount + tax_amount); refunded_amount is cumulative and net of
	// tax, whose refunded part is refunded_tax_amount.
	TotalAmount       *int64    `json:"total_amount"`
	RefundedAmount    int64     `json:"refunded_amount"`
	RefundedTaxAmount int64     `json:"refunded_tax_amount"`
	Currency          string    `json:"currency"` // lower-case: usd
	Customer          *customer `json:"customer"`
	// Subscription: modified_at is null until the row is first updated.
	CustomerID         string `json:"customer_id"`
	CreatedAt          string `json:"created_at"`
	ModifiedAt         string `json:"modified_at"`
	CurrentPeriodStart string `json:"current_period_start"`
	CurrentPeriodEnd   string `json:"current_period_end"`
	CancelAtPeriodEnd  bool   `json:"cancel_at_period_end"`
	EndsAt             string `json:"ends_at"`  // when a canceled subscription ends (or ended)
	EndedAt            string `json:"ended_at"` // when it ended: set once it is revoked
	// Order and subscription: what it is for, and the subscription an
	// order is of (null for a one-time purchase).
	ProductID      string  `json:"product_id"`
	SubscriptionID *string `json:"subscription_id"`
}

// customer is an order's or subscription's customer: its address, and the
// app's user id the app gave it (external_id).
type customer struct {
	Email      string  `json:"email"`
	ExternalID *string `json:"external_id"`
}

// Decode reads a Polar event, verified, stored or fetched from Polar's API,
// whose webhook-id is id. It returns a *webhooks.RejectError for a body
// that is not an event, or an id that cannot be a claim key.
func Decode(id string, body []byte) (webhooks.Event, error) {
	if !webhooks.KeySafe(id) {
		return webhooks.Event{}, webhooks.Reject("invalid_webhook_id",
			fmt.Errorf("webhook-id %s is not up to 100 letters, digits, '_', '.' or '-'", webhooks.Quote(id, 100)))
	}
	e := new(event)
	if err := webhooks.UnmarshalSigned(body, e); err != nil {
		var env struct {
			Type      string            `json:"type"`
			Timestamp webhooks.TimeHint `json:"timestamp"`
			Data      json.RawMessage   `json:"data"`
		}
		if jerr := webhooks.UnmarshalSigned(body, &env); jerr != nil {
			return webhooks.Event{}, webhooks.Reject("malformed_json", jerr)
		}
		e = &event{Type: env.Type, Timestamp: env.Timestamp, dataErr: err}
		if len(env.Data) > 0 && env.Data[0] == '{' {
			e.Data = &data{}
		}
	}
	switch {
	case e.Type == "":
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("no type"))
	case e.Data == nil:
		return webhooks.Event{}, webhooks.Reject("missing_data", errors.New("the event's data is not an object"))
	}
	return webhooks.Event{Source: Source, Key: id, ID: id, Type: e.Type, Body: body, Payload: e}, nil
}
