package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"time"
	"unicode/utf8"
)

// Spec describes a provider once, in its own package: everything outside
// that package (configuration, `make run`'s development secrets, the route,
// the metrics, `events prune` and `events list --source`, the test helpers
// and the tables of docs/) reads it from the registry in
// internal/providers, so that a new provider is its package and one line
// there.
type Spec struct {
	// Source names the provider in keys, rows, logs and metrics, and its
	// route: POST /webhooks/<Source>, unless Path names another.
	Source string
	// Path, when set, is the route's path instead of /webhooks/<Source>:
	// for a second Spec of one provider's folder, whose deliveries come
	// from another kind of endpoint of the same sender (Stripe's event
	// destinations of thin events, /webhooks/stripe/thin).
	Path string
	// Secret is the variable of its signing secret(s). With no value, the
	// route is not mounted: the receiver never serves what it cannot verify.
	Secret Var
	// Vars are further variables the provider reads (Settings.Env).
	Vars []Var
	// SignatureHeaders are the headers a delivery is signed in. A POST with
	// none of them is refused 400 before its body is read.
	SignatureHeaders []string
	// Types are the event types the provider acts on. Metrics label others
	// "other", so that no label value comes from an unsigned header.
	Types []string
	// APIVersion, when set, is the API version the provider was built
	// against: events in another version are accepted and counted.
	APIVersion string
	// Retention is the shortest time its events' claims must be kept (the
	// sender's retry window, or for ever-valid signatures longer):
	// `events prune` refuses a shorter window without --force.
	Retention time.Duration
	// Retries says, in a few words, what the sender does after a failed
	// delivery ("retries for up to 3 days", "never retries"): what an
	// operator alert about refused deliveries tells the operator to expect.
	Retries string
	// OrderSources are the values of orders.source its events write.
	OrderSources []string
	// New builds the provider from its configuration.
	New func(Settings) (Provider, error)
	// Warnings, when set, says what start-up should warn of in the
	// provider's configuration (a setting left to a default that acts on
	// more than the operator may mean). Optional.
	Warnings func(Settings) []string
	// WrongSecretHint, when set, is logged with a delivery refused because
	// its signature matches no configured secret although the timestamp it
	// signs is fresh (RejectError.Timestamp SignedFresh): the mark of a
	// sender that signs with a secret this receiver does not hold, such as
	// a developer's `stripe listen`. It says which secret to use instead.
	WrongSecretHint string
	// Sign returns the headers of a delivery signed as the sender signs it:
	// its signature, what the sender signs beside the body (Standard
	// Webhooks' webhook-id and webhook-timestamp), and the sender's
	// Content-Type and User-Agent. For tests, the load generator and
	// examples; optional.
	//
	// Its header names must be canonical (http.CanonicalHeaderKey, as
	// http.Header.Set writes them: "Webhook-Signature", not
	// "webhook-signature"): tests delete and replace them with
	// http.Header's methods, which look for the canonical name only, and
	// the conformance suite fails a Sign that returns another.
	Sign func(SignInput) http.Header
	// Example returns a new delivery of an event the provider acts on,
	// not signed yet, its ids drawn from r so that no receiver has seen
	// them (a seeded r makes the same delivery again): what cmd/loadgen
	// sends for the provider, and what the conformance suite holds to
	// being processed. Optional.
	Example func(r *rand.Rand, at time.Time) Example
}

// SignInput is what Spec.Sign signs a delivery with.
type SignInput struct {
	Body   []byte    // the raw body, as sent
	Secret string    // one secret, as configured
	At     time.Time // when the sender signs it, for a sender that signs a time
	// ID is the sender's id of the delivery, for a sender that signs one
	// and sends it in a header of its own (Standard Webhooks' webhook-id):
	// Sign puts it there. The same id on every attempt of one delivery;
	// when empty, Sign uses MessageID. A sender that signs no id ignores
	// it: GitHub's X-GitHub-Delivery travels with the delivery's other
	// headers (Example.Header).
	ID string
}

// MessageID is in.ID, or when it is empty an id made from the body ("msg_"
// and 32 hex digits of its SHA-256): the same body, the same id, as a
// sender keeps one id for every attempt of a message.
func (in SignInput) MessageID() string {
	if in.ID != "" {
		return in.ID
	}
	sum := sha256.Sum256(in.Body)
	return "msg_" + hex.EncodeToString(sum[:16])
}

