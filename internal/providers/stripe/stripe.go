// Package stripe is the Stripe provider of the receiver: it verifies
// Stripe-Signature (one timestamp, every v1 against every secret), reads
// the events this receiver handles in whatever API version they were sent,
// and queues their orders, invoices, refunds, subscriptions, disputes and
// customer addresses on the transaction that holds the event's claim. It
// acts only on the events of its Filter (STRIPE_LIVEMODE,
// STRIPE_CONNECT_ACCOUNTS); the others are acknowledged and ignored.
//
// Its second Spec, ThinSpec (thin.go), is the route of an event
// destination's thin events, which are fetched from Stripe's API (v2.go)
// and applied through this provider's plan, Stripe's reports of events it
// never generated among them (health.go). The API version policy, which
// versions are read and what endpoints check reports, is versions.go's.
package stripe

import (
	"encoding/hex"
	"encoding/json"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Source is the provider's name in keys, rows and metrics.
const Source = "stripe"

// Tolerance is how far a signed timestamp may be from now, in either
// direction. stripe-go checks only the past; this provider checks both.
const Tolerance = 5 * time.Minute

// Spec describes the Stripe provider to the registry.
var Spec = webhooks.Spec{
	Source: Source,
	Secret: webhooks.Var{
		Name:      "STRIPE_WEBHOOK_SECRET",
		Doc:       "Stripe signing secret `whsec_…` (`whsec_` and at least 32 characters, as Stripe issues them; a shorter one is refused); comma-separated while a secret is rolled",
		List:      true,
		Secret:    true,
		DevPrefix: "whsec_dev_",
		// Stripe's signing secrets are whsec_ and 32 letters and digits (an
		// endpoint's) or 64 hex digits (`stripe listen`'s): anything shorter
		// is a truncated paste or a placeholder (whsec_x, whsec_test).
		MinLen: len("whsec_") + 32,
		DevHint: "  Events forwarded by the Stripe CLI are signed with its own secret instead: run\n" +
			"    STRIPE_WEBHOOK_SECRET=$(stripe listen --print-secret) make run\n" +
			"  and, in another terminal,\n" +
			"    stripe listen --forward-to localhost:8080/webhooks/stripe",
		Check: func(v string) error {
			if !strings.HasPrefix(v, "whsec_") {
				return errors.New("does not start with whsec_ (use the endpoint's signing secret, or `stripe listen --print-secret`)")
			}
			return nil
		},
		Mask: func(string) string { return "whsec_****" },
	},
	Vars:             []webhooks.Var{apiKey, apiBase, liveMode, connectAccounts, successURL},
	SignatureHeaders: []string{"Stripe-Signature"},
	Types:            handledTypes,
	APIVersion:       stripego.APIVersion,
	// Stripe retries for 3 days in live mode; `stripe events resend` works
	// for 30, and an event resent past its key's deletion would be
	// processed again: keep 30 days unless you know better.
	Retention:    3 * 24 * time.Hour,
	Retries:      "retries for up to 3 days (live mode; a few times over hours in test mode)",
	OrderSources: []string{Source},
	New: func(s webhooks.Settings) (webhooks.Provider, error) {
		filter, _, err := FilterOf(s.Env)
		if err != nil {
			return nil, err
		}
		return New(s.Secrets, WithFilter(filter), WithNotifyEmail(s.NotifyEmail), WithEntitlements(s.Entitlements)), nil
	},
	Warnings: func(s webhooks.Settings) []string {
		_, warnings, _ := FilterOf(s.Env)
		if slices.Contains(s.EntitlementSources, Source) && s.Env(apiKey.Name) == "" {
			warnings = append(warnings, "ENTITLEMENTS_FILE names Stripe ids but "+apiKey.Name+" is not set: a one-off "+
				"Checkout Session's line items are read from Stripe's API, so its purchase grants nothing (its step is "+
				"recorded skipped) until "+apiKey.Name+" is set and the step replayed; subscriptions grant as usual")
		}
		return warnings
	},
	WrongSecretHint: "the signature does not match any configured secret although it was signed just now: " +
		"if this is `stripe listen`, use the secret `stripe listen --print-secret` prints; " +
		"otherwise the signing secret of the endpoint that sends here (Dashboard > Developers > Webhooks)",
	Sign: func(in webhooks.SignInput) http.Header {
		return http.Header{
			"Content-Type":     {"application/json; charset=utf-8"},
			"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
			"Stripe-Signature": {SignatureHeader(in.Body, in.Secret, in.At)},
		}
	},
	Example: example,
}

// SignatureHeader is the Stripe-Signature of body signed with secret at
// the given time, as Stripe sends it.
func SignatureHeader(body []byte, secret string, at time.Time) string {
	return "t=" + strconv.FormatInt(at.Unix(), 10) + ",v1=" + hex.EncodeToString(Sign(body, secret, at.Unix()))
}

// Provider verifies and plans Stripe events.
type Provider struct {
	secrets []string
	filter  Filter
	notify  string // NOTIFY_EMAIL: who is told of disputes
	// entitlements: ENTITLEMENTS_FILE is set (WithEntitlements).
	entitlements bool
}

// Option changes what New builds.
type Option func(*Provider)

// WithFilter makes the provider act only on the events f lets through. Without it, a
// provider acts on events of both modes and of no connected account.
func WithFilter(f Filter) Option { return func(p *Provider) { p.filter = f } }

// WithNotifyEmail sets who is told of new disputes (NOTIFY_EMAIL); without
// it the notice is recorded skipped.
func WithNotifyEmail(addr string) Option { return func(p *Provider) { p.notify = addr } }

// WithEntitlements makes the provider's plans follow the rows that grant
// entitlements (ENTITLEMENTS_FILE is set): see internal/entitlements.
func WithEntitlements(on bool) Option { return func(p *Provider) { p.entitlements = on } }

// New returns a provider that accepts deliveries signed with any of secrets
// (more than one while a secret is rolled).
func New(secrets []string, opts ...Option) *Provider {
	p := &Provider{secrets: secrets}
	for _, o := range opts {
		o(p)
	}
	return p
}

// envelope is a Stripe Event as the handlers read it, decoded once, in one
// pass, by Verify (or Decode) and kept as the Event's Payload: the
// envelope, and of data.object the fields any handler reads (dataObject).
// The rest (request, which old API versions send as a string;
// previous_attributes; every other field) is skipped, never decoded. (Of
// a likely copy, Verify decodes a skimmed envelope, and envelopeOf this
// one if the event is planned.)
type envelope struct {
	eventHead `json:",inline"`
	Data      *struct {
		Object *dataObject `json:"object"`
		// PreviousAttributes are the values an update changed, as they
		// were: only what a handler reads.
		PreviousAttributes *struct {
			AmountRefunded optionalInt `json:"amount_refunded"` // charge.refunded: the charge's total before
		} `json:"previous_attributes"`
	} `json:"data"`

	// objectErr is why data.object's fields could not be read (a field of
	// another type than the handlers expect): a handled event is parked
	// with it, any other is acknowledged as usual.
	objectErr error
}

// eventHead is the envelope's own members.
type eventHead struct {
	ID         string      `json:"id"`
	Object     string      `json:"object"`
	Type       string      `json:"type"`
	APIVersion string      `json:"api_version"`
	Created    unixSeconds `json:"created"`
	Livemode   flag        `json:"livemode"`
	Account    text        `json:"account"` // a connected account's events: acct_…
}

// skimmed is the envelope with data.object validated and found, not read:
// what Verify decodes of a likely copy, and what Decode falls back to when
// data.object's fields are not what the handlers expect.
type skimmed struct {
	eventHead `json:",inline"`
	Data      *struct {
		Object present `json:"object"`
	} `json:"data"`
}

// present is true of any JSON value but null.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = string(b) != "null"
	return nil
}

