// Package paddle is the Paddle Billing provider of the receiver: it
// verifies Paddle-Signature (one ts, every h1 against every secret, the ts
// within a tolerance either way), reads the notifications this receiver
// handles with types of its own, decoded once, and queues their orders,
// refunds, subscriptions and failed payment attempts on the transaction
// that holds the event's claim.
//
// A notification's dedupe key is its event_id (evt_…): a retry, and a
// replay Paddle makes of a notification (a new notification_id for the
// same event_id), are the same event. Paddle's transactions name their
// customer by id only (ctm_…), with no email address: an address is known
// when the checkout put one in the transaction's custom_data as "email"
// (Paddle.Checkout.open({customData: {email: …}})), or, for a refund, when
// the order was stored with one. Without an address, no email step is
// planned at all.
package paddle

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Source is the provider's name in keys, rows and metrics, and the
// orders.source of its orders.
const Source = "paddle"

// DefaultTolerance is how far a signed ts may be from now, either way,
// unless PADDLE_SIGNATURE_TOLERANCE says otherwise. Paddle's documentation
// ("Verify webhook signatures") says its SDKs' helpers enforce a
// five-second tolerance by default against replays, and asks manual
// implementations to apply the same check; its Node SDK refuses a ts more
// than 5 s old (its Go SDK checks only when asked to, both ways). That
// only works if Paddle signs each delivery attempt anew, as it documents
// ts to be when the webhook was sent. A receiver whose clock strays more
// than a second or two from Paddle's, or that sees retries refused as
// timestamp_too_old (one third-party report says retries keep their first
// ts), widens it: duplicates are still stopped by the event_id's claim.
const DefaultTolerance = 5 * time.Second

// Spec describes the Paddle provider to the registry.
var Spec = webhooks.Spec{
	Source: Source,
	Secret: webhooks.Var{
		Name:      "PADDLE_WEBHOOK_SECRET",
		Doc:       "Paddle notification destination's secret key (`pdl_ntfset_…`, 70 characters as Paddle issues them; a shorter one is refused); comma-separated while rotating",
		List:      true,
		Secret:    true,
		DevPrefix: "pdl_ntfset_dev_",
		DevHint: "  Paddle signs with the secret key of the notification destination it sends to " +
			"(Paddle > Developer tools > Notifications): set PADDLE_WEBHOOK_SECRET to it.",
		// Paddle generates every secret key: pdl_ntfset_, the destination's
		// id (26 characters), _ and 32 characters (its API's
		// endpoint_secret_key).
		MinLen: len("pdl_ntfset_") + 26 + 1 + 32,
		Check: func(v string) error {
			if !strings.HasPrefix(v, "pdl_ntfset_") || strings.ContainsAny(v, " \t\r\n") {
				return errors.New("is not a notification destination's secret key (pdl_ntfset_…)")
			}
			return nil
		},
		Mask: func(string) string { return "pdl_ntfset_****" },
	},
	Vars: []webhooks.Var{{
		Name:    "PADDLE_SIGNATURE_TOLERANCE",
		Doc:     "how far `Paddle-Signature`'s `ts` may be from the receiver's clock, either way (Paddle's SDKs default to 5 s)",
		Default: DefaultTolerance.String(),
		Check: func(v string) error {
			_, err := tolerance(v)
			return err
		},
	}, apiKey, apiBase}, // and the catch-up's (reconcile.go)
	SignatureHeaders: []string{HeaderSignature},
	Types:            handledTypes,
	// Paddle retries a live notification for 3 days. A replay asked of
	// Paddle later (up to 90 days) past its pruned key changes nothing:
	// every write and step of an event is safe to run again.
	Retention:    3 * 24 * time.Hour,
	Retries:      "retries a failed notification later, with back-off",
	OrderSources: []string{Source},
	New: func(s webhooks.Settings) (webhooks.Provider, error) {
		tol, err := tolerance(s.Env("PADDLE_SIGNATURE_TOLERANCE"))
		if err != nil {
			return nil, fmt.Errorf("PADDLE_SIGNATURE_TOLERANCE %w", err)
		}
		p := New(s.Secrets, tol)
		p.entitlements = s.Entitlements
		return p, nil
	},
	WrongSecretHint: "the signature does not match any configured secret although it was signed just now: " +
		"use the secret key of the notification destination that sends here (Paddle > Developer tools > Notifications)",
	Sign: func(in webhooks.SignInput) http.Header {
		return http.Header{
			"Content-Type":  {"application/json"},
			HeaderSignature: {SignatureHeader(in.Body, in.At, in.Secret)},
		}
	},
	Example: example,
}

