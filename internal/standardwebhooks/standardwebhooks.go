// Package standardwebhooks signs and verifies messages the Standard
// Webhooks way (https://www.standardwebhooks.com, spec 1.0.0), as Svix,
// Polar and other senders sign their webhooks, and as the receiver signs
// its own calls to the fulfillment API:
//
//   - a message carries three headers: webhook-id, the sender's id of the
//     message, the same on every attempt; webhook-timestamp, when this
//     attempt was signed, in Unix seconds; and webhook-signature. Svix
//     sends the same values as svix-id, svix-timestamp and svix-signature;
//   - the signed content is "<webhook-id>.<webhook-timestamp>.<raw body>",
//     signed with HMAC-SHA256 and written in standard base64;
//   - webhook-signature is a space-separated list of "v1,<base64>" entries,
//     one per key the message is signed with (entries of another version,
//     such as the asymmetric "v1a,", are skipped);
//   - a symmetric secret is written "whsec_" followed by its key in
//     standard base64;
//   - a timestamp more than five minutes away from the receiver's clock,
//     either way, is refused.
//
// A Verifier tries every presented signature against every key of every
// configured secret (webhooks.Signatures) and reports which secret
// matched. A secret may stand for several candidate keys, for a sender
// whose keying of a secret cannot be told from its text: Polar keys a
// secret made before September 2026 with the UTF-8 bytes of the whole
// string, prefix included, and a later one with the decoded key.
package standardwebhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The headers of a message, with canonical names (http.CanonicalHeaderKey).
const (
	HeaderID        = "Webhook-Id"
	HeaderTimestamp = "Webhook-Timestamp"
	HeaderSignature = "Webhook-Signature"
	// Svix's names for the same three values.
	SvixHeaderID        = "Svix-Id"
	SvixHeaderTimestamp = "Svix-Timestamp"
	SvixHeaderSignature = "Svix-Signature"
)

// SecretPrefix starts a secret written the spec's way.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a message's timestamp may be from the
// receiver's clock, either way, as the reference libraries allow.
const DefaultTolerance = 5 * time.Minute

// The spec's bounds of a secret's key, in bytes.
const (
	MinKeyLen = 24
	MaxKeyLen = 64
)

// ErrSecret is why ParseSecret refused a secret.
var ErrSecret = errors.New(`not "whsec_" followed by a key in standard base64`)

// ParseSecret returns the key of a secret written the spec's way:
// "whsec_" followed by the key in standard base64, padded. It refuses
// anything else, an empty key included, with an error that never repeats
// the secret. The spec's bounds of a key's length (MinKeyLen, MaxKeyLen)
// are the caller's to enforce.
func ParseSecret(secret string) ([]byte, error) {
	text, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: it does not start with %s", ErrSecret, SecretPrefix)
	}
	key, err := b64.DecodeString(text)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: what follows %s is not standard base64", ErrSecret, SecretPrefix)
	case len(key) == 0:
		return nil, fmt.Errorf("%w: the key is empty", ErrSecret)
	}
	return key, nil
}

// FormatSecret writes key as a secret the spec's way: "whsec_" and the key
// in standard base64.
func FormatSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// NewSecret returns a new secret of 32 random bytes, written the spec's
// way.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return FormatSecret(key)
}

