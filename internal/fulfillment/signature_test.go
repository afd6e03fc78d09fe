package fulfillment_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/standardwebhooks/standardwebhookstest"
)

// signedCalls makes n calls, each retried once, with a client signing with
// secret, to an API that requires secret's signature, and returns what the
// API received.
func signedCalls(t *testing.T, secret string, n int) []fulfillmenttest.Received {
	t.Helper()
	api := fulfillmenttest.NewServer(t)
	api.RequireSignature(t, secret)
	key, err := standardwebhooks.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	c := fulfillment.New(api.URL())
	c.Key = key
	for i := range n {
		r := sampleReq
		r.OrderID, r.ExternalID, r.CustomerEmail = int64(i+1), fmt.Sprintf("cs_test_%d", i), fmt.Sprintf("zoë+%d@example.org", i)
		for range 2 { // a retry is signed anew, under the same webhook-id
			if err := c.Fulfill(context.Background(), fulfillment.IdempotencyKey(fmt.Sprintf("evt_%d/fulfillment", i)), r); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
	}
	return api.Requests()
}

// TestSignedCalls: with a key, every call carries webhook-id (its
// Idempotency-Key), webhook-timestamp (now) and webhook-signature, which
// this project's verifier and the spec's Go library both accept
// (fulfillmenttest verifies with both).
func TestSignedCalls(t *testing.T) {
	secret := standardwebhooks.NewSecret()
	before := time.Now().Unix()
	got := signedCalls(t, secret, 5)
	if len(got) != 10 {
		t.Fatalf("%d calls received, want 10", len(got))
	}
	for i, r := range got {
		ts, _ := strconv.ParseInt(r.Header.Get("Webhook-Timestamp"), 10, 64)
		if r.SignatureError != "" || r.Header.Get("Webhook-Id") != r.IdempotencyKey || ts < before || ts > time.Now().Unix() ||
			!strings.HasPrefix(r.Header.Get("Webhook-Signature"), "v1,") {
			t.Errorf("call %d: %v; signature error %q", i, r.Header, r.SignatureError)
		}
	}
	t.Logf("10 signed calls: every one verified by internal/standardwebhooks and by the spec's Go library; first: webhook-id %s, "+
		"webhook-timestamp %s, webhook-signature %s", got[0].Header.Get("Webhook-Id"), got[0].Header.Get("Webhook-Timestamp"),
		got[0].Header.Get("Webhook-Signature"))
}

// TestUnsignedOrMissigned: an API that requires the signature refuses a
// call without one, or signed with another key, 401: a permanent failure.
func TestUnsignedOrMissigned(t *testing.T) {
	api := fulfillmenttest.NewServer(t)
	api.RequireSignature(t, standardwebhooks.NewSecret())
	other, _ := standardwebhooks.ParseSecret(standardwebhooks.NewSecret())
	for name, key := range map[string][]byte{"Unsigned": nil, "OtherKey": other} {
		c := fulfillment.New(api.URL())
		c.Key = key
		err := c.Fulfill(context.Background(), "fulfil-"+name, sampleReq)
		if !isPermanent(err) || !strings.Contains(err.Error(), "401") {
			t.Errorf("%s: %v, want a permanent 401", name, err)
		}
	}
	for _, r := range api.Requests() {
		if r.SignatureError == "" {
			t.Errorf("%s accepted", r.IdempotencyKey)
		}
	}
}

// TestSignedCallsVerifiedByTheJavaScriptLibrary: an API written in
// JavaScript with the npm package standardwebhooks verifies every call,
// and refuses each with a byte of its body changed.
func TestSignedCallsVerifiedByTheJavaScriptLibrary(t *testing.T) {
	js := standardwebhookstest.Install(t)
	secret := standardwebhooks.NewSecret()
	got := signedCalls(t, secret, 10)
	var msgs []standardwebhookstest.Message
	for _, r := range got {
		h := map[string]string{}
		for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
			h[k] = r.Header.Get(k)
		}
		msgs = append(msgs, standardwebhookstest.Message{Secret: secret, Body: string(r.Raw), Header: h})
		tampered := strings.Replace(string(r.Raw), `"amount_cents":3000`, `"amount_cents":1`, 1)
		msgs = append(msgs, standardwebhookstest.Message{Secret: secret, Body: tampered, Header: h})
	}
	accepted, refused := 0, map[string]int{}
	for i, res := range js.Verify(t, msgs) {
		switch {
		case i%2 == 0 && res != "":
			t.Errorf("call %d: the library refuses it: %s\n%s", i/2, res, msgs[i].Body)
		case i%2 == 1 && res == "":
			t.Errorf("call %d tampered: the library accepts it", i/2)
		case res == "":
			accepted++
		default:
			refused[res]++
		}
	}
	t.Logf("standardwebhooks@%s (npm) on %d fulfillment calls: %d verified; tampered bodies: %v; first call: %s %s",
		standardwebhookstest.Version, len(got), accepted, refused, msgs[0].Header, msgs[0].Body)
}