// Example is one delivery as a sender makes it, before Sign: the sender's
// id of it (SignInput.ID; Stripe's and Paddle's event id, GitHub's
// delivery GUID), its raw body, and the headers the sender sends with it
// beside those Sign returns (GitHub's X-GitHub-Event, X-GitHub-Delivery
// and X-GitHub-Hook-ID), with canonical names. Every attempt and replay of
// the delivery carries the same three.
type Example struct {
	ID     string
	Body   []byte
	Header http.Header
}

// Route is the path the provider's deliveries are posted to: Path, or
// /webhooks/<Source>.
func (s Spec) Route() string {
	if s.Path != "" {
		return s.Path
	}
	return "/webhooks/" + s.Source
}

// Handles reports whether the provider acts on events of type t.
func (s Spec) Handles(t string) bool {
	for _, h := range s.Types {
		if h == t {
			return true
		}
	}
	return false
}

// Var is one environment variable of a provider.
type Var struct {
	Name    string // the variable's name, e.g. <PROVIDER>_WEBHOOK_SECRET
	Doc     string // what it is, for docs/configuration.md's table
	Default string // used when unset
	// List: a comma-separated list (secrets while they are rotated).
	List bool
	// Secret: never logged; Mask says what start-up may log of a value.
	Secret bool
	// Check validates one value (each of a list); nil accepts any.
	Check func(value string) error
	// MinLen, when positive, is the fewest characters a value (each of a
	// list) may have: start-up refuses a shorter one.
	MinLen int
	// WarnLen, when positive, is the fewest characters a value (each of a
	// list) should have: start-up accepts a shorter one (if MinLen allows
	// it) with a warning.
	WarnLen int
	// Mask returns what may be logged of a secret value; nil logs "****".
	Mask func(value string) string
	// DevPrefix: `make run` sets an unset secret to DevPrefix followed by
	// 48 random hex digits (DevValue: repeated up to MinLen and WarnLen),
	// kept in var/dev-secrets.env.
	DevPrefix string
	// Dev, when set, writes the development and test values of a secret
	// whose text has a form of its own, from DevValue's random characters
	// (a Standard Webhooks secret: "whsec_" and the base64 of a key,
	// standardwebhooks.FormatSecret of the characters), so that Check
	// takes them. Nil: DevPrefix and the characters.
	Dev func(random string) string
	// DevHint is printed under the development secret `make run` sets.
	DevHint string
}

// DevValue is a value of v for development and tests (the secrets `make
// run` generates, the test receiver's): Dev(random) when v has Dev, else
// DevPrefix and random, random repeated until the value is as long as
// MinLen and WarnLen ask, so that start-up takes it without a word. Check
// must accept such a value (the conformance suite checks that start-up
// does).
func (v Var) DevValue(random string) string {
	if v.Dev != nil {
		return v.Dev(random)
	}
	s := v.DevPrefix + random
	for n := max(v.MinLen, v.WarnLen); random != "" && utf8.RuneCountInString(s) < n; {
		s += random
	}
	return s
}

// Fits reports whether start-up takes value without a word: Check accepts
// it, and it is as long as MinLen and WarnLen ask.
func (v Var) Fits(value string) bool {
	if v.Check != nil && v.Check(value) != nil {
		return false
	}
	return utf8.RuneCountInString(value) >= max(v.MinLen, v.WarnLen)
}

// Masked is what start-up logs of value.
func (v Var) Masked(value string) string {
	switch {
	case value == "":
		return ""
	case !v.Secret:
		return value
	case v.Mask != nil:
		return v.Mask(value)
	}
	return "****"
}

// Settings is a provider's configuration, as Spec.New receives it.
type Settings struct {
	Secrets     []string // the values of Spec.Secret, in order
	NotifyEmail string   // NOTIFY_EMAIL: who gets notices with no customer address
	// Entitlements: ENTITLEMENTS_FILE is set, and the provider's plans
	// follow the rows that grant entitlements (internal/entitlements.Follow).
	Entitlements bool
	// EntitlementSources are the providers the catalogue grants by (its
	// stripe, paddle, polar, github_marketplace lists that name an id).
	EntitlementSources []string
	// Env returns the value of one of Spec.Vars, already validated (its
	// default when unset), or of another Spec's (a second Spec of one
	// provider's folder reads the first's: Stripe's thin events, its API
	// key and filter).
	Env func(name string) string
}
