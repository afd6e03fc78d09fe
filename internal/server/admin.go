package server

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/console"
	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// setupConsole serves the operator console on ADMIN_ADDR (a listener of
// its own, never HTTP_ADDR; config refuses an ADMIN_ADDR without an
// ADMIN_TOKEN of at least 16 characters). Its actions run through this
// server's processor, providers and pool, as a delivery would.
func (s *Server) setupConsole(specs []webhooks.Spec, owners []ops.Owner, provs map[string]webhooks.Provider) error {
	var rec console.Reconciler // none configured: the console offers no reconcile action
	if len(s.reconcilers) > 0 {
		rec = consoleReconcilers(s.reconcilers)
	}
	c, err := console.New(console.Config{
		Token:      s.cfg.AdminToken,
		DB:         s.pool,
		Processor:  s.proc,
		Providers:  provs,
		Specs:      specs,
		Owners:     owners,
		Alerts:     alerts.Log{},
		Lease:      s.cfg.LeaseDuration,
		Kinds:      s.proc.Kinds(),
		Gatherer:   s.registry,
		Reconciler: rec,
		Log:        s.log,
		// The operator alerts' channels, which the overview names.
		AlertChannels: alertChannels(s.cfg.AlertWebhookURL, s.cfg.AlertEmail),
		// Who may reach it, and how its sign-in is guarded.
		Addr:           s.cfg.AdminAddr,
		Hosts:          s.cfg.AdminHosts,
		CookieSecure:   s.cfg.AdminCookieSecure,
		TrustedProxies: s.cfg.TrustedProxies,
		ClientIP:       ipExtractor(s.cfg.TrustedProxies),
		Lockout:        s.cfg.AdminLockout,
		// The read API (API_TOKEN), and the entitlements it reads.
		APIToken:     s.cfg.APIToken,
		Entitlements: s.entitlementsStore(),
	})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	s.addSide("admin", s.cfg.AdminAddr, c)
	s.background = append(s.background, c.Run)
	return nil
}

// ConsoleHandler is the console's handler when ADMIN_ADDR is set (nil
// otherwise), for tests that serve it themselves.
func (s *Server) ConsoleHandler() http.Handler {
	for _, side := range s.side {
		if side.name == "admin" {
			return side.srv.Handler
		}
	}
	return nil
}

// consoleReconcilers are the configured reconcilers (by command name, as
// `server reconcile <name>` takes it) as the console's reconcile action runs
// them: the same runs as `server reconcile`, recorded with the trigger
// "console".
type consoleReconcilers map[string]reconcile.Instance

func (r consoleReconcilers) Sources() []string { return slices.Sorted(maps.Keys(r)) }

func (r consoleReconcilers) Reconcile(ctx context.Context, name string, window time.Duration, dryRun bool,
	actor string) (console.ReconcileReport, error) {
	inst, ok := r[name]
	if !ok {
		return console.ReconcileReport{}, fmt.Errorf("no reconciliation %q is configured", name)
	}
	var out bytes.Buffer
	sum, err := inst.Run(ctx, reconcile.Options{Since: window, DryRun: dryRun, Trigger: "console", Out: &out})
	var rep console.ReconcileReport
	if s := strings.TrimSpace(out.String()); s != "" {
		rep.Lines = strings.Split(s, "\n")
	}
	if sum != nil {
		rep.Summary = sum.String()
	}
	return rep, err
}
