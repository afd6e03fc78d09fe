// Package config reads the receiver's configuration from the environment,
// validates all of it at once, and logs it with secrets masked. The
// variables of each webhook provider come from its webhooks.Spec, so this
// package names none of them.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Config is the receiver's whole configuration. The zero values of optional
// fields mean "off", as docs/configuration.md's table says.
type Config struct {
	DatabaseURL string
	HTTPAddr    string
	MetricsAddr string // "" serves /metrics on HTTPAddr
	AdminAddr   string // "" runs no console
	AdminToken  string
	// AdminHosts are more names the console answers to (ADMIN_HOSTS: a
	// reverse proxy's public name), AdminCookieSecure makes its cookie
	// Secure, AdminLockout is how long a client is refused after too many
	// wrong tokens.
	AdminHosts        []string
	AdminCookieSecure bool
	AdminLockout      time.Duration

	// DatabasePooler says whether DatabaseURL is a transaction-mode pooler
	// (DATABASE_POOLER); with db.PoolerTransaction, DatabaseURL carries
	// the pgx statement mode db.PoolerURL gives it.
	DatabasePooler db.Pooler
	// DatabaseSessionURL (DATABASE_SESSION_URL) is where session state
	// works: migrations and session locks go there. "" means DatabaseURL;
	// required with db.PoolerTransaction. SessionURL resolves it.
	DatabaseSessionURL string

	// Providers holds each registered provider's configuration, by source.
	Providers map[string]Provider

	LeaseDuration  time.Duration
	StepTimeout    time.Duration
	SMTPAddr       string
	SMTPTLS        mail.TLSMode // SMTP_TLS, else mail.DefaultTLS(SMTPAddr); "" without SMTPAddr
	SMTPUsername   string
	SMTPPassword   string
	MailDir        string
	MailFrom       string
	NotifyEmail    string
	FulfillmentURL string
	FulfillmentKey []byte // FULFILLMENT_SECRET's key; nil: calls are unsigned
	// AlertWebhookURL (ALERT_WEBHOOK_URL) and AlertEmail (ALERT_EMAIL) are
	// where operator alerts go; SilenceAlertAfter (SILENCE_ALERT_AFTER,
	// "stripe=6h,github=7d") overrides the learnt silence of a provider
	// past which it is alerted on (0: never).
	AlertWebhookURL string
	AlertEmail      string
	// AllowInsecureHTTP (ALLOW_INSECURE_HTTP) lets FULFILLMENT_URL and
	// ALERT_WEBHOOK_URL be http:// to a host off this machine (start-up
	// warns); without it only a loopback host may be reached in clear.
	AllowInsecureHTTP  bool
	SilenceAlertAfter  map[string]time.Duration
	MaxBodyBytes       int64
	MaxInflight        int
	TrustedProxies     []netip.Prefix
	RedriveInterval    time.Duration
	RedriveParallelism int
	MaxStepAttempts    int
	ReconcileInterval  time.Duration // 0: no periodic reconciliation
	ShutdownTimeout    time.Duration
	DBMaxConns         int32
	LogLevel           slog.Level

	// What a request may cost before its signature is verified (docs/http.md,
	// "What a request costs").
	UnverifiedBodyBytes int64         // budget shared by unverified bodies (webhooks.Admission)
	BodyTimeout         time.Duration // how long a body may take after its headers
	MaxConnections      int           // connections open on HTTP_ADDR at once
	// MemoryLimitSet: GOMEMLIMIT is set, and the runtime's soft memory
	// limit is the operator's; otherwise it is MemoryBound.
	MemoryLimitSet bool

	// LogFormat is how log lines are written (LOG_FORMAT): LogJSON, or
	// LogText for a person at a terminal. MailTemplatesDir
	// (MAIL_TEMPLATES_DIR) holds templates that replace built-in ones, and
	// MailTemplates are the templates in force, read and checked by Load.
	LogFormat        LogFormat
	MailTemplatesDir string
	MailTemplates    *mail.Templates

	// PublicURL (PUBLIC_URL) is the receiver's public base URL, without a
	// trailing slash: "" when unset (public.go).
	PublicURL string
	// Portal is the billing-portal links' configuration (portal.go).
	Portal Portal

	// Entitlements is the catalogue (ENTITLEMENTS_FILE, read and checked
	// by Load); nil when unset: no entitlements are kept or sent.
	Entitlements     *entitlements.Catalogue
	EntitlementsFile string
	// APIToken (API_TOKEN) opens the read API on ADMIN_ADDR (/api/…);
	// "": no API.
	APIToken string

	// Warnings are what start-up logs about values it accepts but should
	// not have to (a short secret).
	Warnings []Warning

	specs []webhooks.Spec
}

// Warning is one accepted but weak setting.
type Warning struct {
	Var     string // the variable's name
	Message string // what is wrong and what to do, never the value
}

