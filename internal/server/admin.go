package server

import (
	"fmt"
	"net/http"

	"github.com/paywebhooks/receiver/internal/console"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// setupConsole serves the operator console on ADMIN_ADDR (a listener of
// its own, never HTTP_ADDR; config refuses an ADMIN_ADDR without an
// ADMIN_TOKEN of at least 16 characters). Its actions run through this
// server's processor, providers and pool, as a delivery would.
func (s *Server) setupConsole(provs map[string]webhooks.Provider) error {
	c, err := console.New(console.Config{
		Token:      s.cfg.AdminToken,
		DB:         s.pool,
		Processor:  s.proc,
		Providers:  provs,
		Specs:      s.cfg.Specs(),
		Lease:      s.cfg.LeaseDuration,
		MailDomain: s.cfg.MailDomain(),
		Gatherer:   s.registry,
		Log:        s.log,
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
