package server

import (
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// setupConsole serves the operator console on ADMIN_ADDR (s.addSide), when
// it is set. Off until the console work fills it in.
func (s *Server) setupConsole(provs map[string]webhooks.Provider) error { return nil }
