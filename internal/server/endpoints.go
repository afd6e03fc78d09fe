package server

import (
	"context"
	"time"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// setupEndpoints runs, with RECONCILE_INTERVAL and PUBLIC_URL set, the
// endpoint check every interval, one replica at a time (the check takes
// its advisory lock as a reconciliation does), and hands its problems to
// the alerts' monitor, which raises the endpoint alert once per finding
// and hour. A provider whose API key is unset is not checked.
func (s *Server) setupEndpoints(specs []webhooks.Spec, ps []endpoints.Provider) {
	if s.cfg.ReconcileInterval == 0 || len(ps) == 0 {
		return
	}
	if s.cfg.PublicURL == "" {
		s.log.Warn("periodic endpoint check off: PUBLIC_URL is unset, so which of the providers' endpoints are this receiver's cannot be told")
		return
	}
	configured := false
	for _, p := range ps {
		configured = configured || p.Unconfigured(s.cfg.Settings(p.Source).Env) == ""
	}
	if !configured {
		s.log.Info("periodic endpoint check off: no provider's API key is set")
		return
	}
	job := s.endpointsJob(specs, ps)
	runner := &reconcile.Runner{Interval: s.cfg.ReconcileInterval, Jobs: []reconcile.Job{job.Job()}, Log: s.log}
	s.log.Info("periodic endpoint check on", "interval", s.cfg.ReconcileInterval, "public_url", s.cfg.PublicURL)
	s.background = append(s.background, func(ctx context.Context) { _ = runner.Run(ctx) })
}

// endpointsJob is the periodic endpoint check of the providers ps (of
// specs): its
// problems hold, for the alerts, until two intervals after the run that
// found them.
func (s *Server) endpointsJob(specs []webhooks.Spec, ps []endpoints.Provider) *endpoints.Periodic {
	store := reconcile.NewStore(s.pool)
	interval := s.cfg.ReconcileInterval
	return &endpoints.Periodic{
		Check: &endpoints.Check{PublicURL: s.cfg.PublicURL, Targets: endpoints.Targets(specs, ps), Settings: s.cfg.Settings},
		Lock:  store.Lock,
		Note: func(at time.Time, problems []endpoints.Finding) {
			if s.monitor == nil {
				return
			}
			fs := make([]alerts.EndpointFinding, len(problems))
			for i, f := range problems {
				fs[i] = alerts.EndpointFinding{ID: f.ID(), Title: f.Title(), Line: f.String()}
			}
			s.monitor.NoteEndpoints(fs, at.Add(2*interval))
		},
	}
}