// DevEnv is the variable the development tool (cmd/dev: `make run`,
// `make test`) sets to "1" for the process it runs. Outside it, a webhook
// secret or ADMIN_TOKEN that contains "development" (in any case) is
// refused: such values come from examples (docker-compose.yml's of old, a
// tutorial) and must never guard a production endpoint.
const DevEnv = "PAYWEBHOOKS_DEV"

// devWord is what marks a value as a development one.
const devWord = "development"

// Provider is one provider's configuration.
type Provider struct {
	Secrets []string          // its Spec.Secret, split
	Vars    map[string]string // its Spec.Vars, defaults applied
}

// Settings are what the provider's Spec.New receives.
func (c Config) Settings(source string) webhooks.Settings {
	p := c.Providers[source]
	return webhooks.Settings{
		Secrets:            p.Secrets,
		NotifyEmail:        c.NotifyEmail,
		Entitlements:       c.Entitlements != nil,
		EntitlementSources: c.Entitlements.Sources(),
		Env: func(name string) string {
			if v, ok := p.Vars[name]; ok {
				return v
			}
			return c.Var(name) // a second Spec of a provider's folder reads the first's variables
		},
	}
}

// Specs are the providers this configuration was loaded with.
func (c Config) Specs() []webhooks.Spec { return c.specs }

// Var returns the value of one of a provider's variables (any source).
func (c Config) Var(name string) string {
	for _, p := range c.Providers {
		if v, ok := p.Vars[name]; ok {
			return v
		}
	}
	return ""
}

// Defaults, as docs/configuration.md documents them. Those the processor
// shares come from webhooks.Defaults.
const (
	DefaultHTTPAddr        = ":8080"
	DefaultMailDir         = "./var/mail"
	DefaultMailFrom        = "Payments <payments@localhost>"
	DefaultMaxBodyBytes    = 1 << 20
	DefaultMaxInflight     = 256
	DefaultShutdownTimeout = 45 * time.Second
	DefaultAdminLockout    = 15 * time.Minute
	// DefaultDBMaxConns: durable commits need concurrency to share their
	// disk flushes, and pgx's own default (max(4, CPUs)) starves them.
	DefaultDBMaxConns = 16

	// DefaultUnverifiedBodyBytes: 32 bodies of the largest size at once,
	// or thousands of the size senders send.
	DefaultUnverifiedBodyBytes = 32 << 20
	DefaultBodyTimeout         = 5 * time.Second
	DefaultMaxConnections      = 1024
)