// tolerance reads PADDLE_SIGNATURE_TOLERANCE: "" is the default.
func tolerance(v string) (time.Duration, error) {
	if v == "" {
		return DefaultTolerance, nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, errors.New("is not a duration (5s, 1m)")
	case d < time.Second || d > time.Hour:
		return 0, errors.New("must be between 1s and 1h: ts is in whole seconds, and a captured delivery stays valid for as long")
	}
	return d, nil
}

// Provider verifies and plans Paddle notifications.
type Provider struct {
	secrets   []string
	tolerance time.Duration
	// entitlements: ENTITLEMENTS_FILE is set, and plans follow the rows
	// that grant entitlements.
	entitlements bool
}

// New returns a provider that accepts notifications signed with any of
// secrets (more than one while a secret is rotated) at most tolerance away
// from now.
func New(secrets []string, tolerance time.Duration) *Provider {
	return &Provider{secrets: secrets, tolerance: tolerance}
}

// Verify implements webhooks.Provider: the header is parsed once, every
// h1 is tried against every configured secret, the ts they sign must be
// within the tolerance on both sides, and the body must be a notification
// with data. It never looks at Content-Type: the body is what is signed.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) (webhooks.Event, error) {
	header := h.Get(HeaderSignature)
	if strings.TrimSpace(header) == "" {
		return webhooks.Event{}, webhooks.Reject("missing_signature", errors.New("no Paddle-Signature header"))
	}
	sig, err := ParseSignature(header)
	if err != nil {
		return webhooks.Event{}, webhooks.Reject("invalid_header", err)
	}
	matched := sig.Match(body, p.secrets)
	if matched < 0 {
		fresh := webhooks.SignedFresh
		if sig.Check(now, p.tolerance) != nil {
			fresh = webhooks.SignedStale
		}
		return webhooks.Event{}, webhooks.RejectSignature(fresh,
			fmt.Errorf("no h1 matches %s (%s in Paddle-Signature)", webhooks.ConfiguredSecrets(len(p.secrets)),
				webhooks.Plural(len(sig.H1), "h1", "h1s")))
	}
	if err := sig.Check(now, p.tolerance); err != nil {
		return webhooks.Event{}, err
	}
	ev, err := Decode(body)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev.SecretIndex = matched
	// Paddle signs every attempt and every replay anew: one signed long
	// after the event occurred is a retry or a replay.
	if at := ev.Payload.(*notification).OccurredAt.Time(); !at.IsZero() {
		ev.Resent = webhooks.LikelyResent(time.Unix(sig.At, 0), at)
	}
	return ev, nil
}

// notification is a Paddle notification as this receiver reads it: the
// envelope and, in one union, the fields of a transaction, an adjustment
// and a subscription that the handlers need, decoded in one pass and kept as the
// Event's Payload. Paddle's own types (paddlenotification) need the
// event type first, then decode every field of the entity: on a
// transaction.completed, three to seven times the allocations and about
// twice the time (BenchmarkDecode); and these cannot fail on a field
// nobody reads. A test holds them to the SDK's types on every fixture.
type notification struct {
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	// OccurredAt is when the event happened (RFC 3339), read only as a
	// hint (see webhooks.LikelyResent).
	OccurredAt webhooks.TimeHint `json:"occurred_at"`
	Data       *entity           `json:"data"`
	// dataErr says why data could not be read into entity (a field of a
	// type this receiver did not expect): Plan parks a handled event.
	dataErr error
}