// Sign returns the signature of a message, as webhook-signature carries
// it: "v1," and the standard base64 of the HMAC-SHA256, keyed with key, of
// "<id>.<timestamp in Unix seconds>.<body>".
func Sign(key []byte, id string, at time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	signed(mac, id, at.Unix(), body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Headers returns the headers of a message signed with each of keys (one
// v1 entry per key, as a sender signs while a secret is rotated):
// webhook-id, webhook-timestamp and webhook-signature, with canonical
// names.
func Headers(id string, at time.Time, body []byte, keys ...[]byte) http.Header {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, id, at, body)
	}
	return http.Header{
		HeaderID:        {id},
		HeaderTimestamp: {strconv.FormatInt(at.Unix(), 10)},
		HeaderSignature: {strings.Join(sigs, " ")},
	}
}

// signed writes the signed content, "<id>.<ts>.<body>", to mac.
func signed(mac hash.Hash, id string, ts int64, body []byte) {
	var buf [20]byte
	_, _ = io.WriteString(mac, id)
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(buf[:0], ts, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
}

// Verifier verifies messages signed with any of its secrets' keys.
type Verifier struct {
	// Keys are the keys of each configured secret, in the configured
	// order: Keys[i] are the keys secret i may sign with. One for a secret
	// written the spec's way (ParseSecret); a sender's own rules may give
	// more (Polar: the decoded key and the UTF-8 bytes of the whole
	// string).
	Keys [][][]byte
	// Tolerance is how far a message's timestamp may be from now, either
	// way; 0 means DefaultTolerance.
	Tolerance time.Duration
}

// NewVerifier returns a Verifier of secrets written the spec's way, one
// key each (ParseSecret).
func NewVerifier(secrets ...string) (*Verifier, error) {
	v := &Verifier{}
	for i, s := range secrets {
		key, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		v.Keys = append(v.Keys, [][]byte{key})
	}
	return v, nil
}

// Message is what Verify read from a message it verified.
type Message struct {
	ID        string    // webhook-id, as sent
	Timestamp time.Time // webhook-timestamp
	Secret    int       // the position in Verifier.Keys of the secret that signed it
	Key       int       // the position of the key in that secret's keys
}

// Verify authenticates a message from its headers and raw body, as sent.
// It reads the webhook-* headers, or Svix's names for them; a message
// with both must give both the same values. Every v1 signature is tried
// against every key of every secret, and the timestamp must be within the
// tolerance of now, either way. A message it refuses gets a
// *webhooks.RejectError whose reason is missing_signature (no signature
// header), invalid_header (a header missing, repeated or unreadable, no
// v1 entry), no_valid_signature (with the freshness of the timestamp the
// message claims, for the alert on a sender signing with a secret this
// receiver does not hold: webhooks.RejectSignature), timestamp_too_old or
// timestamp_in_future; its error quotes no more than a bounded piece of
// any header.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Message, error) {
	id, ts, sig, err := read(h)
	if err != nil {
		return Message{}, err
	}
	at, err := parseTimestamp(ts)
	if err != nil {
		return Message{}, webhooks.Reject("invalid_header", err)
	}
	sigs, err := parseSignatures(sig)
	if err != nil {
		return Message{}, webhooks.Reject("invalid_header", err)
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	signedAt := time.Unix(at, 0)
	secret, key := sigs.MatchKeys(v.Keys, func(mac hash.Hash) { signed(mac, id, at, body) })
	if secret < 0 {
		fresh := webhooks.SignedFresh
		if d := now.Sub(signedAt); d > tol || -d > tol {
			fresh = webhooks.SignedStale
		}
		return Message{}, webhooks.RejectSignature(fresh,
			fmt.Errorf("no v1 signature matches %s (%s in webhook-signature)", webhooks.ConfiguredSecrets(len(v.Keys)),
				webhooks.Plural(len(sigs), "signature", "signatures")))
	}
	switch {
	case now.Sub(signedAt) > tol:
		return Message{}, webhooks.Reject("timestamp_too_old",
			fmt.Errorf("signed %s ago; the tolerance is %s", now.Sub(signedAt).Round(time.Second), tol))
	case signedAt.Sub(now) > tol:
		return Message{}, webhooks.Reject("timestamp_in_future",
			fmt.Errorf("signed %s ahead; the tolerance is %s", signedAt.Sub(now).Round(time.Second), tol))
	}
	return Message{ID: id, Timestamp: signedAt, Secret: secret, Key: key}, nil
}

// read returns the three values of a message's headers: the webhook-*
// ones, or Svix's, which must agree when both are sent.
func read(h http.Header) (id, ts, sig string, err error) {
	std, err := headerSet(h, HeaderID, HeaderTimestamp, HeaderSignature)
	if err != nil {
		return "", "", "", err
	}
	svix, err := headerSet(h, SvixHeaderID, SvixHeaderTimestamp, SvixHeaderSignature)
	if err != nil {
		return "", "", "", err
	}
	none := [3]string{}
	set := std
	switch {
	case std == none && svix == none:
		return "", "", "", webhooks.Reject("missing_signature", errors.New("no webhook-signature header"))
	case std == none:
		set = svix
	case svix != none && svix != std:
		return "", "", "", webhooks.Reject("invalid_header", errors.New("the webhook-* and svix-* headers differ"))
	}
	switch {
	case set[2] == "":
		return "", "", "", webhooks.Reject("missing_signature", errors.New("no webhook-signature header"))
	case set[0] == "":
		return "", "", "", webhooks.Reject("invalid_header", errors.New("no webhook-id header"))
	case set[1] == "":
		return "", "", "", webhooks.Reject("invalid_header", errors.New("no webhook-timestamp header"))
	}
	return set[0], set[1], set[2], nil
}

// headerSet returns the values of three headers, refusing one sent twice:
// which of two would count is nobody's guess.
func headerSet(h http.Header, names ...string) ([3]string, error) {
	var out [3]string
	for i, name := range names {
		switch vs := h.Values(name); len(vs) {
		case 0:
		case 1:
			out[i] = vs[0]
		default:
			return out, webhooks.Reject("invalid_header", fmt.Errorf("%d %s headers", len(vs), strings.ToLower(name)))
		}
	}
	return out, nil
}

// parseTimestamp reads webhook-timestamp: a whole number of seconds,
// digits only. The signed content has it as a number, as the reference
// libraries format it.
func parseTimestamp(ts string) (int64, error) {
	for i := range len(ts) {
		if ts[i] < '0' || ts[i] > '9' {
			return 0, fmt.Errorf("webhook-timestamp %s is not a whole number of seconds", webhooks.Quote(ts, 24))
		}
	}
	at, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("webhook-timestamp %s is out of range", webhooks.Quote(ts, 24))
	}
	return at, nil
}

// parseSignatures reads webhook-signature: space-separated entries, of
// which the v1 ones are decoded; an entry of another version, or a v1
// whose value is not the standard base64 of a SHA-256 MAC, is skipped as
// the reference libraries skip it (it matches nothing). A header without
// any v1 entry is refused. The signatures share one buffer, at most the
// size of the header.
func parseSignatures(header string) (webhooks.Signatures, error) {
	v1, size := 0, 0
	for e := range strings.SplitSeq(header, " ") {
		if value, ok := strings.CutPrefix(e, "v1,"); ok {
			v1++
			if n := b64.DecodedLen(len(value)); n <= maxEncodedMAC {
				size += n
			}
		}
	}
	if v1 == 0 {
		return nil, fmt.Errorf("no v1 signature in webhook-signature %s", webhooks.Quote(header, 40))
	}
	buf := make([]byte, 0, size)
	sigs := make(webhooks.Signatures, 0, v1)
	var src [base64Len]byte
	for e := range strings.SplitSeq(header, " ") {
		value, ok := strings.CutPrefix(e, "v1,")
		if !ok || b64.DecodedLen(len(value)) > maxEncodedMAC {
			continue
		}
		dst := buf[len(buf):cap(buf)]
		m, err := b64.Decode(dst, append(src[:0], value...))
		if err != nil {
			continue
		}
		sigs = append(sigs, dst[:m:m])
		buf = buf[:len(buf)+m]
	}
	return sigs, nil
}

// b64 is standard base64, refusing non-zero padding bits: one value for
// one MAC, as the reference libraries compare them.
var b64 = base64.StdEncoding.Strict()

// maxEncodedMAC is the most bytes base64's DecodedLen gives for the
// encoding of a SHA-256 MAC (44 characters: 33).
const maxEncodedMAC = (sha256.Size + 2) / 3 * 3

// base64Len is the longest base64 text whose DecodedLen is maxEncodedMAC.
const base64Len = maxEncodedMAC / 3 * 4
