package alerts_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/alerts"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestLoadCountsEveryRefusal: the load cause counts every refusal for want
// of room or time, each raising its alert: bodies beyond their address's
// share of the unverified budget (unverified_over_share: Stripe's here),
// bodies that did not come within BODY_TIMEOUT (body_timeout: GitHub's),
// and connections the listener reset, refused or closed to make room (no
// provider's: they come before any route is known).
func TestLoadCountsEveryRefusal(t *testing.T) {
	const budget = 64 << 10
	w := newWorld(t, rt.Env("MAX_BODY_BYTES", fmt.Sprint(budget)), rt.Env("UNVERIFIED_BODY_BYTES", fmt.Sprint(budget)))
	// The listener's series, as internal/server registers them (the
	// receiver of this test is served without its listener).
	conns := prometheus.NewRegistry()
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: alerts.ConnectionsRefused, Help: "refused"}, []string{"reason"})
	evicted := prometheus.NewCounterVec(prometheus.CounterOpts{Name: alerts.ConnectionsEvicted, Help: "evicted"}, []string{"class"})
	conns.MustRegister(refused, evicted)
	w.mon.Counters = prometheus.Gatherers{w.mon.Counters, conns}

	addr := strings.TrimPrefix(w.URL, "http://")
	// upload opens a connection, sends a request's headers, declaring
	// length bytes of body, and the first send bytes of it.
	upload := func(path, header string, length, send int) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\nContent-Length: %d\r\n\r\n%s",
			path, header, length, bytes.Repeat([]byte{' '}, send))
		return c
	}
	answer := func(c net.Conn) (int, string) {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err.Error()
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, string(b)
	}
	zeros := strings.Repeat("0", 64)

	// GitHub: five bodies that never come, answered 408 after BODY_TIMEOUT.
	var stalls sync.WaitGroup
	for range alerts.DefaultThreshold {
		c := upload("/webhooks/github", "X-Hub-Signature-256: sha256="+zeros+"\r\nX-GitHub-Event: ping", 100, 0)
		stalls.Go(func() {
			if status, body := answer(c); status != http.StatusRequestTimeout || !strings.Contains(body, webhooks.ReasonBodyTimeout) {
				t.Errorf("a GitHub body that never came: %d %s, want 408 %s", status, body, webhooks.ReasonBodyTimeout)
			}
		})
	}

	// Stripe: one upload of Paddle's route holds the whole budget (40
	// KiB of 64 came: the buffer of its size class); five Stripe
	// deliveries from the same address are beyond its share.
	holder := upload("/webhooks/paddle", "Paddle-Signature: ts=1;h1="+zeros, budget, 40<<10)
	deadline := time.Now().Add(30 * time.Second)
	for metricValue(t, w.URL, "webhook_unverified_body_bytes") < budget {
		if time.Now().After(deadline) {
			t.Fatal("the upload did not come to hold the budget")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range alerts.DefaultThreshold {
		body := checkout(fmt.Sprintf("over_share_%d", i))
		res := w.Post(t, stripe.Spec.Route(), rt.Sign(stripe.Spec, webhooks.SignInput{Body: body,
			Secret: "whsec_not_this_receivers_0123456789", At: time.Now()}), body)
		if res.Status != http.StatusServiceUnavailable || !strings.Contains(res.Body, webhooks.ReasonUnverifiedOverShare) {
			t.Fatalf("a Stripe delivery beyond its address's share: %d %s, want 503 %s", res.Status, res.Body, webhooks.ReasonUnverifiedOverShare)
		}
	}
	holder.Close()
	stalls.Wait()

	// Connections: three refused in the last eighth of MAX_CONNECTIONS,
	// two strangers' closed at the bound.
	refused.WithLabelValues("over_share").Add(3)
	evicted.WithLabelValues("stranger_idle").Add(2)

	got := w.once(t)
	if want := []string{"load:connections", "load:github", "load:stripe"}; !slices.Equal(got, want) {
		t.Fatalf("raised %v, want %v", got, want)
	}
	texts := strings.Join(w.sink.texts()[string(alerts.CauseLoad)], "\n---\n")
	t.Log(texts)
	for _, want := range []string{
		"stripe: 5 deliveries refused for load", "unverified_over_share 5",
		"github: 5 deliveries refused for load", "body_timeout 5",
		"connections: 5 refused or closed for load", "refused over_share 3", "closed stranger_idle 2", "MAX_CONNECTIONS",
	} {
		if !strings.Contains(texts, want) {
			t.Errorf("the load alerts do not say %q", want)
		}
	}
}

// metricValue is the value of an unlabelled series on the receiver's
// /metrics.
func metricValue(t *testing.T, baseURL, name string) float64 {
	t.Helper()
	res, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}
