package server

import "github.com/paywebhooks/receiver/internal/alerts"

// AlertMonitor is the server's alerts monitor, for tests.
func (s *Server) AlertMonitor() *alerts.Monitor { return s.monitor }
