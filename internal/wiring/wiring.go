// Package wiring turns the configuration into what the receiver runs with.
// internal/config reads the environment into plain values; the values
// whose meaning belongs to a domain package are read here and parsed by
// their owners (SMTP_TLS and MAIL_TEMPLATES_DIR by mail, FULFILLMENT_SECRET
// by fulfillment, ALERT_WEBHOOK_URL by alerts, PUBLIC_URL by endpoints,
// ENTITLEMENTS_FILE by entitlements), and what an owner refuses is
// reported with the configuration's other problems, at once, each naming
// its variable (Load). From the Setup it gives each provider its settings
// (Setup.Settings), builds the step kinds (StepKinds), and says what
// start-up logs of it (Setup.LogValue) and what a receiver records of it
// (Setup.Fingerprint).
//
// cmd/server, the tests' receiver (internal/receivertest) and the
// benchmarks' server share it. It names no provider: the registry's list
// (internal/providers) is handed to it.
package wiring

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/portal"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Setup is the receiver's configuration (config.Config, whose fields it
// promotes) with the values their owners read.
type Setup struct {
	config.Config

	// SMTPTLS is how the email steps protect their connection to
	// SMTP_ADDR: SMTP_TLS, else mail.DefaultTLS(SMTP_ADDR); "" without
	// SMTP_ADDR.
	SMTPTLS mail.TLSMode
	// MailTemplatesDir (MAIL_TEMPLATES_DIR) holds templates that replace
	// built-in ones; MailTemplates are the templates in force, read and
	// tried by Load (nil: the built-in ones).
	MailTemplatesDir string
	MailTemplates    *mail.Templates
	// FulfillmentKey is FULFILLMENT_SECRET's key; nil: calls are unsigned.
	FulfillmentKey []byte
	// AlertWebhookURL (ALERT_WEBHOOK_URL) is where operator alerts are
	// posted; "": nowhere.
	AlertWebhookURL string
	// Entitlements is the catalogue of EntitlementsFile (ENTITLEMENTS_FILE,
	// read and checked by Load); nil when unset: no entitlements are kept
	// or sent.
	Entitlements     *entitlements.Catalogue
	EntitlementsFile string
}

// Load reads the configuration through getenv (os.Getenv in production, a
// map in tests), with the variables of every provider in specs, and has
// each value config does not parse read by its owner. It reports every
// problem at once, each naming its variable.
func Load(getenv func(string) string, specs []webhooks.Spec) (Setup, error) {
	c, problems := config.Read(getenv, specs)
	s := Setup{Config: c}
	value := func(name string) string { return strings.TrimSpace(getenv(name)) }
	s.loadTemplates(problems, value("MAIL_TEMPLATES_DIR"))
	s.loadSMTPTLS(problems, value("SMTP_TLS"))
	s.loadFulfillmentKey(problems, value("FULFILLMENT_SECRET"))
	s.loadAlertWebhook(problems, value("ALERT_WEBHOOK_URL"))
	checkPublicURL(problems, value("PUBLIC_URL"))
	s.loadEntitlements(problems, value("ENTITLEMENTS_FILE"))
	if err := problems.Err(); err != nil {
		return Setup{}, err
	}
	return s, nil
}

// loadSMTPTLS reads SMTP_TLS: one of mail.TLSModes, meaningful with
// SMTP_ADDR only, mail.DefaultTLS(SMTP_ADDR) when unset. Cleartext to a
// relay off the loopback interface is refused with a password and warned
// of without.
func (s *Setup) loadSMTPTLS(p *config.Problems, v string) {
	switch {
	case v != "" && !slices.Contains(mail.TLSModes, mail.TLSMode(v)):
		p.Add("SMTP_TLS", fmt.Sprintf("must be starttls, implicit or none, got %q", v))
		return
	case s.SMTPAddr == "":
		if v != "" {
			p.Add("SMTP_TLS", "is set, but SMTP_ADDR is not (mail is written to MAIL_DIR)")
		}
		return
	case v == "":
		s.SMTPTLS = mail.DefaultTLS(s.SMTPAddr)
	default:
		s.SMTPTLS = mail.TLSMode(v)
	}
	host, _, _ := net.SplitHostPort(s.SMTPAddr)
	if s.SMTPTLS != mail.TLSNone || mail.IsLoopback(host) {
		return
	}
	if s.SMTPUsername != "" {
		p.Add("SMTP_TLS", "none would send SMTP_PASSWORD in cleartext to "+s.SMTPAddr+": use starttls or implicit")
		return
	}
	s.Warn("SMTP_TLS", "none: mail, customers' addresses included, travels to "+s.SMTPAddr+" in cleartext")
}

