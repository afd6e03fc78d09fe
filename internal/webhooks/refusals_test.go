package webhooks_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	s.b.Reset()
	return out
}

// TestRefusalsSampled: 10,000 refused deliveries from one client (no
// signature, a made-up one, a body too large) are each answered and
// counted in the metrics, but written to the log as the first of each
// kind, whole, and then (FlushLog, as at shutdown, or a minute on) one
// line per kind with how many more there were: a bounded number of lines,
// whatever the flood.
func TestRefusalsSampled(t *testing.T) {
	var logged syncBuffer
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(&logged, nil)))
	reg := prometheus.NewRegistry()
	metrics := webhooks.NewMetrics(reg)
	h := webhooks.NewHandler(nil, metrics, log, webhooks.Limits{MaxBody: 1 << 10, MaxInflight: 4})
	route := h.Route(stripe.Spec, stripe.New([]string{"whsec_the_configured_one_0123456789abcdef01"}))
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.created","data":{"object":{"id":"in_1"}}}`)
	kinds := []struct {
		status int
		header string
		body   []byte
	}{
		{http.StatusBadRequest, "", body},
		{http.StatusBadRequest, stripe.SignatureHeader(body, "whsec_made_up", time.Now()), body},
		{http.StatusRequestEntityTooLarge, stripe.SignatureHeader(body, "whsec_made_up", time.Now()), bytes.Repeat([]byte("x"), 2<<10)},
	}
	const n = 10_000
	for i := range n {
		k := kinds[i%len(kinds)]
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(k.body))
		req.RemoteAddr = "203.0.113.7:40000"
		req.Header.Set("Content-Type", "application/json")
		if k.header != "" {
			req.Header.Set("Stripe-Signature", k.header)
		}
		w := httptest.NewRecorder()
		route.ServeHTTP(w, req)
		if w.Code != k.status {
			t.Fatalf("request %d: status %d, want %d", i, w.Code, k.status)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var refusals float64
	for _, mf := range mfs {
		if mf.GetName() == "webhook_rejections_total" {
			for _, m := range mf.GetMetric() {
				refusals += m.GetCounter().GetValue()
			}
		}
	}
	if refusals != n {
		t.Errorf("the metrics counted %v refusals, want %d", refusals, n)
	}

	whole := logged.lines(t)
	if len(whole) > 2*len(kinds) { // a minute may have passed on a slow machine: a count line per kind then
		t.Fatalf("%d refused requests wrote %d log lines, want at most %d", n, len(whole), 2*len(kinds))
	}
	var first int
	for _, l := range whole {
		if l["msg"] != "delivery rejected" {
			t.Errorf("an unexpected line: %v", l)
		}
		if _, ok := l["repeated"]; !ok {
			first++
		}
	}
	if first != len(kinds) {
		t.Errorf("%d lines written whole, want one per kind (%d):\n%v", first, len(kinds), whole)
	}

	h.FlushLog()
	counted := 0
	for _, l := range append(whole, logged.lines(t)...) {
		if r, ok := l["repeated"].(float64); ok {
			counted += int(r)
			if l["source"] != "stripe" || l["reason"] == nil || l["status"] == nil {
				t.Errorf("a count line without its kind: %v", l)
			}
		}
	}
	if counted+len(kinds) != n {
		t.Errorf("the count lines say %d more, want %d", counted, n-len(kinds))
	}
}
