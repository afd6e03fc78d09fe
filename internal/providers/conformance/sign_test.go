package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// fatalTB records the first Fatalf and stops the function under test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// fatal runs f with a fatalTB and returns what it failed with, or "".
func fatal(t *testing.T, f func(tb testing.TB)) (msg string) {
	tb := &fatalTB{TB: t}
	defer func() {
		if r := recover(); r != nil && r != any(tb) {
			panic(r)
		}
		msg = tb.msg
	}()
	f(tb)
	return ""
}

// TestSignTraps: the suite stops, naming the trap, at a Sign that returns
// a header name that is not canonical and at a suite's Header that
// replaces a header Sign returned; and it signs the id Suite.ID gives.
func TestSignTraps(t *testing.T) {
	var got webhooks.SignInput
	spec := func(sign func(webhooks.SignInput) http.Header) *Suite {
		return &Suite{Spec: webhooks.Spec{Source: "acme", Sign: func(in webhooks.SignInput) http.Header {
			got = in
			return sign(in)
		}}}
	}
	lower := spec(func(in webhooks.SignInput) http.Header {
		return http.Header{"webhook-id": {in.MessageID()}, "Webhook-Signature": {"v1,x"}}
	})
	if msg := fatal(t, func(tb testing.TB) { lower.sign(tb, "", []byte("{}"), "s", time.Now(), nil) }); !strings.Contains(msg, `"webhook-id"`) ||
		!strings.Contains(msg, `"Webhook-Id"`) || !strings.Contains(msg, "Traps") {
		t.Errorf("a non-canonical name: %q", msg)
	}

	good := spec(func(in webhooks.SignInput) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("webhook-id", in.MessageID())
		h.Set("webhook-signature", "v1,"+in.Secret)
		return h
	})
	if msg := fatal(t, func(tb testing.TB) {
		good.sign(tb, "", []byte("{}"), "s", time.Now(), http.Header{"webhook-id": {"from-header"}})
	}); !strings.Contains(msg, "Webhook-Id") || !strings.Contains(msg, "Suite.ID") {
		t.Errorf("a Header replacing Sign's webhook-id: %q", msg)
	}

	// Content-Type may be replaced (a form body); other headers are added
	// under canonical names; the id is Suite.ID's.
	good.ID = func(name string, _ []byte) string { return "msg_" + name }
	var h http.Header
	if msg := fatal(t, func(tb testing.TB) {
		h = good.sign(tb, good.id("paid", nil), []byte("{}"), "s", time.Now(),
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "x-acme-event": {"order.paid"}})
	}); msg != "" {
		t.Fatalf("a legitimate delivery: %s", msg)
	}
	if got.ID != "msg_paid" || h.Get("Webhook-Id") != "msg_paid" || h.Get("Content-Type") != "application/x-www-form-urlencoded" ||
		h.Get("X-Acme-Event") != "order.paid" {
		t.Errorf("signed %+v into %v", got, h)
	}
}
