package paddle_test

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	paddlesdk "github.com/PaddleHQ/paddle-go-sdk/v4"

	paddle "github.com/paywebhooks/receiver/internal/providers/paddle"
)

// The secrets of the agreement checks: the one in use and the one being
// rotated out.
const (
	agreeSecret = "pdl_ntfset_01agreement_current"
	agreeOld    = "pdl_ntfset_01agreement_previous"
)

// sdkAccepts is paddle-go-sdk's WebhookVerifier, with the receiver's
// default tolerance, on one request.
func sdkAccepts(header string, body []byte, secret string) bool {
	req := httptest.NewRequest(http.MethodPost, "/webhooks/paddle", bytes.NewReader(body))
	req.Header.Set(paddle.HeaderSignature, header)
	ok, err := paddlesdk.NewWebhookVerifier(secret, paddlesdk.VerifierWithTimestampTolerance(paddle.DefaultTolerance)).Verify(req)
	return ok && err == nil
}

// accepts is the receiver's signature check: the header parsed, every h1
// against every secret, the ts within the default tolerance of now.
func accepts(header string, body []byte, now time.Time, secrets ...string) bool {
	sig, err := paddle.ParseSignature(header)
	return err == nil && sig.Match(body, secrets) >= 0 && sig.Check(now, paddle.DefaultTolerance) == nil
}

// agree checks the receiver against the SDK on header, expanded from a
// template: {ts} is now, {h1} the body's signature at now with the secret
// in use, {old} with the one rotated out; {ts-3}, {ts-60} and {ts+60} are
// other times, and {h1-3}, {h1-60}, {h1+60} the signatures at them. On a header with one h1 (or none
// the receiver can read), the receiver accepts exactly what the SDK
// accepts, with either secret; on a header with several, it accepts
// exactly when the SDK accepts one of them alone.
func agree(t *testing.T, tmpl string, body []byte) {
	t.Helper()
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	r := []string{"{ts}", ts, "{h1}", hex.EncodeToString(paddle.Sign(body, agreeSecret, ts)),
		"{old}", hex.EncodeToString(paddle.Sign(body, agreeOld, ts))}
	for _, d := range []string{"-3", "-60", "+60"} {
		n, _ := strconv.Atoi(d)
		at := strconv.FormatInt(now.Unix()+int64(n), 10)
		r = append(r, "{ts"+d+"}", at, "{h1"+d+"}", hex.EncodeToString(paddle.Sign(body, agreeSecret, at)))
	}
	header := strings.NewReplacer(r...).Replace(tmpl)
	sdk := func(secret string) bool {
		sig, err := paddle.ParseSignature(header)
		if err != nil || len(sig.H1) < 2 {
			return sdkAccepts(header, body, secret)
		}
		for _, h1 := range sig.H1 {
			if sdkAccepts("ts="+sig.TS+";h1="+hex.EncodeToString(h1), body, secret) {
				return true
			}
		}
		return false
	}
	if ours, theirs := accepts(header, body, now, agreeSecret), sdk(agreeSecret); ours != theirs {
		t.Fatalf("header %q: the receiver accepts: %v, paddle-go-sdk: %v", header, ours, theirs)
	}
	if ours, theirs := accepts(header, body, now, agreeOld, agreeSecret), sdk(agreeOld) || sdk(agreeSecret); ours != theirs {
		t.Fatalf("header %q with two secrets: the receiver accepts: %v, paddle-go-sdk with either: %v", header, ours, theirs)
	}
}

// agreementTemplates are headers the receiver and the SDK must judge
// alike: the seeds of FuzzSignatureAgreesWithSDK too.
var agreementTemplates = []string{
	"ts={ts};h1={h1}",
	"ts={ts};h1={old}",
	"  ts={ts};h1={h1}\t",
	"ts={ts};h1={h1};h1={old}",
	"ts={ts-3};h1={h1-3}",
	"ts={ts-60};h1={h1-60}",
	"ts={ts+60};h1={h1+60}",
	"ts={ts+60};h1={h1+60};h1={h1}",
	"ts={ts};h1=" + strings.Repeat("0", 64) + ";h1={h1}",
	"ts={ts}; h1={h1}",
	"ts={ts};h1={h1};",
	"ts={ts};h1={h1};h2=00",
	"h1={h1};ts={ts}",
	"ts=0{ts};h1={h1}",
	"ts=99999999999999999999;h1={h1}",
	"ts=1710929255;h1={h1}",
	"ts=;h1={h1}",
	"ts={ts},h1={h1}",
	"ts={ts};h1=" + strings.Repeat("A", 64),
	"ts={ts};h1={h1}0",
	"ts={ts};h1=",
	"ts={ts}",
	"",
}

// TestSignatureAgreesWithSDK holds the receiver's multi-h1 verifier to
// paddle-go-sdk's WebhookVerifier on every agreement template.
func TestSignatureAgreesWithSDK(t *testing.T) {
	for _, tmpl := range agreementTemplates {
		agree(t, tmpl, []byte(sdkPayload))
	}
	if !accepts(sdkSignature, []byte(sdkPayload), sdkSigned, sdkSecret) {
		t.Errorf("the SDK's published example is refused")
	}
}

// FuzzSignatureAgreesWithSDK: on any header and body, the receiver's
// verifier and paddle-go-sdk's agree, as agree says.
func FuzzSignatureAgreesWithSDK(f *testing.F) {
	for _, tmpl := range agreementTemplates {
		f.Add(tmpl, []byte(sdkPayload))
	}
	f.Add("ts={ts};h1={h1}", []byte{})
	f.Fuzz(func(t *testing.T, tmpl string, body []byte) {
		if len(body) > 1<<20 {
			return // the SDK reads 2 MB at most; the receiver's route, MAX_BODY_BYTES
		}
		agree(t, tmpl, body)
	})
}

// FuzzVerify feeds Verify any header and body: it never panics, and it
// accepts only a body its header signs, within the tolerance, that decodes
// to a notification.
func FuzzVerify(f *testing.F) {
	for _, name := range []string{completed, failed, adjPending, adjDone, customer} {
		f.Add("ts={ts};h1={h1}", suite.Body(f, name))
	}
	f.Add("ts={ts};h1={h1}", []byte(`{"event_id":"evt_1","event_type":"x","data":[]}`))
	f.Add("ts={ts};h1={h1}", []byte(`{"event_id":"evt_1","event_type":"transaction.completed","data":{"details":7}}`))
	p := paddle.New([]string{agreeSecret}, paddle.DefaultTolerance)
	f.Fuzz(func(t *testing.T, tmpl string, body []byte) {
		now := time.Now()
		ts := strconv.FormatInt(now.Unix(), 10)
		header := strings.NewReplacer("{ts}", ts, "{h1}", hex.EncodeToString(paddle.Sign(body, agreeSecret, ts))).Replace(tmpl)
		h := http.Header{}
		h.Set(paddle.HeaderSignature, header)
		ev, err := p.Verify(h, body, now)
		if err != nil {
			return
		}
		if !accepts(header, body, now, agreeSecret) || ev.Key == "" || ev.Type == "" || strings.Contains(ev.Key, "/") {
			t.Fatalf("accepted header %q, body %q as %+v", header, body, ev)
		}
	})
}
