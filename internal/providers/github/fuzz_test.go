package github_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	github "github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The secrets of the fuzz targets: the one in use and one being rotated out.
const (
	fuzzSecret    = "github-fuzz-current"
	fuzzOldSecret = "github-fuzz-previous"
)

// fuzzSig is X-Hub-Signature-256 of body signed with secret.
func fuzzSig(body []byte, secret string) string {
	return "sha256=" + hex.EncodeToString(github.Sign(body, secret))
}

// fuzzPayloads are the package's fixtures and a few bodies no sender sends.
func fuzzPayloads(f *testing.F) [][]byte {
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
	return append(out, []byte(`{}`), []byte(`null`), []byte(`[]`), []byte(` {"zen":"z","hook_id":"7"}`),
		[]byte(`{"action":"purchased","marketplace_purchase":null}`), []byte("Hello, World!"))
}

// fuzzEventFor is the X-GitHub-Event a fixture is sent under.
func fuzzEventFor(body []byte) string {
	switch {
	case bytes.Contains(body, []byte(`"marketplace_purchase"`)):
		return "marketplace_purchase"
	case bytes.Contains(body, []byte(`"sponsorship"`)):
		return "sponsorship"
	case bytes.Contains(body, []byte(`"zen"`)):
		return "ping"
	}
	return "issues"
}

// FuzzVerify feeds Verify arbitrary bodies, signatures, content types and
// delivery headers. It never panics; it refuses with a *webhooks.RejectError
// and accepts a delivery only when the signature is the raw body's under
// one of the secrets; what it accepts carries, as its body, the JSON
// object the delivery carries (the body itself, or a form's payload field),
// the hash of that object, and the key "<hook id>:<GUID>:<hash>" (the GUID
// as sent, no '/').
func FuzzVerify(f *testing.F) {
	for _, b := range fuzzPayloads(f) {
		ev := fuzzEventFor(b)
		f.Add(b, fuzzSig(b, fuzzSecret), "application/json", ev, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "")
		f.Add(b, fuzzSig(b, fuzzOldSecret), "application/json; charset=utf-8", ev, "guid-2", "424242")
		form := []byte(url.Values{"payload": {string(b)}}.Encode())
		f.Add(form, fuzzSig(form, fuzzSecret), "application/x-www-form-urlencoded", ev, "guid-3", "424242")
		f.Add(b, fuzzSig(b, "not-our-secret"), "application/json", ev, "guid-4", "1")
	}
	f.Add([]byte("Hello, World!"), "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "application/json", "ping", "g", "1")
	b := []byte(`{"zen":"z","hook_id":1}`)
	f.Add(b, " "+strings.ToUpper(fuzzSig(b, fuzzSecret))+" ", "application/json", "ping", "guid-5", "1")
	f.Add(b, fuzzSig(b, fuzzSecret), "application/json", "ping", "a/b", "1")
	f.Add(b, fuzzSig(b, fuzzSecret), "application/json", "ping", "guid-6", "1:2")
	f.Add(b, fuzzSig(b, fuzzSecret), "text/plain", "ping", "guid-7", "1")
	f.Add(b, "sha1=abc", "application/json", "ping", "guid-8", "1")
	f.Add(b, "sha256=", "application/json", "ping", "guid-9", "1")
	form := []byte("payload=%7B%7D&payload=%5B%5D&x=1")
	f.Add(form, fuzzSig(form, fuzzSecret), "application/x-www-form-urlencoded", "issues", "guid-10", "1")
	form = []byte("payload=%7B%22a%22%3A1%7D%3B")
	f.Add(form, fuzzSig(form, fuzzSecret), "application/x-www-form-urlencoded; charset=utf-8", "issues", "guid-11", "1")

	p := github.New([]string{fuzzSecret, fuzzOldSecret}, "")
	f.Fuzz(func(t *testing.T, body []byte, sig, contentType, event, guid, hook string) {
		h := http.Header{}
		for k, v := range map[string]string{"Content-Type": contentType, github.HeaderSignature256: sig,
			github.HeaderEvent: event, github.HeaderDelivery: guid, github.HeaderHookID: hook} {
			if v != "" {
				h.Set(k, v)
			}
		}
		ev, err := p.Verify(h, body, time.Now())
		if err != nil {
			var rej *webhooks.RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("Verify error %v is not a *webhooks.RejectError", err)
			}
			return
		}
		got := strings.ToLower(strings.TrimSpace(sig))
		if got != fuzzSig(body, fuzzSecret) && got != fuzzSig(body, fuzzOldSecret) {
			t.Fatalf("accepted signature %q for a body neither secret signs: %q", sig, body)
		}
		wantHook := hook
		if wantHook == "" {
			wantHook = "0"
		}
		if ev.ID != guid || !strings.HasPrefix(ev.Key, wantHook+":"+guid+":") || ev.Type != event || strings.Contains(ev.Key, "/") {
			t.Fatalf("accepted event %q/%q of type %q for headers GUID %q, hook %q, event %q", ev.Key, ev.ID, ev.Type, guid, hook, event)
		}
		want := body
		if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
			form, err := url.ParseQuery(string(body))
			if err != nil {
				t.Fatalf("accepted a form body url.ParseQuery refuses: %q: %v", body, err)
			}
			want = []byte(form.Get("payload"))
		}
		if !bytes.Equal(ev.Body, want) {
			t.Fatalf("accepted body %q, want the delivery's JSON %q", ev.Body, want)
		}
		if j := bytes.TrimLeft(ev.Body, " \t\r\n"); len(j) == 0 || j[0] != '{' || !json.Valid(ev.Body) {
			t.Fatalf("accepted a payload that is not a JSON object: %q", ev.Body)
		}
		if !bytes.Equal(ev.BodyHash, github.BodyHash(want)) || ev.Key != github.Key(wantHook, guid, ev.BodyHash) {
			t.Fatalf("body hash %x, key %q: not the hash of the payload, or a key not made of it", ev.BodyHash, ev.Key)
		}
	})
}

