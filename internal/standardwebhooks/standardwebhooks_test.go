package standardwebhooks_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	refgo "github.com/standard-webhooks/standard-webhooks/libraries/go"

	swh "github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/standardwebhooks/standardwebhookstest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The reference vector of the spec's Go library (libraries/go
// webhook_test.go), which its JavaScript library reproduces too.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorKey(t *testing.T) []byte {
	t.Helper()
	key, err := swh.ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestReferenceVector(t *testing.T) {
	key := vectorKey(t)
	at := time.Unix(vectorTS, 0)
	if got := swh.Sign(key, vectorID, at, []byte(vectorBody)); got != vectorSig {
		t.Fatalf("Sign = %s, want %s", got, vectorSig)
	}
	h := swh.Headers(vectorID, at, []byte(vectorBody), key)
	if h.Get("webhook-id") != vectorID || h.Get("webhook-timestamp") != strconv.Itoa(vectorTS) || h.Get("webhook-signature") != vectorSig {
		t.Fatalf("Headers = %v", h)
	}
	v, err := swh.NewVerifier(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v.Verify(h, []byte(vectorBody), at.Add(4*time.Minute))
	if err != nil || m.ID != vectorID || !m.Timestamp.Equal(at) || m.Secret != 0 || m.Key != 0 {
		t.Fatalf("Verify = %+v, %v", m, err)
	}
	if _, err := v.Verify(h, []byte(vectorBody), time.Now()); reason(err) != "timestamp_too_old" {
		t.Fatalf("Verify today: %v, want timestamp_too_old", err)
	}
}

func reason(err error) string {
	var re *webhooks.RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	if err != nil {
		return "not a RejectError: " + err.Error()
	}
	return ""
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	polarLegacy := "whsec_4fTzWQm0A2kV8rXc6PbN1yLh9JdGu3EsKoMZiq7e0vRtY" // not base64: keyed with its own bytes
	v := &swh.Verifier{Keys: [][][]byte{{key}, {[]byte("never"), []byte(polarLegacy)}}}
	body := []byte(`{"type":"order.paid","data":{"id":"4f2c"}}`)
	signed := func(id string, at time.Time, keys ...[]byte) http.Header { return swh.Headers(id, at, body, keys...) }
	set := func(h http.Header, kv ...string) http.Header {
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	svix := func(h http.Header) http.Header {
		return http.Header{
			swh.SvixHeaderID: h[swh.HeaderID], swh.SvixHeaderTimestamp: h[swh.HeaderTimestamp], swh.SvixHeaderSignature: h[swh.HeaderSignature],
		}
	}
	good := signed("msg_1", now, key)
	for _, c := range []struct {
		name   string
		h      http.Header
		body   []byte
		reason string
		secret int
		key    int
	}{
		{name: "OK", h: good},
		{name: "SecondSecretsSecondKey", h: signed("msg_1", now, []byte(polarLegacy)), secret: 1, key: 1},
		{name: "SvixNames", h: svix(good)},
		{name: "BothNamesAgreeing", h: set(svix(good), swh.HeaderID, "msg_1", swh.HeaderTimestamp, good.Get(swh.HeaderTimestamp),
			swh.HeaderSignature, good.Get(swh.HeaderSignature))},
		{name: "OneOfSeveral", h: signed("msg_1", now, other, key, other)},
		{name: "OtherVersionsSkipped", h: set(signed("msg_1", now, key), swh.HeaderSignature,
			"v1a,"+strings.Repeat("A", 86)+"== v2,xyz "+good.Get(swh.HeaderSignature)+" v1,notbase64!")},
		{name: "FourMinutesOld", h: signed("msg_1", now.Add(-4*time.Minute), key)},
		{name: "FourMinutesAhead", h: signed("msg_1", now.Add(4*time.Minute), key)},
		{name: "ErrNoHeaders", h: http.Header{}, reason: "missing_signature"},
		{name: "ErrNoSignature", h: set(signed("msg_1", now, key), swh.HeaderSignature, ""), reason: "missing_signature"},
		{name: "ErrNoID", h: set(signed("msg_1", now, key), swh.HeaderID, ""), reason: "invalid_header"},
		{name: "ErrNoTimestamp", h: set(signed("msg_1", now, key), swh.HeaderTimestamp, ""), reason: "invalid_header"},
		{name: "ErrTimestampNotDigits", h: set(signed("msg_1", now, key), swh.HeaderTimestamp, "+"+good.Get(swh.HeaderTimestamp)), reason: "invalid_header"},
		{name: "ErrTimestampOutOfRange", h: set(signed("msg_1", now, key), swh.HeaderTimestamp, strings.Repeat("9", 30)), reason: "invalid_header"},
		{name: "ErrNoV1", h: set(signed("msg_1", now, key), swh.HeaderSignature, "v1a,AAAA v2,BBBB"), reason: "invalid_header"},
		{name: "ErrTwoIDs", h: func() http.Header { h := signed("msg_1", now, key); h.Add(swh.HeaderID, "msg_2"); return h }(), reason: "invalid_header"},
		{name: "ErrNamesDisagree", h: set(svix(signed("msg_2", now, key)), swh.HeaderID, "msg_1", swh.HeaderTimestamp, good.Get(swh.HeaderTimestamp),
			swh.HeaderSignature, good.Get(swh.HeaderSignature)), reason: "invalid_header"},
		{name: "ErrMixedNames", h: set(svix(good), swh.SvixHeaderSignature, "", swh.HeaderSignature, good.Get(swh.HeaderSignature)), reason: "invalid_header"},
		{name: "ErrWrongKey", h: signed("msg_1", now, other), reason: "no_valid_signature"},
		{name: "ErrOtherID", h: set(signed("msg_1", now, key), swh.HeaderID, "msg_2"), reason: "no_valid_signature"},
		{name: "ErrOtherTimestamp", h: set(signed("msg_1", now, key), swh.HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10)), reason: "no_valid_signature"},
		{name: "ErrTamperedBody", h: good, body: append([]byte(`{"x":1}`), body...), reason: "no_valid_signature"},
		{name: "ErrSignatureAsHex", h: set(signed("msg_1", now, key), swh.HeaderSignature, "v1,"+fmt.Sprintf("%x", sha256.Sum256(body))), reason: "no_valid_signature"},
		{name: "ErrSixMinutesOld", h: signed("msg_1", now.Add(-6*time.Minute), key), reason: "timestamp_too_old"},
		{name: "ErrSixMinutesAhead", h: signed("msg_1", now.Add(6*time.Minute), key), reason: "timestamp_in_future"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.body
			if b == nil {
				b = body
			}
			m, err := v.Verify(c.h, b, now)
			if got := reason(err); got != c.reason {
				t.Fatalf("reason %q (%v), want %q", got, err, c.reason)
			}
			if err == nil && (m.ID != c.h.Get(swh.HeaderID) && m.ID != c.h.Get(swh.SvixHeaderID) || m.Secret != c.secret || m.Key != c.key) {
				t.Errorf("message %+v, want secret %d key %d", m, c.secret, c.key)
			}
			if err != nil && strings.Contains(err.Error(), string(key)) {
				t.Errorf("the error repeats the key: %v", err)
			}
		})
	}
	t.Run("FreshnessOfAWrongSignature", func(t *testing.T) {
		// A signature no secret makes is told apart by what its timestamp
		// claims (the alert on a sender signing with a secret this
		// receiver does not hold counts the fresh ones only).
		for d, want := range map[time.Duration]webhooks.SignedTimestamp{
			0: webhooks.SignedFresh, -4 * time.Minute: webhooks.SignedFresh, 4 * time.Minute: webhooks.SignedFresh,
			-6 * time.Minute: webhooks.SignedStale, 6 * time.Minute: webhooks.SignedStale,
		} {
			_, err := v.Verify(signed("msg_1", now.Add(d), other), body, now)
			var re *webhooks.RejectError
			if !errors.As(err, &re) || re.Reason != "no_valid_signature" || re.Timestamp != want {
				t.Errorf("signed %s from now with a wrong key: %v (%+v), want no_valid_signature, %s", d, err, re, want)
			}
		}
	})
	t.Run("Tolerance", func(t *testing.T) {
		strict := &swh.Verifier{Keys: v.Keys, Tolerance: 5 * time.Second}
		if _, err := strict.Verify(signed("msg_1", now.Add(-6*time.Second), key), body, now); reason(err) != "timestamp_too_old" {
			t.Errorf("6 s old with a 5 s tolerance: %v", err)
		}
		if _, err := strict.Verify(signed("msg_1", now.Add(-5*time.Second), key), body, now); err != nil {
			t.Errorf("5 s old with a 5 s tolerance: %v", err)
		}
	})
}

