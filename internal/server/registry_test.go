package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/checkout"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// TestNewRefusesAListItCannotServe: the server is built from the list it is
// handed, so it refuses, before it opens anything, a provider whose
// variables the configuration was not loaded with (its route would be off
// for want of a secret nobody read) and a second provider offering the
// checkout return, whose route is one.
func TestNewRefusesAListItCannotServe(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://receiver@127.0.0.1:1/nowhere", "MAIL_DIR": t.TempDir()}
	load := func(specs []webhooks.Spec) wiring.Setup {
		t.Helper()
		cfg, err := wiring.Load(func(k string) string { return env[k] }, specs)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	newServer := func(cfg wiring.Setup, list []registry.Provider) error {
		srv, err := server.New(context.Background(), cfg, list, wiring.StepKinds(cfg, list), log)
		if err == nil {
			srv.Close()
		}
		return err
	}

	err := newServer(load([]webhooks.Spec{stripe.Spec}), providers.List())
	if err == nil || !strings.Contains(err.Error(), "provider "+stripe.ThinSource+": its variables were not loaded") {
		t.Errorf("a list larger than the configuration's: %v, want the first provider not loaded named", err)
	}

	list := providers.List()
	list[1].Checkout = &checkout.Provider{Source: list[1].Spec.Source}
	err = newServer(load(providers.All()), list)
	if err == nil || !strings.Contains(err.Error(), "providers stripe and "+stripe.ThinSource+" both offer the checkout return") {
		t.Errorf("two checkout returns: %v, want both named", err)
	}
}
