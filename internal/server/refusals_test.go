package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// logBuffer collects a server's JSON log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count is how many lines say msg: written whole, and counting more
// (repeated=N), and the N they count.
func (l *logBuffer) count(t *testing.T, msg string) (whole, counts, repeated int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if m["msg"] != msg {
			continue
		}
		if r, ok := m["repeated"].(float64); ok {
			counts++
			repeated += int(r)
		} else {
			whole++
		}
	}
	return whole, counts, repeated
}

// TestRefusedRequestsSampled: 10,000 refused requests from one client,
// half unsigned deliveries and half GETs of paths that are not there, are
// each answered, and written to the log as a bounded number of lines: the
// first of each kind whole, and (at shutdown, or each minute they go on)
// how many more there were.
func TestRefusedRequestsSampled(t *testing.T) {
	env := map[string]string{"DATABASE_URL": pgtest.NewDB(t), "MAIL_DIR": t.TempDir(),
		"STRIPE_WEBHOOK_SECRET": "whsec_test_0123456789abcdef0123456789abcdef"}
	cfg, err := wiring.Load(func(k string) string { return env[k] }, providers.All())
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	srv, err := server.New(context.Background(), cfg, providers.List(), wiring.StepKinds(cfg, providers.List()), slog.New(reqlog.NewHandler(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	const n = 10_000
	for i := range n {
		var res *http.Response
		if i%2 == 0 {
			res, err = http.Post(ts.URL+"/webhooks/stripe", "application/json", strings.NewReader(`{"id":"evt_1"}`))
		} else {
			res, err = http.Get(ts.URL + "/wp-login.php")
		}
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if want := []int{http.StatusBadRequest, http.StatusNotFound}[i%2]; res.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, res.StatusCode, want)
		}
	}
	logs.mu.Lock()
	t.Logf("%d refused requests: %d bytes of log", n, logs.b.Len())
	logs.mu.Unlock()
	for _, msg := range []string{"delivery rejected", "request"} {
		if whole, counts, _ := logs.count(t, msg); whole != 1 || counts > 1 {
			t.Errorf("%d refused requests wrote %d %q lines whole and %d counting more; want one whole, and a count if a minute passed", n, whole, msg, counts)
		}
	}
	ts.Close()
	srv.Close()
	for _, msg := range []string{"delivery rejected", "request"} {
		if whole, counts, repeated := logs.count(t, msg); whole+repeated != n/2 || counts > 2 {
			t.Errorf("after shutdown: %d %q lines whole, %d counting %d more; want %d in all", whole, msg, counts, repeated, n/2)
		}
	}
}