func TestParseSecret(t *testing.T) {
	for _, c := range []struct {
		secret string
		ok     bool
	}{
		{vectorSecret, true},
		{swh.FormatSecret([]byte{1, 2, 3}), true},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},                    // no prefix
		{"whsec_", false},                                              // no key
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=", false},             // bad padding
		{"whsec_MfKQ9r8G-YqrTwjUPD8ILPZIo2LaLaSw", false},              // base64url
		{"whsec_4fTzWQm0A2kV8rXc6PbN1yLh9JdGu3EsKoMZiq7e0vRtY", false}, // Polar's legacy form: 43 characters
		{"polar_whs_4fTzWQm0A2kV8rXc6PbN1yLh9JdGu3EsKoMZiq7e0vRtY", false},
	} {
		key, err := swh.ParseSecret(c.secret)
		if (err == nil) != c.ok {
			t.Errorf("ParseSecret(%q) = %x, %v; want ok %v", c.secret, key, err, c.ok)
		}
		if tail := c.secret[min(len(c.secret), 6):]; err != nil && (!errors.Is(err, swh.ErrSecret) || tail != "" && strings.Contains(err.Error(), tail)) {
			t.Errorf("ParseSecret(%q): error %q is not ErrSecret or repeats the secret", c.secret, err)
		}
	}
	s := swh.NewSecret()
	if key, err := swh.ParseSecret(s); err != nil || len(key) != 32 || s == swh.NewSecret() {
		t.Errorf("NewSecret %q: %x, %v", s, key, err)
	}
}

