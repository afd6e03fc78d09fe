package wiring

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/fulfillment"
)

// Fingerprint computes s's fingerprint with the database's salt: what its
// steps (and its catch-ups) use, secrets hashed (config.Fingerprint says
// how, and what for).
func (s Setup) Fingerprint(salt []byte) (config.Fingerprint, error) {
	f, err := config.NewFingerprinter(salt)
	if err != nil {
		return config.Fingerprint{}, err
	}
	const unused = "(not used: SMTP_ADDR is set)"
	if s.SMTPAddr != "" {
		f.Plain("SMTP_ADDR", s.SMTPAddr)
		f.Plain("SMTP_TLS", string(s.SMTPTLS))
		f.Plain("SMTP_USERNAME", s.SMTPUsername)
		f.Plain("MAIL_DIR", unused)
	} else {
		f.Plain("SMTP_ADDR", "")
		f.Plain("SMTP_TLS", "")
		f.Plain("SMTP_USERNAME", "")
		f.Plain("MAIL_DIR", absPath(s.MailDir))
	}
	f.Plain("MAIL_FROM", s.MailFrom)
	f.Plain("MAIL_TEMPLATES_DIR", absPath(s.MailTemplatesDir))
	f.Plain("NOTIFY_EMAIL", s.NotifyEmail)
	f.URL("FULFILLMENT_URL", maskURL(s.FulfillmentURL), s.FulfillmentURL)
	f.Secret("FULFILLMENT_SECRET", fulfillment.MaskKey(s.FulfillmentKey), string(s.FulfillmentKey), false)
	f.URL("ALERT_WEBHOOK_URL", alerts.MaskURL(s.AlertWebhookURL), s.AlertWebhookURL)
	f.Plain("ALERT_EMAIL", s.AlertEmail)
	f.Plain("LEASE_DURATION", s.LeaseDuration.String())
	f.Plain("STEP_TIMEOUT", s.StepTimeout.String())
	f.Plain("MAX_STEP_ATTEMPTS", strconv.Itoa(s.MaxStepAttempts))
	// The billing-portal links the emails carry.
	f.Plain("PUBLIC_URL", s.PublicURL)
	f.Secret("PORTAL_LINK_SECRET", maskKeys(s.Portal.Keys), portalKeys(s.Portal.Keys), false)
	f.Plain("PORTAL_LINK_TTL", s.Portal.TTL.String())
	for _, p := range s.Providers {
		secrets := slices.Clone(p.Secrets)
		slices.Sort(secrets)
		f.Secret(p.Secret.Name, maskList(p.Secret, p.Secrets), strings.Join(secrets, "\n"), true)
		for _, v := range p.Vars {
			if v.Secret {
				f.Secret(v.Name, v.Masked(p.Values[v.Name]), p.Values[v.Name], false)
			} else {
				f.Plain(v.Name, p.Values[v.Name])
			}
		}
	}
	return f.Fingerprint(), nil
}

// absPath is path made absolute, as the process that reads it sees it.
func absPath(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
