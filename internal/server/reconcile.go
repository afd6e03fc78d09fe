package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// Reconcilers builds every reconciler of rs whose provider's
// configuration turns it on (its API key is set), by name; the others are
// returned with the reason they are off.
func Reconcilers(cfg wiring.Setup, rs []reconcile.Reconciler, pool *pgxpool.Pool, proc reconcile.Processor,
	provs map[string]webhooks.Provider, log *slog.Logger) (on map[string]reconcile.Instance, off map[string]string, err error) {
	on, off = map[string]reconcile.Instance{}, map[string]string{}
	for _, r := range rs {
		settings := cfg.Settings(r.Source)
		if why := r.Unconfigured(settings.Env); why != "" {
			off[r.Name] = why
			continue
		}
		inst, err := r.New(reconcile.Env{Settings: settings, Provider: provs[r.Source], Processor: proc, Pool: pool,
			Log: log.With("reconcile", r.Name)})
		if err != nil {
			return nil, nil, fmt.Errorf("reconcile %s: %w", r.Name, err)
		}
		on[r.Name] = inst
	}
	return on, off, nil
}

// setupReconcile registers the reconciliation metrics and, with
// RECONCILE_INTERVAL, runs every configured reconciler periodically, one
// replica at a time (each job takes its source's advisory lock).
func (s *Server) setupReconcile(rs []reconcile.Reconciler, provs map[string]webhooks.Provider) error {
	on, off, err := Reconcilers(s.cfg, rs, s.pool, s.proc, provs, s.log)
	if err != nil {
		return err
	}
	s.reconcilers = on
	metrics := reconcile.NewMetrics(s.registry)
	s.registry.MustRegister(reconcile.NewCollector(s.pool, s.log))
	if s.cfg.ReconcileInterval == 0 {
		return nil
	}
	var jobs []reconcile.Job
	for name, inst := range on {
		jobs = append(jobs, inst.Job())
		s.log.Info("periodic reconciliation on", "reconcile", name, "interval", s.cfg.ReconcileInterval)
	}
	for name, why := range off {
		s.log.Warn("periodic reconciliation off", "reconcile", name, "reason", why)
	}
	runner := &reconcile.Runner{Interval: s.cfg.ReconcileInterval, Jobs: jobs, Metrics: metrics,
		Store: reconcile.NewStore(s.pool), Log: s.log}
	s.background = append(s.background, func(ctx context.Context) { _ = runner.Run(ctx) })
	return nil
}
