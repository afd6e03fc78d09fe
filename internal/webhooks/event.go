package webhooks

import (
	"bytes"
	"context"
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"
)

// Event is one verified delivery, reduced to what the processor needs. It
// is rebuilt from its claim row for replays, so every field but Payload
// and SecretIndex is stored.
type Event struct {
	Source     string // the provider's Spec.Source
	Key        string // dedupe key: the Stripe event id, GitHub "<hook id>:<delivery GUID>:<body hash>", …
	ID         string // the provider's event id as sent: Stripe evt_…, GitHub delivery GUID
	Type       string // "checkout.session.completed", "marketplace_purchase", …
	APIVersion string // the event's API version, for providers that have one
	Body       []byte // the event's JSON as sent (GitHub form bodies: the payload field)
	// BodyHash, when set, is unique among stored events: a provider whose
	// deliveries carry an unsigned identity (GitHub's GUID) sets it from
	// what is signed, so that a signed body replayed under a new identity
	// is recognised as a copy, and puts part of it in Key, so that no body
	// takes the key of another.
	BodyHash []byte
	Via      Via

	// Resent is the sender's own word, in what it signed, that this
	// delivery is a later attempt of an event it sent before (see
	// LikelyResent): the processor then looks the event up first, and a
	// copy of a finished event is answered from that one read, without
	// sending its body. A hint only: it chooses which of two correct paths
	// runs first, and a wrong guess costs one round trip. Never stored.
	Resent bool

	// Payload is the provider's own decoding of Body, made once by Verify
	// and read by Plan; nil for an event read back from the database, which
	// Plan decodes itself. Never stored.
	Payload any
	// SecretIndex is the position, in the configured list, of the secret
	// that verified the delivery. Never stored.
	SecretIndex int

	// Fetch, when set by Verify, says that the delivery only names its
	// event (Stripe's thin events), and returns the event whole, as the
	// sender's API tells it now: the same Source and Key, the body to
	// store and plan. The processor calls it only for an event it holds
	// no claim of (a copy costs the read of its claims, no call), before
	// the event's transaction; an error is answered 503 (OutcomeFetchFailed)
	// with nothing written, and the sender retries. It bounds its own calls
	// (the API's retries, time and response size) and may refuse at once
	// when too many fetches are under way. Never stored: an event read
	// back from its claim is whole.
	Fetch func(ctx context.Context) (Event, error)
}

// ResendAge is how long after an event was created a sender must have
// signed a delivery of it for the delivery to count as a resend. Stripe
// and Paddle deliver an event seconds after it happened; their retries
// come minutes to days later, each signed anew, and so do `stripe events
// resend` and a dashboard's or API's replay.
const ResendAge = time.Minute

// LikelyResent reports whether a delivery signed at signedAt of an event
// created at createdAt (both taken from what the sender signed) is likely
// a resend: signed ResendAge or more after the event was created. A zero
// createdAt (the event says nothing of when it happened) is no resend.
func LikelyResent(signedAt, createdAt time.Time) bool {
	return !createdAt.IsZero() && signedAt.Sub(createdAt) >= ResendAge
}

// TimeHint is a time as a sender wrote it in a body (RFC 3339), read only
// as a hint, as LikelyResent's createdAt: anything but a JSON string reads
// as "", and it never fails the decode of the event.
type TimeHint string

// UnmarshalJSON keeps a JSON string as it is, and anything else as "".
func (h *TimeHint) UnmarshalJSON(b []byte) error {
	var s string
	if UnmarshalSigned(b, &s) == nil {
		*h = TimeHint(s)
	}
	return nil
}

// Time is the hint's time; zero when it is none or not RFC 3339.
func (h TimeHint) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, string(h))
	return t
}

// Provider is one webhook sender. Adding a provider means implementing it
// in a package of its own, describing it with a Spec, and adding that Spec
// to internal/providers (see docs/adding-an-integration.md).
type Provider interface {
	// Verify authenticates a delivery from its headers and raw body and
	// returns the event it carries. It returns a *RejectError for anything
	// that is not a genuine delivery; nothing is written for those.
	Verify(h http.Header, body []byte, now time.Time) (Event, error)

	// Plan queues the event's database writes and its steps on p, without
	// doing any I/O: the processor sends them with the event's claim and
	// COMMIT in one round trip, and the writes run only if this
	// transaction made the claim. Whatever must depend on what a write did
	// (an email only if the order changed) is decided in SQL, by the
	// condition a step is planned with. It returns an error wrapping
	// ErrUnhandled for an event type the provider ignores, and one wrapping
	// ErrUnprocessable for an event whose fields cannot be read.
	Plan(ev *Event, p *Plan) error
}

var (
	// ErrUnhandled marks an event type this receiver acknowledges and ignores.
	ErrUnhandled = errors.New("event type not handled")
	// ErrUnprocessable marks a verified event whose fields a handler needs
	// cannot be read. The event is parked with its body and the error.
	ErrUnprocessable = errors.New("event cannot be processed")
)

// Unprocessable wraps a description so that it matches ErrUnprocessable.
func Unprocessable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnprocessable, fmt.Sprintf(format, args...))
}

// RejectError is a delivery refused before anything is written. Reason is
// a short, fixed label for logs and metrics ("no_valid_signature"): never
// a value taken from the request.
type RejectError struct {
	Reason string
	Err    error
	// Timestamp is, for a signature that matches no configured secret,
	// what the timestamp the request claims to sign says: within the
	// provider's tolerance (a sender signing with a secret this receiver
	// does not hold, or someone who forges requests with the clock's
	// time) or not; "" for a sender that signs no timestamp.
	Timestamp SignedTimestamp
}

// SignedTimestamp is how fresh the timestamp of a request whose signature
// matched no secret was.
type SignedTimestamp string