// Load reads the configuration through getenv (os.Getenv in production, a
// map in tests), with the variables of every provider in specs. It reports
// every problem at once, each naming its variable.
func Load(getenv func(string) string, specs []webhooks.Spec) (Config, error) {
	l := loader{getenv: getenv}
	d := webhooks.Defaults
	c := Config{
		DatabaseURL:        l.str("DATABASE_URL", ""),
		DatabasePooler:     db.Pooler(l.str("DATABASE_POOLER", string(db.PoolerNone))),
		DatabaseSessionURL: l.str("DATABASE_SESSION_URL", ""),
		HTTPAddr:           l.str("HTTP_ADDR", DefaultHTTPAddr),
		MetricsAddr:        l.str("METRICS_ADDR", ""),
		AdminAddr:          l.str("ADMIN_ADDR", ""),
		AdminToken:         l.str("ADMIN_TOKEN", ""),
		AdminHosts:         l.list("ADMIN_HOSTS"),
		AdminLockout:       l.duration("ADMIN_LOCKOUT", DefaultAdminLockout),
		LeaseDuration:      l.duration("LEASE_DURATION", d.Lease),
		SMTPAddr:           l.str("SMTP_ADDR", ""),
		SMTPUsername:       l.str("SMTP_USERNAME", ""),
		SMTPPassword:       l.str("SMTP_PASSWORD", ""),
		MailDir:            l.str("MAIL_DIR", DefaultMailDir),
		MailFrom:           l.str("MAIL_FROM", DefaultMailFrom),
		NotifyEmail:        l.str("NOTIFY_EMAIL", ""),
		FulfillmentURL:     strings.TrimRight(l.str("FULFILLMENT_URL", ""), "/"),
		AlertWebhookURL:    l.str("ALERT_WEBHOOK_URL", ""),
		AlertEmail:         l.str("ALERT_EMAIL", ""),
		MaxBodyBytes:       int64(l.integer("MAX_BODY_BYTES", DefaultMaxBodyBytes)),
		MaxInflight:        l.integer("MAX_INFLIGHT", DefaultMaxInflight),
		RedriveInterval:    l.duration("REDRIVE_INTERVAL", d.Backoff),
		RedriveParallelism: l.integer("REDRIVE_PARALLELISM", d.RedriveParallelism),
		MaxStepAttempts:    l.integer("MAX_STEP_ATTEMPTS", d.MaxAttempts),
		ReconcileInterval:  l.duration("RECONCILE_INTERVAL", 0),
		ShutdownTimeout:    l.duration("SHUTDOWN_TIMEOUT", DefaultShutdownTimeout),
		DBMaxConns:         int32(l.integer("DB_MAX_CONNS", DefaultDBMaxConns)),
		Providers:          map[string]Provider{},
		specs:              specs,
	}
	c.StepTimeout = l.duration("STEP_TIMEOUT", webhooks.StepTimeout(c.LeaseDuration))
	c.UnverifiedBodyBytes = int64(l.integer("UNVERIFIED_BODY_BYTES", DefaultUnverifiedBodyBytes))
	c.BodyTimeout = l.duration("BODY_TIMEOUT", DefaultBodyTimeout)
	c.MaxConnections = l.integer("MAX_CONNECTIONS", DefaultMaxConnections)
	c.MemoryLimitSet = l.str("GOMEMLIMIT", "") != ""
	if err := c.LogLevel.UnmarshalText([]byte(l.str("LOG_LEVEL", "info"))); err != nil {
		l.fail("LOG_LEVEL", "must be debug, info, warn or error")
	}
	c.loadOutput(&l, strings.TrimSpace(getenv(DevEnv)) == "1")
	dev := strings.TrimSpace(getenv(DevEnv)) == "1"
	for _, s := range specs {
		p := Provider{Secrets: l.list(s.Secret.Name), Vars: map[string]string{}}
		for i, v := range p.Secrets {
			which := fmt.Sprintf("secret %d ", i+1)
			if s.Secret.Check != nil {
				if err := s.Secret.Check(v); err != nil {
					l.fail(s.Secret.Name, fmt.Sprintf("%s%v", which, err))
				}
			}
			c.checkLen(&l, s.Secret, which, v)
			if !dev && containsFold(v, devWord) {
				l.fail(s.Secret.Name, which+devRefusal)
			}
		}
		for _, v := range s.Vars {
			val := l.str(v.Name, v.Default)
			if val != "" && v.Check != nil {
				if err := v.Check(val); err != nil {
					l.fail(v.Name, err.Error())
				}
			}
			if val != "" {
				c.checkLen(&l, v, "", val)
			}
			p.Vars[v.Name] = val
		}
		c.Providers[s.Source] = p
	}
	if !dev && containsFold(c.AdminToken, devWord) {
		l.fail("ADMIN_TOKEN", devRefusal)
	}

	c.loadDatabase(&l)
	for _, a := range []struct{ name, value string }{{"HTTP_ADDR", c.HTTPAddr}, {"METRICS_ADDR", c.MetricsAddr}, {"ADMIN_ADDR", c.AdminAddr}} {
		if a.value == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.value); err != nil {
			l.fail(a.name, fmt.Sprintf("must be host:port or :port, got %q", a.value))
		}
	}
	if c.MetricsAddr != "" && c.MetricsAddr == c.HTTPAddr && !anyPort(c.MetricsAddr) {
		l.fail("METRICS_ADDR", "must differ from HTTP_ADDR (unset it to serve /metrics on HTTP_ADDR)")
	}
	if host, _, err := net.SplitHostPort(c.HTTPAddr); err == nil && c.MetricsAddr == "" && !mail.IsLoopback(host) {
		c.Warnings = append(c.Warnings, Warning{Var: "METRICS_ADDR", Message: "is unset: /metrics is served on HTTP_ADDR (" +
			c.HTTPAddr + "), the public listener, where anybody who reaches the webhook routes reads the receiver's " +
			"counters; set METRICS_ADDR to a private address (127.0.0.1:9090, or the internal network's)"})
	}
	if c.AdminAddr != "" {
		switch {
		case !anyPort(c.AdminAddr) && (c.AdminAddr == c.HTTPAddr || c.AdminAddr == c.MetricsAddr):
			l.fail("ADMIN_ADDR", "must differ from HTTP_ADDR and METRICS_ADDR: the console never shares the public listener")
		case len(c.AdminToken) < 16:
			l.fail("ADMIN_TOKEN", "must be set, at least 16 characters, when ADMIN_ADDR is set")
		}
	}
	for _, h := range c.AdminHosts {
		if !hostName(h) {
			l.fail("ADMIN_HOSTS", fmt.Sprintf("%q is not a host name or address, with or without a port (console.example.com, 10.0.0.5:8081)", h))
		}
	}
	if v := l.str("ADMIN_COOKIE_SECURE", "false"); v != "true" && v != "false" {
		l.fail("ADMIN_COOKIE_SECURE", fmt.Sprintf("must be true or false, got %q", v))
	} else {
		c.AdminCookieSecure = v == "true"
	}
	if c.AdminLockout < time.Second || c.AdminLockout > 24*time.Hour {
		l.fail("ADMIN_LOCKOUT", "must be from 1s to 24h")
	}
	for _, p := range l.list("TRUSTED_PROXIES") {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			if a, aerr := netip.ParseAddr(p); aerr == nil {
				pfx, err = a.Prefix(a.BitLen())
			}
		}
		if err != nil {
			l.fail("TRUSTED_PROXIES", fmt.Sprintf("%q is not a CIDR (10.0.0.0/8) or an address", p))
			continue
		}
		c.TrustedProxies = append(c.TrustedProxies, pfx.Masked())
	}
	if c.LeaseDuration < time.Second {
		l.fail("LEASE_DURATION", "must be at least 1s")
	} else if c.StepTimeout <= 0 {
		l.fail("STEP_TIMEOUT", "must be positive")
	} else if msg := webhooks.CheckLease(c.LeaseDuration, c.StepTimeout); msg != "" {
		l.errs = append(l.errs, errors.New(msg))
	}
	if c.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.SMTPAddr); err != nil {
			l.fail("SMTP_ADDR", fmt.Sprintf("must be host:port, got %q", c.SMTPAddr))
		}
	}
	if (c.SMTPUsername == "") != (c.SMTPPassword == "") {
		l.fail("SMTP_USERNAME", "and SMTP_PASSWORD must be set together")
	}
	c.loadSMTPTLS(&l)
	if _, err := netmail.ParseAddress(c.MailFrom); err != nil {
		l.fail("MAIL_FROM", fmt.Sprintf("is not an email address: %q", c.MailFrom))
	}
	if c.NotifyEmail != "" {
		if _, err := netmail.ParseAddress(c.NotifyEmail); err != nil {
			l.fail("NOTIFY_EMAIL", fmt.Sprintf("is not an email address: %q", c.NotifyEmail))
		}
	}
	switch v := l.str("ALLOW_INSECURE_HTTP", "false"); v {
	case "true", "false":
		c.AllowInsecureHTTP = v == "true"
	default:
		l.fail("ALLOW_INSECURE_HTTP", fmt.Sprintf("must be true or false, got %q", v))
	}
	if c.FulfillmentURL != "" {
		u, err := url.Parse(c.FulfillmentURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.fail("FULFILLMENT_URL", fmt.Sprintf("must be an absolute http(s) URL, got %q", c.FulfillmentURL))
		} else {
			c.checkCleartext(&l, "FULFILLMENT_URL", u, "orders and customers' email addresses (and FULFILLMENT_SECRET's signatures)")
		}
	}
	if s := l.str("FULFILLMENT_SECRET", ""); s != "" {
		key, err := standardwebhooks.ParseSecret(s)
		switch {
		case err != nil:
			l.fail("FULFILLMENT_SECRET", fmt.Sprintf("is %v (make one with: echo \"whsec_$(openssl rand -base64 32)\")", err))
		case len(key) < standardwebhooks.MinKeyLen || len(key) > standardwebhooks.MaxKeyLen:
			l.fail("FULFILLMENT_SECRET", fmt.Sprintf("has a key of %d bytes; Standard Webhooks keys are %d to %d (make one with: echo \"whsec_$(openssl rand -base64 32)\")",
				len(key), standardwebhooks.MinKeyLen, standardwebhooks.MaxKeyLen))
		default:
			c.FulfillmentKey = key
		}
	}
	if c.AlertWebhookURL != "" {
		if err := alerts.CheckWebhookURL(c.AlertWebhookURL); err != nil {
			l.fail("ALERT_WEBHOOK_URL", err.Error())
		} else {
			u, _ := url.Parse(c.AlertWebhookURL)
			c.checkCleartext(&l, "ALERT_WEBHOOK_URL", u, "alerts and the webhook's URL, a secret,")
		}
	}
	if c.AlertEmail != "" {
		if _, err := netmail.ParseAddress(c.AlertEmail); err != nil {
			l.fail("ALERT_EMAIL", fmt.Sprintf("is not an email address: %q", c.AlertEmail))
		}
	}
	c.SilenceAlertAfter = l.silences("SILENCE_ALERT_AFTER", specs)
	c.loadPublicURL(&l)
	c.loadEntitlements(&l)
	c.loadPortal(&l)
	if c.MaxBodyBytes <= 0 {
		l.fail("MAX_BODY_BYTES", "must be a positive number of bytes")
	}
	if c.MaxInflight < 1 {
		l.fail("MAX_INFLIGHT", "must be at least 1")
	}
	if c.MaxBodyBytes > 0 && c.UnverifiedBodyBytes < c.MaxBodyBytes {
		l.fail("UNVERIFIED_BODY_BYTES", fmt.Sprintf("must be at least MAX_BODY_BYTES (%d): a body of the largest size must fit", c.MaxBodyBytes))
	}
	if c.BodyTimeout < 100*time.Millisecond || c.BodyTimeout > time.Minute {
		l.fail("BODY_TIMEOUT", "must be between 100ms and 1m")
	}
	if c.MaxConnections < 16 {
		l.fail("MAX_CONNECTIONS", "must be at least 16")
	}
	if c.RedriveInterval < 100*time.Millisecond {
		l.fail("REDRIVE_INTERVAL", "must be at least 100ms")
	}
	if c.RedriveParallelism < 1 || c.RedriveParallelism > 256 {
		l.fail("REDRIVE_PARALLELISM", "must be between 1 and 256")
	}
	if c.MaxStepAttempts < 1 {
		l.fail("MAX_STEP_ATTEMPTS", "must be at least 1")
	}
	if c.ReconcileInterval < 0 || (c.ReconcileInterval > 0 && c.ReconcileInterval < time.Second) {
		l.fail("RECONCILE_INTERVAL", "must be at least 1s (or unset: no periodic reconciliation)")
	}
	if c.ShutdownTimeout <= 0 {
		l.fail("SHUTDOWN_TIMEOUT", "must be positive")
	}
	if c.DBMaxConns < 1 {
		l.fail("DB_MAX_CONNS", "must be at least 1")
	}
	if len(l.errs) > 0 {
		return Config{}, fmt.Errorf("invalid configuration:\n  %w", errors.Join(l.errs...))
	}
	return c, nil
}

