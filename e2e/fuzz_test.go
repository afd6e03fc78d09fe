package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Fuzz targets for the code every request from the internet reaches before
// anything is written: Stripe's decoder and both providers' verification.
// `go test ./e2e` runs their seed corpora; `go test -run='^$'
// -fuzz=FuzzStripeVerify -fuzztime=30s ./e2e` fuzzes one.
//
// Properties: nothing panics; Verify never accepts a request that was not
// signed with the secret; a rejection is always a *webhooks.RejectError
// (answered 400, nothing written).

// fuzzNow is the "now" of every fuzzed verification.
var fuzzNow = time.Unix(1764460800, 0)

func fuzzSeedBodies() [][]byte {
	return [][]byte{
		checkout(1, "fuzz").Body,
		invoiceEvent(1, "fuzz", "invoice.paid").Body,
		unknownStripeEvent("evt_fuzz_unknown").Body,
		[]byte(`{"id":"evt_1","object":"event","type":"x","data":{"object":{}}}`),
		[]byte(`{"id":"evt_1","type":"x","data":{"object":null}}`),
		[]byte(`{"id":"evt_1","type":"x"}`),
		[]byte(`{"id":"evt_1","object":"charge","type":"x","data":{"object":{}}}`),
		[]byte(`{"id":"evt_1","type":"x","data":{"object":{}}} {}`),
		[]byte(`{"id":"evt_1","type":"x","data":{"object":{}},"request":"req_old"}`),
		[]byte(`null`), []byte(`[]`), []byte(`"x"`), []byte(`{`), []byte(``), []byte("\xff\xfe"),
		[]byte(`{"id":1,"type":["x"]}`),
	}
}

func FuzzStripeDecode(f *testing.F) {
	for _, b := range fuzzSeedBodies() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := stripe.Decode(body)
		if err != nil {
			var rej *webhooks.RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Decode error %v is not a *webhooks.RejectError", err)
			}
			return
		}
		if ev.ID == "" || ev.Key != ev.ID || ev.Type == "" || ev.Source != stripe.Source {
			t.Fatalf("Decode accepted an event without identity: %+v", ev)
		}
		if !bytes.Equal(ev.Body, body) {
			t.Fatalf("Decode changed the body")
		}
	})
}

// stripeSignedBy reports whether header carries a v1 signature of body by
// secret at a timestamp within the tolerance of now, the only thing a
// Stripe verifier may accept.
func stripeSignedBy(header string, body []byte, secret string, now time.Time) bool {
	var ts []string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = append(ts, v)
		case "v1":
			sigs = append(sigs, v)
		}
	}
	for _, t := range ts {
		secs, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			continue
		}
		at := time.Unix(secs, 0)
		if at.Sub(now).Abs() > stripe.Tolerance {
			continue
		}
		want := hmacHex(secret, []byte(t+"."+string(body)))
		for _, s := range sigs {
			if s == want {
				return true
			}
		}
	}
	return false
}

func FuzzStripeVerify(f *testing.F) {
	for _, b := range fuzzSeedBodies() {
		f.Add(signStripe(b, stripeSecret, fuzzNow), "application/json; charset=utf-8", b)
		f.Add(signStripe(b, "whsec_other", fuzzNow), "application/json", b)
		f.Add(signStripe(b, stripeSecret, fuzzNow.Add(-time.Hour)), "application/json", b)
		f.Add(signStripe(b, stripeSecret, fuzzNow.Add(time.Hour)), "", b)
	}
	b := checkout(2, "fuzz").Body
	good := signStripe(b, stripeSecret, fuzzNow)
	f.Add(good+",v0=deadbeef", "application/json", b)
	f.Add(strings.ReplaceAll(good, ",", ", "), "application/json", b)
	f.Add(fmt.Sprintf("t=%d,v1=", fuzzNow.Unix()), "application/json", b)
	f.Add("t=,v1=00", "application/json", b)
	f.Add("v1="+hmacHex(stripeSecret, b), "application/json", b)
	f.Add(good, "text/plain", b)
	f.Add(good, "application/json", append(append([]byte{}, b...), ' '))

	p := stripe.New([]string{stripeSecret})
	f.Fuzz(func(t *testing.T, header, contentType string, body []byte) {
		h := http.Header{"Stripe-Signature": {header}}
		if contentType != "" {
			h.Set("Content-Type", contentType)
		}
		ev, err := p.Verify(h, body, fuzzNow)
		if err != nil {
			var rej *webhooks.RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Verify error %v is not a *webhooks.RejectError", err)
			}
			return
		}
		if !stripeSignedBy(header, body, stripeSecret, fuzzNow) {
			t.Fatalf("Verify accepted a body not signed with the secret within the tolerance: header %q body %q", header, body)
		}
		if ev.ID == "" || ev.Key != ev.ID || !bytes.Equal(ev.Body, body) {
			t.Fatalf("accepted event without identity: %+v", ev)
		}
	})
}