// loadTemplates reads MAIL_TEMPLATES_DIR, whose templates are parsed and
// tried here, so that a broken one stops start-up with its file name.
func (s *Setup) loadTemplates(p *config.Problems, dir string) {
	s.MailTemplatesDir = dir
	if dir == "" {
		return
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		p.Add("MAIL_TEMPLATES_DIR", fmt.Sprintf("is not a directory: %q", dir))
		return
	}
	ts, err := mail.LoadTemplates(dir)
	if err != nil {
		p.Add("MAIL_TEMPLATES_DIR", "holds a template that cannot be used:\n    "+strings.ReplaceAll(err.Error(), "\n", "\n    "))
		return
	}
	s.MailTemplates = ts
}

// loadFulfillmentKey reads FULFILLMENT_SECRET (fulfillment.ParseSecret).
func (s *Setup) loadFulfillmentKey(p *config.Problems, secret string) {
	if secret == "" {
		return
	}
	key, err := fulfillment.ParseSecret(secret)
	if err != nil {
		p.Add("FULFILLMENT_SECRET", err.Error())
		return
	}
	s.FulfillmentKey = key
}

// loadAlertWebhook reads ALERT_WEBHOOK_URL: a URL the alerts package takes
// (alerts.CheckWebhookURL) that may be http:// only to this machine, as
// FULFILLMENT_URL (config.Config.CheckCleartext).
func (s *Setup) loadAlertWebhook(p *config.Problems, raw string) {
	s.AlertWebhookURL = raw
	if raw == "" {
		return
	}
	if err := alerts.CheckWebhookURL(raw); err != nil {
		p.Add("ALERT_WEBHOOK_URL", err.Error())
		return
	}
	u, _ := url.Parse(raw)
	s.CheckCleartext(p, "ALERT_WEBHOOK_URL", u, "alerts and the webhook's URL, a secret,")
}

// checkPublicURL holds PUBLIC_URL, which config reads, to what the
// endpoint check takes of it (endpoints.ParsePublicURL).
func checkPublicURL(p *config.Problems, raw string) {
	if raw == "" {
		return
	}
	if _, err := endpoints.ParsePublicURL(raw); err != nil {
		p.AddError(err)
	}
}

// loadEntitlements reads ENTITLEMENTS_FILE, the catalogue, refused with the
// line that is wrong; the read API without it is warned of.
func (s *Setup) loadEntitlements(p *config.Problems, path string) {
	if path != "" {
		cat, err := entitlements.Load(path)
		if err != nil {
			p.Add("ENTITLEMENTS_FILE", err.Error())
		} else {
			s.Entitlements, s.EntitlementsFile = cat, path
		}
	}
	if s.APIToken != "" && s.Entitlements == nil {
		s.Warn("API_TOKEN", "is set but ENTITLEMENTS_FILE is not: /api/entitlements answers 404 until a catalogue is set")
	}
}

// Settings are what the Spec.New of the provider source receives.
func (s Setup) Settings(source string) webhooks.Settings {
	p, _ := s.Provider(source)
	return webhooks.Settings{
		Secrets:            p.Secrets,
		NotifyEmail:        s.NotifyEmail,
		Entitlements:       s.Entitlements != nil,
		EntitlementSources: s.Entitlements.Sources(),
		Env: func(name string) string {
			if v, ok := p.Values[name]; ok {
				return v
			}
			return s.Var(name) // a second Spec of a provider's folder reads the first's variables
		},
	}
}

// PortalSettings is what internal/portal's Setup reads: the links' keys and
// limits, PUBLIC_URL, and each provider's settings.
func (s Setup) PortalSettings() portal.Settings {
	return portal.Settings{Keys: s.Portal.Keys, PublicURL: s.PublicURL, TTL: s.Portal.TTL, Uses: s.Portal.Uses,
		ReturnURL: s.Portal.ReturnURL, Provider: s.Settings}
}
