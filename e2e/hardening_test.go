package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestStartupRefusesWeakSettings: the binary refuses to start with a
// secret shorter than any its provider issues (whsec_x) or a fulfillment
// or alert URL that would carry data in clear off this machine; each
// refusal names the variable (and the way out), never the value.
func TestStartupRefusesWeakSettings(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct {
		name, key, value string
		want             []string
	}{
		{"StripeSecretWhsecX", "STRIPE_WEBHOOK_SECRET", "whsec_x", []string{"STRIPE_WEBHOOK_SECRET secret 1 is shorter than 38 characters"}},
		{"PaddleSecretShort", "PADDLE_WEBHOOK_SECRET", "pdl_ntfset_x", []string{"PADDLE_WEBHOOK_SECRET secret 1 is shorter than 70 characters"}},
		{"FulfillmentInClear", "FULFILLMENT_URL", "http://fulfil.example.com:8000", []string{"FULFILLMENT_URL is http:// to fulfil.example.com:8000", "ALLOW_INSECURE_HTTP=true"}},
		{"AlertsInClear", "ALERT_WEBHOOK_URL", "http://chat.example.com/hooks/s3cr3t", []string{"ALERT_WEBHOOK_URL is http:// to chat.example.com", "ALLOW_INSECURE_HTTP=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runServerCmd(t, w.env(c.key, c.value))
			evidence(t, c.key+"="+c.value, "-", r.Stderr)
			if r.Code != 1 {
				t.Errorf("exit %d, want 1; stderr %q", r.Code, r.Stderr)
			}
			for _, want := range c.want {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr %q does not say %q", r.Stderr, want)
				}
			}
			if strings.Contains(r.Stderr, c.value) || strings.Contains(r.Stderr, "s3cr3t") {
				t.Errorf("the refusal quotes the value: %s", r.Stderr)
			}
		})
	}
}

// TestStartupWarnsInClearAndPublicMetrics: with ALLOW_INSECURE_HTTP=true,
// an http:// fulfillment URL off this machine starts with a warning naming
// the variable; /metrics served on a public HTTP_ADDR (every interface,
// METRICS_ADDR unset) starts with a warning naming METRICS_ADDR.
func TestStartupWarnsInClearAndPublicMetrics(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env("HTTP_ADDR", "0.0.0.0:0", "ALLOW_INSECURE_HTTP", "true",
		"ALERT_WEBHOOK_URL", "http://chat.example.com/hooks/s3cr3t"))
	p.waitLog(t, `"variable":"METRICS_ADDR"`, 10*time.Second)
	p.waitLog(t, `"variable":"ALERT_WEBHOOK_URL"`, 10*time.Second)
	var warned []string
	for _, l := range p.logLines() {
		if strings.Contains(l, "weak configuration") {
			warned = append(warned, l)
		}
		if strings.Contains(l, "s3cr3t") {
			t.Errorf("a log line shows the webhook's secret path: %s", l)
		}
	}
	evidence(t, "HTTP_ADDR=0.0.0.0:0, METRICS_ADDR unset, ALLOW_INSECURE_HTTP=true ALERT_WEBHOOK_URL=http://…", "started", strings.Join(warned, "\n"))
}