// FuzzStripeVerifyMutatedBody signs a body properly, then changes one byte
// of it: the signature must no longer verify.
func FuzzStripeVerifyMutatedBody(f *testing.F) {
	for i, b := range fuzzSeedBodies() {
		f.Add(b, uint16(i*7), byte(1))
	}
	p := stripe.New([]string{stripeSecret})
	f.Fuzz(func(t *testing.T, body []byte, at uint16, xor byte) {
		if len(body) == 0 || xor == 0 {
			return
		}
		h := stripeHeader(body, stripeSecret, fuzzNow)
		mutated := append([]byte(nil), body...)
		mutated[int(at)%len(mutated)] ^= xor
		if _, err := p.Verify(h, mutated, fuzzNow); err == nil {
			t.Fatalf("Verify accepted a body changed after signing: %q -> %q", body, mutated)
		}
	})
}

func FuzzGitHubVerify(f *testing.F) {
	gh := purchase(1, "fuzz")
	form := []byte("payload=" + strings.ReplaceAll(string(gh.Body), "&", "%26"))
	for _, c := range []struct {
		sig, event, guid, hook, ctype string
		body                          []byte
	}{
		{signGitHub(gh.Body, githubSecret), "marketplace_purchase", gh.ID, hookID, "application/json", gh.Body},
		{signGitHub(form, githubSecret), "marketplace_purchase", gh.ID, hookID, "application/x-www-form-urlencoded", form},
		{signGitHub(gh.Body, "wrong-secret"), "marketplace_purchase", gh.ID, hookID, "application/json", gh.Body},
		{strings.ToUpper(signGitHub(gh.Body, githubSecret)), "ping", "guid-1", "", "application/json", gh.Body},
		{" " + signGitHub([]byte(`{}`), githubSecret) + " ", "ping", "guid-2", "1", "application/json; charset=utf-8", []byte(`{}`)},
		{signGitHub([]byte(`null`), githubSecret), "ping", "guid-3", "1", "application/json", []byte(`null`)},
		{signGitHub([]byte(`{}`), githubSecret), "ping", "a/b", "1", "application/json", []byte(`{}`)},
		{signGitHub([]byte(`{}`), githubSecret), "", "guid-4", "1", "application/json", []byte(`{}`)},
		{"sha256=", "ping", "guid-5", "1", "application/json", []byte(`{}`)},
		{"sha1=abc", "ping", "guid-6", "1", "application/json", []byte(`{}`)},
		{"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "ping", "guid-7", "1", "text/plain", []byte("Hello, World!")},
	} {
		f.Add(c.sig, c.event, c.guid, c.hook, c.ctype, c.body)
	}
	p := github.New([]string{githubSecret}, notifyEmail)
	f.Fuzz(func(t *testing.T, sig, event, guid, hook, ctype string, body []byte) {
		h := http.Header{}
		for k, v := range map[string]string{
			github.HeaderSignature256: sig, github.HeaderEvent: event, github.HeaderDelivery: guid,
			github.HeaderHookID: hook, "Content-Type": ctype,
		} {
			if v != "" {
				h.Set(k, v)
			}
		}
		ev, err := p.Verify(h, body, fuzzNow)
		if err != nil {
			var rej *webhooks.RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Verify error %v is not a *webhooks.RejectError", err)
			}
			return
		}
		if !strings.EqualFold(strings.TrimSpace(h.Get(github.HeaderSignature256)), "sha256="+hmacHex(githubSecret, body)) {
			t.Fatalf("Verify accepted a body not signed with the secret: sig %q body %q", sig, body)
		}
		if ev.ID != guid || !strings.Contains(ev.Key, guid) || strings.Contains(ev.Key, "/") || ev.Type != event {
			t.Fatalf("accepted event with a key that does not carry its GUID as sent: %+v (guid %q)", ev, guid)
		}
	})
}
