package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// TestUnsignedFulfillmentWarns: with FULFILLMENT_URL set and
// FULFILLMENT_SECRET unset, start-up warns that the calls are unsigned;
// with the secret, or without the URL, it says nothing of it.
func TestUnsignedFulfillmentWarns(t *testing.T) {
	dbURL := pgtest.NewDB(t)
	for _, c := range []struct {
		name, url, secret string
		warns             bool
	}{
		{"Unsigned", "http://127.0.0.1:1", "", true},
		{"Signed", "http://127.0.0.1:1", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{"NoFulfillment", "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": dbURL, "MAIL_DIR": t.TempDir(), "FULFILLMENT_URL": c.url, "FULFILLMENT_SECRET": c.secret}
			cfg, err := wiring.Load(func(k string) string { return env[k] }, providers.All())
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			srv, err := server.New(context.Background(), cfg, providers.List(), wiring.StepKinds(cfg, providers.List()), slog.New(slog.NewTextHandler(&log, nil)))
			if err != nil {
				t.Fatal(err)
			}
			srv.Close()
			warned := strings.Contains(log.String(), "level=WARN") && strings.Contains(log.String(), "fulfillment calls are unsigned")
			if warned != c.warns {
				t.Errorf("warned %v, want %v:\n%s", warned, c.warns, log.String())
			}
		})
	}
}