func (s *skimmed) hasObject() bool { return s.Data != nil && bool(s.Data.Object) }

// Verify implements webhooks.Provider: the header is parsed once, every v1
// signature is tried against every configured secret, the timestamp they
// sign must be within Tolerance on both sides, and the body must be a
// Stripe Event with data.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) (webhooks.Event, error) {
	matched, signedAt, err := verifySigned(h, body, p.secrets, now)
	if err != nil {
		return webhooks.Event{}, err
	}
	// Stripe signs every attempt anew: an attempt signed long after the
	// event was created is a retry or a resend, which the processor looks
	// up before it plans it. Of such a delivery only the envelope is
	// decoded here (its data.object is validated, not read): a copy of a
	// known event is answered without it, and Plan decodes it if the event
	// is new after all. Stripe writes "created" before "data", so a new
	// event is told from a copy without decoding anything.
	resent := func(created unixSeconds) bool {
		return created > 0 && webhooks.LikelyResent(signedAt, time.Unix(int64(created), 0))
	}
	var hint unixSeconds // anything but an integer reads as 0: no hint
	if v, ok := webhooks.LeadingScalar(body, "created"); ok {
		_ = hint.UnmarshalJSON(v)
	}
	if resent(hint) {
		ev, created, err := decodeHead(body)
		switch {
		case err != nil:
			return webhooks.Event{}, err
		case resent(created): // as the decode reads it
			ev.SecretIndex, ev.Resent = matched, true
			return ev, nil
		}
	}
	ev, err := Decode(body)
	if err != nil {
		return webhooks.Event{}, err
	}
	ev.SecretIndex = matched
	ev.Resent = resent(ev.Payload.(*envelope).Created)
	return ev, nil
}