// loadDatabase checks DATABASE_URL, DATABASE_POOLER and
// DATABASE_SESSION_URL together. Several hosts need target_session_attrs
// read-write (or primary), without which a standby listed first would take
// every write and refuse it. Behind a transaction-mode pooler, a session
// URL is required and DATABASE_URL gets a statement mode the pooler can
// carry (db.PoolerURL).
func (c *Config) loadDatabase(l *loader) {
	urls := []struct{ name, value string }{{"DATABASE_URL", c.DatabaseURL}, {"DATABASE_SESSION_URL", c.DatabaseSessionURL}}
	for _, u := range urls {
		if u.value == "" {
			continue
		}
		if _, err := pgx.ParseConfig(u.value); err != nil {
			l.fail(u.name, "is not a PostgreSQL connection URL")
			continue
		}
		if n, attrs := db.Hosts(u.value); n > 1 && attrs != "read-write" && attrs != "primary" {
			l.fail(u.name, fmt.Sprintf("names %d hosts: add target_session_attrs=read-write, so that only a primary is "+
				"written to and a promoted standby is followed (got %q)", n, attrs))
		}
	}
	if c.DatabaseURL == "" {
		l.fail("DATABASE_URL", "is required (for example postgres://user:pass@localhost:5432/receiver)")
	}
	switch c.DatabasePooler {
	case db.PoolerNone:
	case db.PoolerTransaction:
		if c.DatabaseSessionURL == "" {
			l.fail("DATABASE_SESSION_URL", "is required with DATABASE_POOLER=transaction: a direct (or session-mode pooler) "+
				"connection for migrations and the locks that let one replica run a job, which a transaction-mode pooler cannot hold")
		} else if c.DatabaseSessionURL == c.DatabaseURL {
			l.fail("DATABASE_SESSION_URL", "is DATABASE_URL, the transaction-mode pooler: it must reach PostgreSQL directly "+
				"(or through a session-mode pooler)")
		}
		if c.DatabaseURL != "" {
			u, err := db.PoolerURL(c.DatabaseURL)
			if err != nil {
				l.fail("DATABASE_URL", err.Error())
			} else {
				c.DatabaseURL = u
			}
		}
	default:
		l.fail("DATABASE_POOLER", fmt.Sprintf("must be none or transaction, got %q", c.DatabasePooler))
	}
}