// entity is the part of a transaction, an adjustment or a subscription
// the handlers read.
type entity struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	CurrencyCode string     `json:"currency_code"`
	CustomData   customData `json:"custom_data"` // transaction, subscription
	Details      *struct {
		Totals *struct {
			GrandTotal string `json:"grand_total"`
		} `json:"totals"`
	} `json:"details"` // transaction
	Payments []struct {
		Status           string  `json:"status"`
		ErrorCode        *string `json:"error_code"`
		PaymentAttemptID string  `json:"payment_attempt_id"`
	} `json:"payments"` // transaction, most recent attempt first
	Checkout *struct {
		URL *string `json:"url"` // where the customer pays the transaction
	} `json:"checkout"` // transaction
	Action        string `json:"action"`         // adjustment
	TransactionID string `json:"transaction_id"` // adjustment
	Totals        *struct {
		Total string `json:"total"`
	} `json:"totals"` // adjustment
	CustomerID           string `json:"customer_id"` // subscription, transaction (adjustment: unread)
	CurrentBillingPeriod *struct {
		StartsAt string `json:"starts_at"`
		EndsAt   string `json:"ends_at"`
	} `json:"current_billing_period"` // subscription
	ManagementURLs *struct {
		UpdatePaymentMethod *string `json:"update_payment_method"`
		Cancel              *string `json:"cancel"`
	} `json:"management_urls"` // subscription: Paddle's own pages for the customer
	ScheduledChange *struct {
		Action string `json:"action"` // cancel, pause, resume
	} `json:"scheduled_change"` // subscription
	// Items are what a transaction or subscription is for.
	Items []struct {
		Price *struct {
			ID        string `json:"id"`
			ProductID string `json:"product_id"`
		} `json:"price"`
		Quantity int64 `json:"quantity"`
	} `json:"items"` // transaction, subscription
	SubscriptionID *string `json:"subscription_id"` // transaction: its subscription's, null for a one-off purchase
}

// customData is a transaction's or subscription's custom_data, the
// merchant's own: only its "email" and "app_user_id" are read, when they
// are strings, and nothing in it makes a notification unreadable. The
// buyer's client can edit it: the address is only ever mailed a receipt
// of the buyer's own purchase, and the app user id is a claim
// (internal/entitlements.AppUser).
type customData struct{ Email, AppUserID string }

func (c *customData) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if webhooks.UnmarshalSigned(b, &m) == nil {
		_ = webhooks.UnmarshalSigned(m["email"], &c.Email)
		_ = webhooks.UnmarshalSigned(m["app_user_id"], &c.AppUserID)
	}
	return nil
}

// Decode reads a Paddle notification, verified, stored or fetched from
// Paddle's API. It returns a *webhooks.RejectError for a body that is not
// a notification.
func Decode(body []byte) (webhooks.Event, error) {
	n := new(notification)
	if err := webhooks.UnmarshalSigned(body, n); err != nil {
		var env struct {
			EventID    string            `json:"event_id"`
			EventType  string            `json:"event_type"`
			OccurredAt webhooks.TimeHint `json:"occurred_at"`
			Data       json.RawMessage   `json:"data"`
		}
		if jerr := webhooks.UnmarshalSigned(body, &env); jerr != nil {
			return webhooks.Event{}, webhooks.Reject("malformed_json", jerr)
		}
		n = &notification{EventID: env.EventID, EventType: env.EventType, OccurredAt: env.OccurredAt, dataErr: err}
		if len(env.Data) > 0 && env.Data[0] == '{' {
			n.Data = &entity{}
		}
	}
	switch {
	case n.EventID == "" || n.EventType == "":
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("no event_id or event_type"))
	case !webhooks.KeySafe(n.EventID):
		return webhooks.Event{}, webhooks.Reject("invalid_event_id",
			fmt.Errorf("event_id %s is not up to 100 letters, digits, '_', '.' or '-'", webhooks.Quote(n.EventID, 100)))
	case n.Data == nil:
		return webhooks.Event{}, webhooks.Reject("missing_data", errors.New("the notification's data is not an object"))
	}
	return webhooks.Event{Source: Source, Key: n.EventID, ID: n.EventID, Type: n.EventType, Body: body, Payload: n}, nil
}