// verifySigned checks what every Stripe delivery is signed with, snapshot
// events and thin ones alike: a JSON Content-Type when there is one, and
// Stripe-Signature, parsed once, every v1 signature tried against every
// secret, the timestamp they sign within Tolerance on both sides. It
// returns the position of the secret that matched and when it signed.
func verifySigned(h http.Header, body []byte, secrets []string, now time.Time) (int, time.Time, error) {
	header := h.Get("Stripe-Signature")
	if header == "" {
		return -1, time.Time{}, webhooks.Reject("missing_signature", errors.New("no Stripe-Signature header"))
	}
	if ct := h.Get("Content-Type"); ct != "" {
		if mt, err := webhooks.MediaType(ct); err != nil || mt != "application/json" {
			return -1, time.Time{}, webhooks.Reject("unsupported_content_type", fmt.Errorf("content type %s", quote(ct)))
		}
	}
	sig, err := parseSignature(header)
	if err != nil {
		return -1, time.Time{}, webhooks.Reject("invalid_header", err)
	}
	matched := sig.match(body, secrets)
	signedAt := time.Unix(sig.at, 0)
	switch {
	case matched < 0:
		fresh := webhooks.SignedStale
		if now.Sub(signedAt).Abs() <= Tolerance {
			fresh = webhooks.SignedFresh
		}
		return -1, signedAt, webhooks.RejectSignature(fresh,
			fmt.Errorf("no v1 signature matches %s", webhooks.ConfiguredSecrets(len(secrets))))
	case now.Sub(signedAt) > Tolerance:
		return -1, signedAt, webhooks.Reject("timestamp_too_old", fmt.Errorf("signed %s ago", now.Sub(signedAt).Round(time.Second)))
	case signedAt.Sub(now) > Tolerance:
		return -1, signedAt, webhooks.Reject("timestamp_in_future", fmt.Errorf("signed %s ahead", signedAt.Sub(now).Round(time.Second)))
	}
	return matched, signedAt, nil
}

// Decode reads the envelope of a Stripe Event, verified, stored or fetched
// from Stripe's API. It returns a *webhooks.RejectError for a body that is
// not an Event.
func Decode(body []byte) (webhooks.Event, error) {
	env := new(envelope)
	hasObject := false
	if err := webhooks.UnmarshalSigned(body, env); err != nil {
		// Either the body is no JSON object, or a field of data.object is
		// not of the type a handler reads: tell them apart.
		sk := new(skimmed)
		if serr := webhooks.UnmarshalSigned(body, sk); serr != nil {
			return webhooks.Event{}, webhooks.Reject("malformed_json", serr)
		}
		*env = envelope{eventHead: sk.eventHead, objectErr: err}
		hasObject = sk.hasObject()
	} else {
		hasObject = env.Data != nil && env.Data.Object != nil
	}
	ev, err := eventOf(body, env.eventHead, hasObject)
	if err == nil {
		ev.Payload = env
	}
	return ev, err
}

// eventOf is the Event of a decoded envelope, or why the body is not one.
func eventOf(body []byte, h eventHead, hasObject bool) (webhooks.Event, error) {
	switch {
	case h.ID == "" || h.Type == "":
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("no id or type"))
	case h.Object != "" && h.Object != "event":
		return webhooks.Event{}, webhooks.Reject("not_an_event", fmt.Errorf("object %s", quote(h.Object)))
	case !hasObject:
		return webhooks.Event{}, webhooks.Reject("missing_data", errors.New("event has no data.object"))
	}
	return webhooks.Event{Source: Source, Key: h.ID, ID: h.ID, Type: h.Type, APIVersion: h.APIVersion, Body: body}, nil
}

// decodeHead is Decode without data.object's fields: the Event has no
// Payload, and envelopeOf decodes the body if the event is planned.
func decodeHead(body []byte) (webhooks.Event, unixSeconds, error) {
	sk := new(skimmed)
	if err := webhooks.UnmarshalSigned(body, sk); err != nil {
		return webhooks.Event{}, 0, webhooks.Reject("malformed_json", err)
	}
	ev, err := eventOf(body, sk.eventHead, sk.hasObject())
	return ev, sk.Created, err
}

