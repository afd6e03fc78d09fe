package githubhook_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks/githubhook"
)

// FuzzVerify feeds Verify arbitrary bodies, signature headers and content
// types. It must never panic, and it may accept a delivery only when the
// signature is the body's and the payload it returns is a JSON object.
func FuzzVerify(f *testing.F) {
	for _, name := range history {
		body := rt.Fixture(f, name)
		f.Add(body, "sha256="+hex.EncodeToString(githubhook.Sign(body, rt.Secret(githubhook.Spec))), "application/json")
	}
	f.Add([]byte("payload=%7B%7D"), "sha256="+hex.EncodeToString(githubhook.Sign([]byte("payload=%7B%7D"), rt.Secret(githubhook.Spec))), "application/x-www-form-urlencoded")
	f.Add([]byte("Hello, World!"), "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "application/json")
	f.Add([]byte(`null`), "sha256="+hex.EncodeToString(githubhook.Sign([]byte(`null`), rt.Secret(githubhook.Spec))), "application/json; charset=utf-8")
	p := githubhook.New([]string{rt.Secret(githubhook.Spec)}, "")
	f.Fuzz(func(t *testing.T, body []byte, sig, contentType string) {
		h := http.Header{}
		h.Set("Content-Type", contentType)
		h.Set(githubhook.HeaderEvent, "ping")
		h.Set(githubhook.HeaderDelivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		h.Set(githubhook.HeaderSignature256, sig)
		ev, err := p.Verify(h, body, time.Now())
		if err != nil {
			return
		}
		if !strings.EqualFold(strings.TrimSpace(sig), "sha256="+hex.EncodeToString(githubhook.Sign(body, rt.Secret(githubhook.Spec)))) {
			t.Fatalf("accepted signature %q for a body it does not sign", sig)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(ev.Body, &obj) != nil || obj == nil || !bytes.Contains(ev.Body, []byte("{")) {
			t.Fatalf("accepted a payload that is not a JSON object: %q", ev.Body)
		}
	})
}