// SessionURL is where migrations and session locks go:
// DATABASE_SESSION_URL, else DATABASE_URL.
func (c Config) SessionURL() string {
	if c.DatabaseSessionURL != "" {
		return c.DatabaseSessionURL
	}
	return c.DatabaseURL
}

// DBOptions are the options of every pool opened on DATABASE_URL: its
// session URL, when DATABASE_SESSION_URL is set.
func (c Config) DBOptions(log *slog.Logger) []db.Option {
	opts := []db.Option{db.WithLogger(log)}
	if c.DatabaseSessionURL != "" {
		opts = append(opts, db.WithSession(c.DatabaseSessionURL))
	}
	return opts
}

// The terms of MemoryBound that no setting names, measured with margin
// (docs/http.md, "What a request costs").
const (
	// BaseMemory is what the process holds with nothing in flight: the
	// runtime, the binary, the pool and its connections' buffers, the
	// metrics, the body buffers kept for reuse (24 MiB resident when idle).
	BaseMemory = 48 << 20
	// ConnectionMemory is what one open connection may hold besides its
	// body: a goroutine's stack, net/http's buffers, and headers of up to
	// 64 KiB read and parsed (84 KiB measured with 60 KiB of headers, 21
	// KiB with a delivery's).
	ConnectionMemory = 128 << 10
	// DeliveryBodies is how many copies of its body a verified delivery
	// may hold while it is processed: the body, what is decoded from it,
	// and the query that stores it.
	DeliveryBodies = 3
)

