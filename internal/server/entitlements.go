package server

import (
	"context"
	"fmt"

	"github.com/paywebhooks/receiver/internal/console"
	"github.com/paywebhooks/receiver/internal/entitlements"
)

// setupEntitlements installs the catalogue (ENTITLEMENTS_FILE) the
// database computes entitlements with, and runs the job that takes ends
// in time (a grace or a period ended) without any event and plans what
// no event's transaction planned. Without a catalogue, nothing is kept or
// sent, and start-up says so.
func (s *Server) setupEntitlements(ctx context.Context) error {
	cat := s.cfg.Entitlements
	if cat == nil {
		s.log.Info("entitlements are off: ENTITLEMENTS_FILE is unset, so no entitlements are kept or sent", "variable", "ENTITLEMENTS_FILE")
		return nil
	}
	changed, err := entitlements.Install(ctx, s.pool, cat)
	if err != nil {
		return fmt.Errorf("install the entitlements catalogue: %w", err)
	}
	s.log.Info("entitlements catalogue", "file", s.cfg.EntitlementsFile, "grants", len(cat.Grants), "grace", cat.Grace.String(),
		"installed", changed)
	if s.cfg.FulfillmentURL == "" {
		s.log.Warn("entitlements are kept but not told: FULFILLMENT_URL is unset (POST /entitlements is skipped, visibly); the app can still ask /api/entitlements",
			"variable", "FULFILLMENT_URL")
	}
	job := entitlements.Job{Store: entitlements.Store{Pool: s.pool}, Planner: s.proc, Log: s.log}
	s.background = append(s.background, job.Run)
	return nil
}

// entitlementsStore is what the console and the API read, or nil when
// entitlements are off.
func (s *Server) entitlementsStore() console.Entitlements {
	if s.cfg.Entitlements == nil {
		return nil
	}
	return entitlements.Store{Pool: s.pool}
}
