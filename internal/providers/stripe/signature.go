package stripe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// signature is a Stripe-Signature header, parsed once: the one timestamp
// it signs, and every v1 signature in it (one per active secret while a
// secret is rolled). v0 and unknown elements are ignored, as Stripe asks.
type signature struct {
	at int64
	v1 webhooks.Signatures
}

var errInvalidHeader = errors.New("invalid Stripe-Signature header")

// parseSignature reads "t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]". It refuses
// what could make the timestamp checked against the clock differ from the
// one the signature covers: more than one t=, or one that is not an
// integer. Elements are split as stripe-go splits them, so that a header
// with one t= is read the same way (a fuzz target holds the two together).
func parseSignature(header string) (signature, error) {
	var s signature
	seenT := false
	for _, pair := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || strings.Contains(v, "=") {
			return signature{}, fmt.Errorf("%w: element %s is not key=value", errInvalidHeader, quote(pair))
		}
		switch k {
		case "t":
			if seenT {
				return signature{}, fmt.Errorf("%w: more than one t=", errInvalidHeader)
			}
			seenT = true
			at, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return signature{}, fmt.Errorf("%w: t=%s is not a whole number of seconds", errInvalidHeader, quote(v))
			}
			s.at = at
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil {
				continue // not a signature Stripe made; the others may be
			}
			s.v1 = append(s.v1, sig)
		}
	}
	switch {
	case !seenT:
		return signature{}, fmt.Errorf("%w: no t=", errInvalidHeader)
	case len(s.v1) == 0:
		return signature{}, fmt.Errorf("%w: no v1= signature", errInvalidHeader)
	}
	return s, nil
}

// match tries every v1 signature against every secret (webhooks.Signatures)
// and returns the position of the secret that signed body at s.at, or -1.
func (s signature) match(body []byte, secrets []string) int {
	return s.v1.Match(secrets, func(mac hash.Hash) { signed(mac, body, s.at) })
}

// signed writes what Stripe signs, "<t>.<body>", to mac.
func signed(mac hash.Hash, body []byte, at int64) {
	var buf [20]byte
	mac.Write(strconv.AppendInt(buf[:0], at, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
}

// Sign is Stripe's v1 signature: HMAC-SHA256 keyed with the whole whsec_
// secret over "<t>.<body>".
func Sign(body []byte, secret string, at int64) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	signed(mac, body, at)
	return mac.Sum(nil)
}

// quote is a header part for an error: short, escaped.
func quote(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "…"
	}
	return strconv.Quote(s)
}