// MemoryBound is the most memory requests can make the receiver hold, as
// docs/http.md states it:
//
//	BaseMemory + UNVERIFIED_BODY_BYTES + MAX_INFLIGHT × DeliveryBodies × MAX_BODY_BYTES
//	  + MAX_CONNECTIONS × ConnectionMemory
//
// Unless GOMEMLIMIT is set, it is also the runtime's soft memory limit,
// so that the collector's headroom (GOGC) cannot take the process past
// it.
func (c Config) MemoryBound() int64 {
	return c.StrangerMemoryBound() + int64(c.MaxInflight)*DeliveryBodies*c.MaxBodyBytes
}

// StrangerMemoryBound is the part of MemoryBound that requests nobody
// signed can reach: all of it but the verified deliveries' term,
//
//	BaseMemory + UNVERIFIED_BODY_BYTES + MAX_CONNECTIONS × ConnectionMemory
func (c Config) StrangerMemoryBound() int64 {
	return BaseMemory + c.UnverifiedBodyBytes + int64(c.MaxConnections)*ConnectionMemory
}

// loadEntitlements reads ENTITLEMENTS_FILE (the catalogue, refused with
// the line that is wrong) and API_TOKEN, which must open nothing the
// console's token does, and the other way round.
func (c *Config) loadEntitlements(l *loader) {
	if path := l.str("ENTITLEMENTS_FILE", ""); path != "" {
		cat, err := entitlements.Load(path)
		if err != nil {
			l.fail("ENTITLEMENTS_FILE", err.Error())
		} else {
			c.Entitlements, c.EntitlementsFile = cat, path
		}
	}
	c.APIToken = l.str("API_TOKEN", "")
	switch {
	case c.APIToken == "":
	case len(c.APIToken) < 16:
		l.fail("API_TOKEN", "must be at least 16 characters")
	case c.APIToken == c.AdminToken:
		l.fail("API_TOKEN", "must differ from ADMIN_TOKEN: the read API's token opens no console page, nor the console's the API")
	case c.AdminAddr == "":
		c.Warnings = append(c.Warnings, Warning{Var: "API_TOKEN", Message: "is set but ADMIN_ADDR is not: the read API is served on ADMIN_ADDR only"})
	}
	if c.APIToken != "" && c.Entitlements == nil {
		c.Warnings = append(c.Warnings, Warning{Var: "API_TOKEN", Message: "is set but ENTITLEMENTS_FILE is not: /api/entitlements answers 404 until a catalogue is set"})
	}
}

// loadSMTPTLS reads SMTP_TLS: one of mail.TLSModes, meaningful with
// SMTP_ADDR only, mail.DefaultTLS(SMTP_ADDR) when unset. Cleartext to a
// relay off the loopback interface is refused with a password and warned
// of without.
func (c *Config) loadSMTPTLS(l *loader) {
	v := l.str("SMTP_TLS", "")
	switch {
	case v != "" && !slices.Contains(mail.TLSModes, mail.TLSMode(v)):
		l.fail("SMTP_TLS", fmt.Sprintf("must be starttls, implicit or none, got %q", v))
		return
	case c.SMTPAddr == "":
		if v != "" {
			l.fail("SMTP_TLS", "is set, but SMTP_ADDR is not (mail is written to MAIL_DIR)")
		}
		return
	case v == "":
		c.SMTPTLS = mail.DefaultTLS(c.SMTPAddr)
	default:
		c.SMTPTLS = mail.TLSMode(v)
	}
	host, _, _ := net.SplitHostPort(c.SMTPAddr)
	if c.SMTPTLS != mail.TLSNone || mail.IsLoopback(host) {
		return
	}
	if c.SMTPUsername != "" {
		l.fail("SMTP_TLS", "none would send SMTP_PASSWORD in cleartext to "+c.SMTPAddr+": use starttls or implicit")
		return
	}
	c.Warnings = append(c.Warnings, Warning{Var: "SMTP_TLS",
		Message: "none: mail, customers' addresses included, travels to " + c.SMTPAddr + " in cleartext"})
}

// checkCleartext refuses u, the value of name, when it is http:// to a host
// off this machine (what, the data it carries, would travel in clear),
// unless ALLOW_INSECURE_HTTP=true, and then warns. Loopback hosts
// (127.0.0.0/8, ::1, localhost) are for development and tests.
func (c *Config) checkCleartext(l *loader, name string, u *url.URL, what string) {
	if u.Scheme != "http" || mail.IsLoopback(u.Hostname()) {
		return
	}
	if !c.AllowInsecureHTTP {
		l.fail(name, fmt.Sprintf("is http:// to %s, off this machine: %s would travel in clear; use https:// "+
			"(or set ALLOW_INSECURE_HTTP=true for a network you trust)", u.Host, what))
		return
	}
	c.Warnings = append(c.Warnings, Warning{Var: name,
		Message: fmt.Sprintf("is http:// to %s (ALLOW_INSECURE_HTTP=true): %s travel in clear", u.Host, strings.TrimSuffix(what, ","))})
}

// devRefusal ends the error of a value that says "development".
const devRefusal = `contains "` + devWord + `": a value from an example, refused outside the development tool ` +
	`(bin/dev, which make run uses, sets ` + DevEnv + `=1); set a random one`