// messages are random messages, as a sender could send them: ids of
// Svix's and Polar's forms, bodies of every size up to 8 KiB with
// non-ASCII text, timestamps within a minute of now.
func messages(n int, now time.Time) []struct {
	id   string
	at   time.Time
	body []byte
} {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	out := make([]struct {
		id   string
		at   time.Time
		body []byte
	}, n)
	for i := range out {
		id := fmt.Sprintf("msg_%x", r.Uint64())
		if i%2 == 1 {
			id = fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff, r.Uint32()&0xfff, r.Uint64()&0xffffffffffff)
		}
		body := fmt.Sprintf(`{"type":"order.paid","n":%d,"note":"café ✓ %s"}`, i, strings.Repeat("x", r.IntN(8<<10)))
		out[i].id, out[i].at, out[i].body = id, now.Add(-time.Duration(r.IntN(60))*time.Second), []byte(body)
	}
	return out
}

// TestAgreesWithTheGoReference holds Sign and Verify to the spec's Go
// library (github.com/standard-webhooks/standard-webhooks/libraries/go),
// both ways.
func TestAgreesWithTheGoReference(t *testing.T) {
	secret := swh.NewSecret()
	key, _ := swh.ParseSecret(secret)
	ref, err := refgo.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := swh.NewVerifier(secret)
	now := time.Now()
	if vref, _ := refgo.NewWebhook(vectorSecret); vref == nil {
		t.Fatal("the reference refuses the vector's secret")
	} else if got, _ := vref.Sign(vectorID, time.Unix(vectorTS, 0), []byte(vectorBody)); got != vectorSig {
		t.Fatalf("the reference signs the vector %s, want %s", got, vectorSig)
	}
	msgs := messages(200, now)
	for i, m := range msgs {
		ours := swh.Headers(m.id, m.at, m.body, key)
		if err := ref.Verify(m.body, ours); err != nil {
			t.Fatalf("message %d: the reference refuses ours: %v", i, err)
		}
		theirs, err := ref.Sign(m.id, m.at, m.body)
		if err != nil || theirs != ours.Get(swh.HeaderSignature) {
			t.Fatalf("message %d: the reference signs %s (%v), we %s", i, theirs, err, ours.Get(swh.HeaderSignature))
		}
		h := http.Header{}
		h.Set("webhook-id", m.id)
		h.Set("webhook-timestamp", strconv.FormatInt(m.at.Unix(), 10))
		h.Set("webhook-signature", theirs)
		if _, err := v.Verify(h, m.body, now); err != nil {
			t.Fatalf("message %d: we refuse the reference's: %v", i, err)
		}
		// Both refuse a tampered body.
		tampered := append([]byte(" "), m.body...)
		if ref.Verify(tampered, ours) == nil {
			t.Fatalf("message %d: the reference accepts a tampered body", i)
		}
		if _, err := v.Verify(h, tampered, now); reason(err) != "no_valid_signature" {
			t.Fatalf("message %d: we accept a tampered body: %v", i, err)
		}
	}
	t.Logf("%d messages (bodies up to 8 KiB): the Go reference library verifies every one we sign, signs each exactly as we do, "+
		"and we verify every one it signs; both refuse every tampered body", len(msgs))
}