// envelopeOf returns the event's envelope as Verify decoded it, or decodes
// a stored body's (and keeps it as the Payload).
func envelopeOf(ev *webhooks.Event) (*envelope, error) {
	if env, ok := ev.Payload.(*envelope); ok {
		return env, nil
	}
	decoded, err := Decode(ev.Body)
	if err != nil {
		return nil, webhooks.Unprocessable("event %s: %v", ev.ID, err)
	}
	ev.Payload = decoded.Payload
	return decoded.Payload.(*envelope), nil
}

// object returns the event's data.object as Verify decoded it (or decodes a
// stored body's), or says why its fields cannot be read.
func object(ev *webhooks.Event) (*dataObject, error) {
	env, err := envelopeOf(ev)
	if err != nil {
		return nil, err
	}
	if env.objectErr != nil {
		return nil, webhooks.Unprocessable("%s %s: data.object: %v", ev.Type, ev.ID, env.objectErr)
	}
	return env.Data.Object, nil
}

// dataObject is data.object as the handlers read it: the fields of a
// Checkout Session, an Invoice, a Charge, a Refund, a Subscription, a
// Dispute and a Customer that any of them uses, decoded in the same pass as the
// envelope. Where two of these objects share a name, they share its type.
type dataObject struct {
	ID       string     `json:"id"`
	Currency string     `json:"currency"`
	Email    *string    `json:"customer_email"` // sessions and invoices
	Customer expandable `json:"customer"`       // sessions, invoices, charges, subscriptions
	Status   string     `json:"status"`         // subscriptions, disputes (and others, unread)
	Amount   int64      `json:"amount"`         // charges, disputes

	// Checkout Session
	PaymentStatus   string     `json:"payment_status"`
	AmountTotal     *int64     `json:"amount_total"`
	PaymentIntent   expandable `json:"payment_intent"` // sessions and charges
	CustomerDetails *struct {
		Email *string `json:"email"`
	} `json:"customer_details"`
	Mode              string  `json:"mode"`                // payment, subscription, setup
	ClientReferenceID *string `json:"client_reference_id"` // the app's user id, set when it made the session
	// Metadata of a session or a subscription: only app_user_id is read.
	Metadata appMetadata `json:"metadata"`

	// Invoice
	AmountDue    int64 `json:"amount_due"`
	AmountPaid   int64 `json:"amount_paid"`
	AttemptCount int   `json:"attempt_count"`
	// HostedInvoiceURL is the page where the customer pays (or confirms)
	// the invoice; NextPaymentAttempt when Stripe tries again (null: it
	// will not).
	HostedInvoiceURL   *string `json:"hosted_invoice_url"`
	NextPaymentAttempt *int64  `json:"next_payment_attempt"`

	// Charge
	AmountRefunded int64   `json:"amount_refunded"`
	ReceiptEmail   *string `json:"receipt_email"`
	BillingDetails *struct {
		Email *string `json:"email"`
	} `json:"billing_details"`

	// Subscription. current_period_end is the subscription's in API
	// versions up to 2025-02-24.acacia, its items' from 2025-03-31.basil.
	CurrentPeriodEnd  *int64 `json:"current_period_end"`
	CancelAtPeriodEnd bool   `json:"cancel_at_period_end"`
	TrialEnd          *int64 `json:"trial_end"`
	Items             *struct {
		Data []struct {
			CurrentPeriodEnd *int64 `json:"current_period_end"`
			Price            *struct {
				ID      string     `json:"id"`
				Product expandable `json:"product"`
			} `json:"price"`
			Quantity *int64 `json:"quantity"`
		} `json:"data"`
	} `json:"items"`

	// Dispute (also PaymentIntent, Amount, Currency, Status)
	Charge          expandable `json:"charge"` // disputes (and invoices, unread)
	Reason          *string    `json:"reason"`
	EvidenceDetails *struct {
		DueBy *int64 `json:"due_by"`
	} `json:"evidence_details"`
	EvidenceDueBy *int64 `json:"evidence_due_by"` // disputes of API versions before 2014

	// Customer
	CustomerEmail *string `json:"email"`

	// Stripe Entitlements' active entitlement summary (also Customer): at
	// most 10 inline, has_more when the customer has more.
	Entitlements *featureList `json:"entitlements"`

	// Refund (also Amount, Currency, Status, Charge, PaymentIntent)
	Created       *int64  `json:"created"` // when the refund was made (and the other objects: unread)
	FailureReason *string `json:"failure_reason"`
}

