package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pglocal"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/wiring"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newServer(t *testing.T, dbURL string) *httptest.Server {
	t.Helper()
	cfg, err := wiring.Load(func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL, "STRIPE_WEBHOOK_SECRET": "whsec_test_0123456789abcdef0123456789abcdef", "MAIL_DIR": t.TempDir()}[k]
	}, providers.All())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg, providers.List(), wiring.StepKinds(cfg, providers.List()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return ts
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestReadyz: 200 when the database answers and the schema is current, 503
// when the database is gone or the schema is behind, 200 again after.
func TestReadyz(t *testing.T) {
	ctx := context.Background()
	// Under os.TempDir(), not t.TempDir(), whose private parent the
	// server could not reach when it runs as postgres (we are root).
	dir, err := os.MkdirTemp("", "server-test-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cluster, err := pglocal.Start(ctx, pglocal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	if err := cluster.CreateDatabase(ctx, "receiver"); err != nil {
		t.Fatal(err)
	}
	url := cluster.URL("receiver")
	ts := newServer(t, url)

	if code, body := get(t, ts.URL+"/readyz"); code != 200 {
		t.Fatalf("readyz with a database: %d %s", code, body)
	}
	if code, _ := get(t, ts.URL+"/healthz"); code != 200 {
		t.Fatalf("healthz: %d", code)
	}

	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, ts.URL+"/readyz"); code != 503 || !strings.Contains(body, "database unavailable") {
		t.Fatalf("readyz without a database: %d %s", code, body)
	}
	if code, _ := get(t, ts.URL+"/healthz"); code != 200 {
		t.Fatalf("healthz must not depend on the database: %d", code)
	}

	if err := cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _ := get(t, ts.URL+"/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz still %d after the database came back", code)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := db.MigrateDown(url, 1); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, ts.URL+"/readyz"); code != 503 || !strings.Contains(body, "schema not current") {
		t.Fatalf("readyz with an old schema: %d %s", code, body)
	}
}

// TestRoutes: unknown routes and methods get their status and no internals.
func TestRoutes(t *testing.T) {
	ts := newServer(t, pgtest.NewDB(t))
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/webhooks/stripe", 405},
		{"POST", "/webhooks/github", 404}, // no GitHub secret: no route
		{"GET", "/nope", 404},
		{"GET", "/metrics", 200},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, res.StatusCode, c.want)
		}
		if res.StatusCode >= 400 && strings.Contains(string(b), "goroutine") {
			t.Errorf("%s %s leaks internals: %s", c.method, c.path, b)
		}
	}
}
