package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/alerts"
)

// setupAlerts runs the operator alerts' monitor beside the server, in
// every replica: it evaluates the causes every minute (the claims make one
// replica send each alert), from the database and from this process's
// rejection counters and HTTP_ADDR's connection counters. With no channel
// configured (ALERT_WEBHOOK_URL, ALERT_EMAIL) it still sets the
// conditions' gauges.
func (s *Server) setupAlerts() {
	counters := prometheus.NewRegistry()
	counters.MustRegister(s.metrics.Rejections, s.metrics.SignatureMismatches, s.conns.refused, s.conns.evicted)
	var subjects []alerts.Subject
	for _, p := range s.providers {
		if p.on {
			subjects = append(subjects, alerts.Subject{Source: p.spec.Source, SecretVar: p.spec.Secret.Name,
				Retries: p.spec.Retries})
		}
	}
	channels := alerts.Channels(s.cfg.AlertWebhookURL, s.cfg.AlertEmail)
	m := &alerts.Monitor{DB: s.pool, Runner: s.proc, Counters: counters, Subjects: subjects, Channels: channels,
		SilenceAfter: s.cfg.SilenceAlertAfter, Metrics: alerts.NewMetrics(s.registry), Log: s.log.With("component", "alerts")}
	if len(channels) == 0 {
		s.log.Info("operator alerts off: set ALERT_WEBHOOK_URL or ALERT_EMAIL to be told")
	}
	s.monitor = m
	s.background = append(s.background, m.Run)
}

// alertChannels names the alert channels configured, for the console.
func alertChannels(webhookURL, email string) []string {
	var out []string
	if webhookURL != "" {
		out = append(out, "webhook "+alerts.MaskURL(webhookURL))
	}
	if email != "" {
		out = append(out, "email to "+email)
	}
	return out
}