// containsFold reports whether s contains word, in any case.
func containsFold(s, word string) bool {
	return strings.Contains(strings.ToLower(s), word)
}

// checkLen refuses a value of v shorter than v.MinLen and warns of one
// shorter than v.WarnLen. which names the value within a list ("secret 2 ").
func (c *Config) checkLen(l *loader, v webhooks.Var, which, value string) {
	n := utf8.RuneCountInString(value)
	switch {
	case v.MinLen > 0 && n < v.MinLen:
		l.fail(v.Name, fmt.Sprintf("%sis shorter than %d characters", which, v.MinLen))
	case v.WarnLen > 0 && n < v.WarnLen:
		c.Warnings = append(c.Warnings, Warning{Var: v.Name,
			Message: fmt.Sprintf("%sis shorter than %d characters: replace it with a longer random one", which, v.WarnLen)})
	}
}

// anyPort reports whether addr asks for any free port (":0"): two such
// listeners get two ports.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// hostName reports whether s is a host name or an IP address, with or
// without a port: an entry of ADMIN_HOSTS (console.ParseHost reads it).
func hostName(s string) bool {
	host := s
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		host = h
		if err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return !strings.Contains(host, "%")
	}
	return host != "" && len(host) <= 253 && strings.Trim(strings.ToLower(host), "abcdefghijklmnopqrstuvwxyz0123456789.-") == ""
}

// MailDomain is the domain of MAIL_FROM, used on the right of Message-IDs.
func (c Config) MailDomain() string {
	if a, err := netmail.ParseAddress(c.MailFrom); err == nil {
		if _, domain, ok := strings.Cut(a.Address, "@"); ok {
			return domain
		}
	}
	return "localhost"
}

// Processor is the processor's share of the configuration.
func (c Config) Processor() webhooks.Options {
	return webhooks.Options{
		Lease:              c.LeaseDuration,
		StepTimeout:        c.StepTimeout,
		MaxAttempts:        c.MaxStepAttempts,
		Backoff:            c.RedriveInterval,
		RedriveParallelism: c.RedriveParallelism,
	}
}

// LogValue implements slog.LogValuer: the effective configuration with
// every secret masked.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("DATABASE_URL", maskURL(c.DatabaseURL)),
		slog.String("DATABASE_POOLER", string(c.DatabasePooler)),
		slog.String("DATABASE_SESSION_URL", maskURL(c.DatabaseSessionURL)),
		slog.String("HTTP_ADDR", c.HTTPAddr),
		slog.String("METRICS_ADDR", c.MetricsAddr),
		slog.String("ADMIN_ADDR", c.AdminAddr),
		slog.String("ADMIN_TOKEN", mask(c.AdminToken)),
		slog.String("ADMIN_HOSTS", strings.Join(c.AdminHosts, ",")),
		slog.Bool("ADMIN_COOKIE_SECURE", c.AdminCookieSecure),
		slog.String("ADMIN_LOCKOUT", c.AdminLockout.String()),
	}
	for _, s := range c.specs {
		p := c.Providers[s.Source]
		attrs = append(attrs, slog.String(s.Secret.Name, maskList(s.Secret, p.Secrets)))
		for _, v := range s.Vars {
			attrs = append(attrs, slog.String(v.Name, v.Masked(p.Vars[v.Name])))
		}
	}
	proxies := make([]string, len(c.TrustedProxies))
	for i, p := range c.TrustedProxies {
		proxies[i] = p.String()
	}
	attrs = append(attrs,
		slog.String("LEASE_DURATION", c.LeaseDuration.String()),
		slog.String("STEP_TIMEOUT", c.StepTimeout.String()),
		slog.String("SMTP_ADDR", c.SMTPAddr),
		slog.String("SMTP_TLS", string(c.SMTPTLS)),
		slog.String("SMTP_USERNAME", c.SMTPUsername),
		slog.String("SMTP_PASSWORD", mask(c.SMTPPassword)),
		slog.String("MAIL_DIR", c.MailDir),
		slog.String("MAIL_FROM", c.MailFrom),
		slog.String("NOTIFY_EMAIL", c.NotifyEmail),
		slog.String("FULFILLMENT_URL", maskURL(c.FulfillmentURL)),
		slog.String("FULFILLMENT_SECRET", maskKey(c.FulfillmentKey)),
		slog.String("ALERT_WEBHOOK_URL", alerts.MaskURL(c.AlertWebhookURL)),
		slog.String("ALERT_EMAIL", c.AlertEmail),
		slog.Bool("ALLOW_INSECURE_HTTP", c.AllowInsecureHTTP),
		slog.String("SILENCE_ALERT_AFTER", silencesText(c.SilenceAlertAfter)),
		slog.Int64("MAX_BODY_BYTES", c.MaxBodyBytes),
		slog.Int("MAX_INFLIGHT", c.MaxInflight),
		slog.Int64("UNVERIFIED_BODY_BYTES", c.UnverifiedBodyBytes),
		slog.String("BODY_TIMEOUT", c.BodyTimeout.String()),
		slog.Int("MAX_CONNECTIONS", c.MaxConnections),
		slog.String("TRUSTED_PROXIES", strings.Join(proxies, ",")),
		slog.String("REDRIVE_INTERVAL", c.RedriveInterval.String()),
		slog.Int("REDRIVE_PARALLELISM", c.RedriveParallelism),
		slog.Int("MAX_STEP_ATTEMPTS", c.MaxStepAttempts),
		slog.String("RECONCILE_INTERVAL", c.ReconcileInterval.String()),
		slog.String("PUBLIC_URL", c.PublicURL),
		slog.String("ENTITLEMENTS_FILE", c.EntitlementsFile),
		slog.String("API_TOKEN", mask(c.APIToken)),
		slog.String("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String()),
		slog.Int("DB_MAX_CONNS", int(c.DBMaxConns)),
		slog.String("LOG_LEVEL", c.LogLevel.String()),
		slog.String("LOG_FORMAT", string(c.LogFormat)),
		slog.String("MAIL_TEMPLATES_DIR", c.MailTemplatesDir),
	)
	attrs = append(attrs, c.Portal.portalLog()...)
	return slog.GroupValue(attrs...)
}