// FuzzFormAgreesWithJSON sends one payload twice, as application/json and
// form-encoded in a payload field (with other fields around it, as a form
// may have), each signed over its own raw body: Verify gives both the same
// verdict (the same reason when it refuses), and, when it accepts, the same
// event body, type and key.
func FuzzFormAgreesWithJSON(f *testing.F) {
	events := []string{"ping", "marketplace_purchase", "sponsorship", "issues"}
	for _, b := range fuzzPayloads(f) {
		for i := range events {
			f.Add(b, uint8(i), "")
		}
		f.Add(b, uint8(0), "zen=1&hook_id=2")
	}
	f.Add([]byte(`{"a":"x&payload=y"}`), uint8(3), "payload2=z")
	f.Add([]byte("{\"a\":\"caf\xc3\xa9 + 100%\"}"), uint8(3), "")

	p := github.New([]string{fuzzSecret}, "")
	verify := func(body []byte, ctype, event string) (webhooks.Event, string) {
		h := http.Header{}
		h.Set("Content-Type", ctype)
		h.Set(github.HeaderSignature256, fuzzSig(body, fuzzSecret))
		h.Set(github.HeaderEvent, event)
		h.Set(github.HeaderDelivery, "fuzz-guid")
		h.Set(github.HeaderHookID, "424242")
		ev, err := p.Verify(h, body, time.Now())
		if err == nil {
			return ev, ""
		}
		var rej *webhooks.RejectError
		if !errors.As(err, &rej) {
			panic("Verify error is not a *webhooks.RejectError: " + err.Error())
		}
		return ev, rej.Reason
	}
	f.Fuzz(func(t *testing.T, payload []byte, which uint8, extra string) {
		event := events[int(which)%len(events)]
		values, err := url.ParseQuery(extra)
		if err != nil {
			return
		}
		values.Del("payload")
		values.Set("payload", string(payload))
		form := []byte(values.Encode())

		evJSON, whyJSON := verify(payload, "application/json", event)
		evForm, whyForm := verify(form, "application/x-www-form-urlencoded", event)
		if whyJSON != whyForm {
			t.Fatalf("payload %q as %s: JSON refused %q, form %q (form body %q)", payload, event, whyJSON, whyForm, form)
		}
		if whyJSON == "" && (!bytes.Equal(evJSON.Body, evForm.Body) || evJSON.Type != evForm.Type || evJSON.Key != evForm.Key) {
			t.Fatalf("payload %q as %s: JSON gives %q (%s), form gives %q (%s)", payload, event, evJSON.Body, evJSON.Type, evForm.Body, evForm.Type)
		}
	})
}