// TestAgreesWithTheJavaScriptReference holds Sign and Verify to the npm
// package standardwebhooks, both ways, with secrets written the spec's
// way and with raw keys (Polar's legacy keying: the UTF-8 bytes of the
// whole secret).
func TestAgreesWithTheJavaScriptReference(t *testing.T) {
	js := standardwebhookstest.Install(t)
	now := time.Now()
	secret := swh.NewSecret()
	key, _ := swh.ParseSecret(secret)
	legacy := "whsec_4fTzWQm0A2kV8rXc6PbN1yLh9JdGu3EsKoMZiq7e0vRtY"
	v := &swh.Verifier{Keys: [][][]byte{{key}, {[]byte(legacy)}}}
	msgs := messages(100, now)

	// The reference vector, signed by the library.
	vec := js.Sign(t, []standardwebhookstest.Message{{Secret: vectorSecret, ID: vectorID, Timestamp: vectorTS, Body: vectorBody}})
	if vec[0] != vectorSig {
		t.Fatalf("the library signs the vector %s, want %s", vec[0], vectorSig)
	}
	t.Logf("reference vector, signed by standardwebhooks@%s: %s", standardwebhookstest.Version, vec[0])

	// Ours, verified by theirs: good ones accepted, bad ones refused.
	var toVerify []standardwebhookstest.Message
	var want []bool
	for i, m := range msgs {
		k, jm := key, standardwebhookstest.Message{Secret: secret, Body: string(m.body)}
		if i%3 == 2 {
			k, jm = []byte(legacy), standardwebhookstest.Message{RawKey: []byte(legacy), Body: string(m.body)}
		}
		h := swh.Headers(m.id, m.at, m.body, k)
		jm.Header = map[string]string{"webhook-id": h.Get(swh.HeaderID), "webhook-timestamp": h.Get(swh.HeaderTimestamp),
			"webhook-signature": h.Get(swh.HeaderSignature)}
		toVerify, want = append(toVerify, jm), append(want, true)
		bad := jm
		bad.Body = jm.Body + " "
		toVerify, want = append(toVerify, bad), append(want, false)
	}
	accepted, refused := 0, 0
	for i, res := range js.Verify(t, toVerify) {
		if (res == "") != want[i] {
			t.Errorf("message %d: the library says %q, want accepted %v", i, res, want[i])
		}
		if res == "" {
			accepted++
		} else {
			refused++
		}
	}
	t.Logf("our signatures, verified by standardwebhooks@%s: %d accepted, %d tampered refused", standardwebhookstest.Version, accepted, refused)

	// Theirs, verified by ours.
	var toSign []standardwebhookstest.Message
	for i, m := range msgs {
		jm := standardwebhookstest.Message{Secret: secret, ID: m.id, Timestamp: m.at.Unix(), Body: string(m.body)}
		if i%3 == 2 {
			jm = standardwebhookstest.Message{RawKey: []byte(legacy), ID: m.id, Timestamp: m.at.Unix(), Body: string(m.body)}
		}
		toSign = append(toSign, jm)
	}
	for i, sig := range js.Sign(t, toSign) {
		m := msgs[i]
		h := http.Header{}
		h.Set(swh.HeaderID, m.id)
		h.Set(swh.HeaderTimestamp, strconv.FormatInt(m.at.Unix(), 10))
		h.Set(swh.HeaderSignature, sig)
		got, err := v.Verify(h, m.body, now)
		wantSecret := 0
		if i%3 == 2 {
			wantSecret = 1
		}
		if err != nil || got.Secret != wantSecret {
			t.Errorf("message %d signed by the library (%s): %+v, %v", i, sig, got, err)
		}
		if _, err := v.Verify(h, append(m.body, ' '), now); reason(err) != "no_valid_signature" {
			t.Errorf("message %d tampered: %v", i, err)
		}
	}
	t.Logf("signatures by standardwebhooks@%s, verified by ours: %d accepted (%d keyed with raw bytes), every tampered one refused",
		standardwebhookstest.Version, len(toSign), len(toSign)/3)
}

// TestSignatureEntriesBound: however many entries webhook-signature has,
// verifying it costs the same allocations (one buffer holds every
// signature's bytes, at most the header's size).
func TestSignatureEntriesBound(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	v := &swh.Verifier{Keys: [][][]byte{{key}}}
	now := time.Unix(1_800_000_000, 0)
	allocs := func(entries int) float64 {
		h := swh.Headers("msg_1", now, []byte("{}"), key)
		junk := strings.Repeat("v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" ", entries-1)
		h.Set(swh.HeaderSignature, junk+h.Get(swh.HeaderSignature))
		return testing.AllocsPerRun(20, func() {
			if _, err := v.Verify(h, []byte("{}"), now); err != nil {
				t.Fatal(err)
			}
		})
	}
	if one, many := allocs(1), allocs(1001); many != one {
		t.Errorf("%v allocations to verify a header of one entry, %v for 1001", one, many)
	}
}