// UnmarshalJSONFrom reads data.object with webhooks.DecodeMembers: a
// member is read into the field its tag names (TestMemberNamesEveryField),
// every other is skipped.
func (o *dataObject) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return webhooks.DecodeMembers(dec, o)
}

// Member implements webhooks.Members: name is a member's name as sent, and
// names a field as exactly as json/v2 matches a tag.
func (o *dataObject) Member(name []byte) any {
	switch string(name) {
	case "id":
		return &o.ID
	case "currency":
		return &o.Currency
	case "customer_email":
		return &o.Email
	case "customer":
		return &o.Customer
	case "status":
		return &o.Status
	case "amount":
		return &o.Amount
	case "payment_status":
		return &o.PaymentStatus
	case "amount_total":
		return &o.AmountTotal
	case "payment_intent":
		return &o.PaymentIntent
	case "customer_details":
		return &o.CustomerDetails
	case "amount_due":
		return &o.AmountDue
	case "amount_paid":
		return &o.AmountPaid
	case "attempt_count":
		return &o.AttemptCount
	case "hosted_invoice_url":
		return &o.HostedInvoiceURL
	case "next_payment_attempt":
		return &o.NextPaymentAttempt
	case "amount_refunded":
		return &o.AmountRefunded
	case "receipt_email":
		return &o.ReceiptEmail
	case "billing_details":
		return &o.BillingDetails
	case "current_period_end":
		return &o.CurrentPeriodEnd
	case "cancel_at_period_end":
		return &o.CancelAtPeriodEnd
	case "trial_end":
		return &o.TrialEnd
	case "items":
		return &o.Items
	case "charge":
		return &o.Charge
	case "reason":
		return &o.Reason
	case "evidence_details":
		return &o.EvidenceDetails
	case "evidence_due_by":
		return &o.EvidenceDueBy
	case "email":
		return &o.CustomerEmail
	case "mode":
		return &o.Mode
	case "client_reference_id":
		return &o.ClientReferenceID
	case "metadata":
		return &o.Metadata
	case "entitlements":
		return &o.Entitlements
	case "created":
		return &o.Created
	case "failure_reason":
		return &o.FailureReason
	}
	return nil
}

// appMetadata is an object's metadata, the merchant's own: only its
// app_user_id is read, when it is a string, and nothing in it makes an
// event unreadable.
type appMetadata struct{ AppUserID string }

func (m *appMetadata) UnmarshalJSON(b []byte) error {
	var v map[string]json.RawMessage
	if webhooks.UnmarshalSigned(b, &v) == nil {
		_ = webhooks.UnmarshalSigned(v["app_user_id"], &m.AppUserID)
	}
	return nil
}

// featureList is an active entitlement summary's list of a customer's
// active features.
type featureList struct {
	Data []struct {
		Feature   expandable `json:"feature"`
		LookupKey string     `json:"lookup_key"`
	} `json:"data"`
	HasMore bool `json:"has_more"`
}

// unixSeconds is an event's created, read only as a hint (see
// webhooks.LikelyResent): anything but an integer reads as 0, and never
// fails the decode.
type unixSeconds int64

func (u *unixSeconds) UnmarshalJSON(b []byte) error {
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*u = unixSeconds(n)
	}
	return nil
}

// optionalInt is an integer that may be absent: anything but an integer
// reads as absent, and never fails the decode.
type optionalInt struct {
	N   int64
	Set bool
}

func (o *optionalInt) UnmarshalJSON(b []byte) error {
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*o = optionalInt{N: n, Set: true}
	}
	return nil
}

// flag is an event's livemode: true only when it is the JSON true;
// anything else reads as false (test mode, as stripe-go reads a missing
// one), and never fails the decode.
type flag bool

func (f *flag) UnmarshalJSON(b []byte) error {
	*f = string(b) == "true"
	return nil
}

func (f flag) live() bool { return bool(f) }

// text is a string field of the envelope that never fails the decode:
// anything but a JSON string reads as "".
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if webhooks.UnmarshalSigned(b, &s) == nil {
		*t = text(s)
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
		if err := webhooks.UnmarshalSigned(b, &s); err != nil {
			return err
		}
		*e = expandable(s)
		return nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := webhooks.UnmarshalSigned(b, &obj); err != nil {
		return fmt.Errorf("expandable field: %w", err)
	}
	*e = expandable(obj.ID)
	return nil
}
