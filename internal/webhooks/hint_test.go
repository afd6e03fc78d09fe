package webhooks_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestWrongSecretHint: a delivery whose signature matches no configured
// secret although it was signed just now is logged with the provider's
// WrongSecretHint (for Stripe: `stripe listen --print-secret`); one signed
// long ago, or refused for another reason, is logged without a hint.
func TestWrongSecretHint(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	h := webhooks.NewHandler(nil, webhooks.NewMetrics(prometheus.NewRegistry()), log, webhooks.Limits{MaxBody: 1 << 20, MaxInflight: 4})
	route := h.Route(stripe.Spec, stripe.New([]string{"whsec_the_configured_one"}))
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.created","data":{"object":{"id":"in_1"}}}`)

	for _, c := range []struct {
		name     string
		secret   string
		signedAt time.Time
		header   string
		hint     bool
	}{
		{name: "WrongSecretFresh", secret: "whsec_of_stripe_listen", signedAt: time.Now(), hint: true},
		{name: "WrongSecretStale", secret: "whsec_of_stripe_listen", signedAt: time.Now().Add(-time.Hour)},
		{name: "StaleRightSecret", secret: "whsec_the_configured_one", signedAt: time.Now().Add(-time.Hour)},
		{name: "GarbageHeader", header: "garbage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			logged.Reset()
			header := c.header
			if header == "" {
				header = stripe.SignatureHeader(body, c.secret, c.signedAt)
			}
			req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Stripe-Signature", header)
			w := httptest.NewRecorder()
			route.ServeHTTP(w, req)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", w.Code)
			}
			var line map[string]any
			if err := json.Unmarshal(logged.Bytes(), &line); err != nil || line["msg"] != "delivery rejected" {
				t.Fatalf("log %q (%v), want one rejection", logged.String(), err)
			}
			hint, ok := line["hint"].(string)
			if ok != c.hint {
				t.Fatalf("hint %q logged: %v, want %v\n%s", hint, ok, c.hint, logged.String())
			}
			if c.hint && !strings.Contains(hint, "stripe listen --print-secret") {
				t.Errorf("hint %q does not name stripe listen --print-secret", hint)
			}
		})
	}
}
