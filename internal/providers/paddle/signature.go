package paddle

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// HeaderSignature is the header Paddle signs every notification in.
const HeaderSignature = "Paddle-Signature"

// Signature is a Paddle-Signature header, parsed once: the timestamp it
// signs, as sent and as a number, and every h1 in it (more than one while
// the destination's secret is rotated).
type Signature struct {
	TS string // the ts= digits, signed as sent
	At int64  // ts, in Unix seconds
	H1 webhooks.Signatures
}

var errInvalidHeader = errors.New("invalid Paddle-Signature header")

// ParseSignature reads "ts=<digits>;h1=<64 lowercase hex digits>", with
// h1 repeated any number of times, after trimming white space around it.
// With one h1 this is exactly what paddle-go-sdk accepts
// (`^ts=(\d+);h1=([a-f0-9]{64})$`, checked with a timestamp tolerance, so
// a ts that overflows int64 is refused), which a fuzz target holds us to:
// nothing else, no space after ';', no other element, no upper case.
func ParseSignature(header string) (Signature, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(header), "ts=")
	if !ok {
		return Signature{}, fmt.Errorf("%w: it does not start with ts=", errInvalidHeader)
	}
	ts, rest, _ := strings.Cut(rest, ";")
	if !digits(ts) {
		return Signature{}, fmt.Errorf("%w: ts=%s is not a number of seconds", errInvalidHeader, webhooks.Quote(ts, 24))
	}
	at, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Signature{}, fmt.Errorf("%w: ts=%s is out of range", errInvalidHeader, webhooks.Quote(ts, 24))
	}
	s := Signature{TS: ts, At: at}
	for _, part := range strings.Split(rest, ";") {
		v, ok := strings.CutPrefix(part, "h1=")
		if !ok || len(v) != 2*sha256.Size || strings.ToLower(v) != v {
			return Signature{}, fmt.Errorf("%w: %s is not h1=<64 lowercase hex digits>", errInvalidHeader, webhooks.Quote(part, 24))
		}
		h1, err := hex.DecodeString(v)
		if err != nil {
			return Signature{}, fmt.Errorf("%w: %s is not h1=<64 lowercase hex digits>", errInvalidHeader, webhooks.Quote(part, 24))
		}
		s.H1 = append(s.H1, h1)
	}
	return s, nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Match tries every h1 against every secret (webhooks.Signatures) and
// returns the position of the secret that signed body, or -1.
func (s Signature) Match(body []byte, secrets []string) int {
	return s.H1.Match(secrets, func(mac hash.Hash) { signed(mac, body, s.TS) })
}

// Check refuses a timestamp more than tolerance away from now, in either
// direction, in whole seconds as paddle-go-sdk compares them.
func (s Signature) Check(now time.Time, tolerance time.Duration) error {
	d := float64(now.Unix() - s.At)
	switch {
	case d > tolerance.Seconds():
		return webhooks.Reject("timestamp_too_old", fmt.Errorf("signed %gs ago; the tolerance is %s", d, tolerance))
	case -d > tolerance.Seconds():
		return webhooks.Reject("timestamp_in_future", fmt.Errorf("signed %gs ahead; the tolerance is %s", -d, tolerance))
	}
	return nil
}

// Sign is Paddle's h1: HMAC-SHA256 keyed with the notification
// destination's secret key over "<ts>:<raw body>".
func Sign(body []byte, secret, ts string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	signed(mac, body, ts)
	return mac.Sum(nil)
}

// signed writes what Paddle signs, "<ts>:<raw body>", to mac.
func signed(mac hash.Hash, body []byte, ts string) {
	mac.Write([]byte(ts))
	mac.Write([]byte{':'})
	mac.Write(body)
}

// SignatureHeader is the Paddle-Signature of body signed with each of
// secrets at the given time, as Paddle sends it (one h1 per secret).
func SignatureHeader(body []byte, at time.Time, secrets ...string) string {
	ts := strconv.FormatInt(at.Unix(), 10)
	var b strings.Builder
	b.WriteString("ts=" + ts)
	for _, s := range secrets {
		b.WriteString(";h1=" + hex.EncodeToString(Sign(body, s, ts)))
	}
	return b.String()
}
