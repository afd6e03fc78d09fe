package stripe_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The secrets of the fuzz targets: one in use and one being rolled out, as
// while a secret is rolled.
const (
	fuzzSecret    = "whsec_fuzz_current"
	fuzzOldSecret = "whsec_fuzz_previous"
)

// fuzzSigned is the time the seeds are signed at.
var fuzzSigned = time.Unix(1764460800, 0)

// fuzzSignatureReasons are the reasons Verify gives for a signature it does
// not accept; any other outcome means the signature was accepted (the body
// may still not be an Event).
var fuzzSignatureReasons = map[string]bool{
	"missing_signature": true, "invalid_header": true, "no_valid_signature": true,
	"timestamp_too_old": true, "timestamp_in_future": true,
}

// fuzzOneTimestamp returns the value of the header's t= element when it has
// exactly one.
func fuzzOneTimestamp(header string) (string, bool) {
	var ts []string
	for _, pair := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(pair, "t="); ok {
			ts = append(ts, v)
		}
	}
	if len(ts) != 1 {
		return "", false
	}
	return ts[0], true
}

// fuzzBodies are the seed bodies: the package's fixtures and a few that are
// not Events at all (the signature is checked first either way).
func fuzzBodies(f *testing.F) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, []byte(`{}`), []byte(``), []byte("\xff"), []byte(`{"id":"evt_1","object":"event","type":"x","data":{"object":{}}}`))
}

// FuzzVerifyAgreesWithStripeGo holds the provider's verifier to stripe-go
// v76's: on every Stripe-Signature header with exactly one t= element, for
// the same body and secrets, Verify accepts the signature exactly when
// webhook.ValidatePayloadIgnoringTolerance accepts it with one of the
// secrets. The timestamp tolerance is set aside by verifying at the signed
// time. (Headers with two t= elements are where the two must differ:
// stripe-go keeps the last one, Verify refuses the header.)
func FuzzVerifyAgreesWithStripeGo(f *testing.F) {
	sig := func(body []byte, secret, ts string) string {
		return hex.EncodeToString(stripe.Sign(body, secret, fuzzInt(ts)))
	}
	at := strconv.FormatInt(fuzzSigned.Unix(), 10)
	for _, b := range fuzzBodies(f) {
		good := stripe.SignatureHeader(b, fuzzSecret, fuzzSigned)
		f.Add(good, b)
		f.Add(stripe.SignatureHeader(b, fuzzOldSecret, fuzzSigned), b)
		f.Add(stripe.SignatureHeader(b, "whsec_someone_else", fuzzSigned), b)
		f.Add(good+",v0="+sig(b, fuzzSecret, at), b)
		f.Add(fmt.Sprintf("t=%s,v1=%s,v1=%s", at, sig(b, "whsec_x", at), sig(b, fuzzOldSecret, at)), b)
	}
	b := fuzzBodies(f)[0]
	good := stripe.SignatureHeader(b, fuzzSecret, fuzzSigned)
	for _, h := range []string{
		strings.ReplaceAll(good, ",", ", "),                          // a space after the comma
		strings.ToUpper(good[:2]) + good[2:],                         // T=
		"t=" + at + ",v1=" + strings.ToUpper(sig(b, fuzzSecret, at)), // upper-case hex
		"t=" + at + ",v1=",
		"t=" + at + ",v1=zz," + "v1=" + sig(b, fuzzSecret, at),
		"t=" + at + ",v1=" + sig(b, fuzzSecret, at) + ",v1=a=b",
		"t=" + at + ",,v1=" + sig(b, fuzzSecret, at),
		"t=" + at + ",=x,v1=" + sig(b, fuzzSecret, at),
		"t=" + at + ",v0=" + sig(b, fuzzSecret, at),
		"t=" + at,
		"t=+" + at + ",v1=" + sig(b, fuzzSecret, at),
		"t=00" + at + ",v1=" + sig(b, fuzzSecret, at),
		"t=" + at + ".0,v1=" + hex.EncodeToString(stripe.Sign(b, fuzzSecret, fuzzInt(at))),
		"t=,v1=00",
		"t=abc,v1=00",
		"t=-1,v1=" + sig(b, fuzzSecret, "-1"),
		"t=9223372036854775807,v1=" + sig(b, fuzzSecret, "9223372036854775807"),
		"t=9223372036854775808,v1=00",
		"v1=" + sig(b, fuzzSecret, at) + ",t=" + at,
		"t=" + at + ",t=" + at + ",v1=" + sig(b, fuzzSecret, at), // two t=: skipped by the target
	} {
		f.Add(h, b)
	}

	p := stripe.New([]string{fuzzSecret, fuzzOldSecret})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		ts, ok := fuzzOneTimestamp(header)
		if !ok {
			return
		}
		now := fuzzSigned
		if secs, err := strconv.ParseInt(ts, 10, 64); err == nil {
			now = time.Unix(secs, 0) // no tolerance to pass: verify at the signed time
		}
		h := http.Header{}
		h.Set("Stripe-Signature", header)
		h.Set("Content-Type", "application/json")
		_, err := p.Verify(h, body, now)
		ours := true
		if err != nil {
			var rej *webhooks.RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Verify error %v is not a *webhooks.RejectError", err)
			}
			ours = !fuzzSignatureReasons[rej.Reason]
		}
		var errs []error
		theirs := false
		for _, secret := range []string{fuzzSecret, fuzzOldSecret} {
			err := webhook.ValidatePayloadIgnoringTolerance(body, header, secret)
			theirs = theirs || err == nil
			errs = append(errs, err)
		}
		if ours != theirs {
			t.Fatalf("header %q, body %q: Verify at %d accepts the signature: %v (%v); stripe-go: %v (%v)",
				header, body, now.Unix(), ours, err, theirs, errors.Join(errs...))
		}
	})
}

func fuzzInt(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}