const (
	SignedFresh SignedTimestamp = "fresh" // within the provider's tolerance
	SignedStale SignedTimestamp = "stale" // outside it: an old request replayed, or a skewed clock
)

// ReasonNoValidSignature is the rejection of a request signed, but with no
// signature any configured secret makes.
const ReasonNoValidSignature = "no_valid_signature"

// RejectSignature is a *RejectError for a signature that matches no
// configured secret, with the freshness of the timestamp it claims to sign
// ("" for a sender that signs none).
func RejectSignature(t SignedTimestamp, err error) error {
	return &RejectError{Reason: ReasonNoValidSignature, Err: err, Timestamp: t}
}

func (e *RejectError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *RejectError) Unwrap() error { return e.Err }

// Reject builds a *RejectError.
func Reject(reason string, err error) error { return &RejectError{Reason: reason, Err: err} }

// KeySafe reports whether a sender's id can be a claim key as sent: up to
// 100 letters, digits, '_', '-' or '.', so no '/' (which separates an
// event's key from its steps') and nothing an operator's LIKE trips on.
func KeySafe(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Quote is fmt's %q of an unsigned value, cut to max bytes first, for
// errors and log lines: a header or field no sender signed goes nowhere
// without a bound.
func Quote(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("%q… (%d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// UnmarshalSigned decodes a verified body, or a part of one, into v: the
// one decoder of event bodies, for every provider. A verified body is what
// its sender sent, byte for byte (and a stored or fetched one was verified
// or came over TLS from the provider's API), so json/v2's check for
// duplicate member names, which encoding/json never made, is left out: it
// tracks every name of every object, skipped ones too, and was half the
// decode of a 5.9 KB invoice.paid (21 µs against 10). A name that does
// repeat is decoded again over what came before: a scalar reads as its
// last value, as PostgreSQL's jsonb reads it; an object's members merge.
// So the processor parks an event whose body repeats a name before its
// provider plans it (RepeatedName): what Verify reads of such a body (its
// id, its type) only names the event, and nothing acts on it.
func UnmarshalSigned(b []byte, v any) error {
	return jsonv2.Unmarshal(b, v, signedBody)
}

// Members is an object whose members DecodeMembers reads: Member returns
// a pointer to where the value of the member named name goes, or nil for a
// member it does not read.
type Members interface {
	Member(name []byte) any
}

// DecodeMembers reads the JSON object at dec's position into o member by
// member, each value as json/v2 decodes it into the field Member points
// to, every other member skipped; null leaves o as it is. It is what
// json/v2 does for a struct, without the two look-ups of every member it
// does not know (by its name, then by its case-folded name, in maps):
// a provider's object has dozens of those (a Stripe invoice of 69 members
// is read for about ten), and the look-ups were a third of its decode.
func DecodeMembers(dec *jsontext.Decoder, o Members) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		return fmt.Errorf("cannot read JSON %s as an object", v.Kind())
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		v, err := dec.ReadValue() // the member's name, quoted
		if err != nil {
			return err
		}
		name := []byte(v[1 : len(v)-1])
		if bytes.IndexByte(name, '\\') >= 0 {
			if name, err = jsontext.AppendUnquote(nil, v); err != nil {
				return err
			}
		}
		if p := o.Member(name); p != nil {
			err = jsonv2.UnmarshalDecode(dec, p)
		} else {
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// ValidSigned reports whether b is JSON as UnmarshalSigned reads it: what
// tells a body that is no JSON from one whose fields are not of the
// expected types.
func ValidSigned(b []byte) bool { return jsontext.Value(b).IsValid(signedBody) }

var signedBody = jsontext.AllowDuplicateNames(true)

// ErrRepeatedName marks a verified body whose JSON repeats a member name
// in one object. Such a body is kept and parked for an operator, never
// acted on: UnmarshalSigned would merge the two (the email of one "data"
// with the amount of the other), and nobody can say which the sender meant.
var ErrRepeatedName = errors.New("repeated member name")

// RepeatedName returns an error wrapping ErrRepeatedName that names the
// first member name body repeats, and where; nil when no object of body
// repeats a name, or when body is no JSON at all (which the provider's
// Verify and Plan judge). The processor asks it of every event before its
// Plan (not of a copy it already knows from a lookup): one allocation-free
// pass of its own (scanNames) answers for a body whose names are all plain;
// json/v2's validator, which tracks every name of every object, is asked
// only of a body that pass finds a repeat in or cannot judge, and a second
// json/v2 pass, to say which name, only when the validator fails.
func RepeatedName(body []byte) error {
	if repeats, sure := scanNames(body); sure && !repeats {
		return nil
	}
	if jsontext.Value(body).IsValid() {
		return nil
	}
	d := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowInvalidUTF8(true))
	_, err := d.ReadValue()
	var serr *jsontext.SyntacticError
	if !errors.As(err, &serr) || !errors.Is(serr.Err, jsontext.ErrDuplicateName) {
		return nil
	}
	where := serr.JSONPointer.Parent()
	if where == "" {
		where = "/"
	}
	return fmt.Errorf("%w %s in the object at %s: the event is not acted on", ErrRepeatedName,
		Quote(serr.JSONPointer.LastToken(), 64), Quote(string(where), 200))
}

// MediaType is mime.ParseMediaType's media type of a Content-Type header,
// without its parameters, and without building their map for the forms
// senders use (application/json, with or without "; charset=utf-8"): what a
// provider that looks at Content-Type checks it with.
func MediaType(contentType string) (string, error) {
	switch contentType {
	case "application/json", "application/json; charset=utf-8":
		return "application/json", nil
	case "application/x-www-form-urlencoded":
		return contentType, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return mt, err
}