// maskKey is what start-up logs of a Standard Webhooks key: its prefix.
func maskKey(key []byte) string {
	if key == nil {
		return ""
	}
	return standardwebhooks.SecretPrefix + "****"
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return "****"
}

// maskList shows how many secrets there are and what is safe to log of
// each (a prefix at most).
func maskList(v webhooks.Var, secrets []string) string {
	if len(secrets) == 0 {
		return "(unset)"
	}
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = v.Masked(s)
	}
	return strings.Join(out, ",")
}

// maskURL hides the password of a URL, in its user info or in a
// password= or sslpassword= parameter (both of which pgx accepts).
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		if strings.Contains(raw, "password") {
			return "(masked: contains a password)"
		}
		return raw
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "****")
		}
	}
	q := u.Query()
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "****")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// loader collects parse errors while reading variables.
type loader struct {
	getenv func(string) string
	errs   []error
}

func (l *loader) fail(name, msg string) { l.errs = append(l.errs, fmt.Errorf("%s %s", name, msg)) }

func (l *loader) str(name, def string) string {
	if v := strings.TrimSpace(l.getenv(name)); v != "" {
		return v
	}
	return def
}

func (l *loader) list(name string) []string {
	var out []string
	for _, s := range strings.Split(l.getenv(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (l *loader) duration(name string, def time.Duration) time.Duration {
	v := l.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		l.fail(name, fmt.Sprintf("must be a Go duration such as 30s or 5m, got %q", v))
		return def
	}
	return d
}

func (l *loader) integer(name string, def int) int {
	v := l.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		l.fail(name, fmt.Sprintf("must be a whole number, got %q", v))
		return def
	}
	return n
}

// silenceExample is an example of SILENCE_ALERT_AFTER with the providers'
// own names ("alpha=6h,beta=7d").
func silenceExample(specs []webhooks.Spec) string {
	var parts []string
	for i, s := range specs[:min(2, len(specs))] {
		parts = append(parts, s.Source+"="+[]string{"6h", "7d"}[i])
	}
	return strings.Join(parts, ",")
}

// silences reads SILENCE_ALERT_AFTER: "source=duration" pairs, comma-
// separated, each duration a Go duration or a number of days ("7d"), or
// "off".
func (l *loader) silences(name string, specs []webhooks.Spec) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, pair := range l.list(name) {
		source, v, ok := strings.Cut(pair, "=")
		source, v = strings.TrimSpace(source), strings.TrimSpace(v)
		known := false
		for _, s := range specs {
			known = known || s.Source == source
		}
		switch {
		case !ok:
			l.fail(name, fmt.Sprintf("%q is not source=duration (%s)", pair, silenceExample(specs)))
			continue
		case !known:
			l.fail(name, fmt.Sprintf("%q names no provider", source))
			continue
		case v == "off":
			out[source] = 0
			continue
		}
		d, err := time.ParseDuration(v)
		if days, isDays := strings.CutSuffix(v, "d"); isDays {
			n, nerr := strconv.Atoi(days)
			d, err = time.Duration(n)*24*time.Hour, nerr
		}
		if err != nil || d < time.Minute {
			l.fail(name, fmt.Sprintf("%s=%s: the silence must be a duration of at least 1m (6h, 7d) or off", source, v))
			continue
		}
		out[source] = d
	}
	return out
}

// silencesText writes SILENCE_ALERT_AFTER back, sorted.
func silencesText(m map[string]time.Duration) string {
	var parts []string
	for source, d := range m {
		v := "off"
		if d > 0 {
			v = d.String()
		}
		parts = append(parts, source+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
