// Package config reads the receiver's configuration from the environment,
// validates all of it at once, and logs it with secrets masked.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config is the receiver's whole configuration. The zero values of optional
// fields mean "off", as the README's configuration table says.
type Config struct {
	DatabaseURL     string
	HTTPAddr        string
	StripeSecrets   []string
	GitHubSecrets   []string
	LeaseDuration   time.Duration
	SMTPAddr        string
	SMTPUsername    string
	SMTPPassword    string
	MailDir         string
	MailFrom        string
	NotifyEmail     string
	FulfillmentURL  string
	MaxBodyBytes    int64
	RedriveInterval time.Duration
	MaxStepAttempts int
	ShutdownTimeout time.Duration
	DBMaxConns      int32
	LogLevel        slog.Level
}

// Defaults, as documented in the README.
const (
	DefaultHTTPAddr        = ":8080"
	DefaultLease           = 5 * time.Minute
	DefaultMailDir         = "./var/mail"
	DefaultMailFrom        = "Payments <payments@localhost>"
	DefaultMaxBodyBytes    = 1 << 20
	DefaultRedriveInterval = 10 * time.Second
	DefaultMaxStepAttempts = 10
	DefaultShutdownTimeout = 45 * time.Second
	// DefaultDBMaxConns: durable commits need concurrency to share their
	// disk flushes, and pgx's own default (max(4, CPUs)) starves them.
	DefaultDBMaxConns = 16
)

// Load reads the configuration through getenv (os.Getenv in production, a
// map in tests). It reports every problem at once, each naming its variable.
func Load(getenv func(string) string) (Config, error) {
	l := loader{getenv: getenv}
	c := Config{
		DatabaseURL:     l.str("DATABASE_URL", ""),
		HTTPAddr:        l.str("HTTP_ADDR", DefaultHTTPAddr),
		StripeSecrets:   l.list("STRIPE_WEBHOOK_SECRET"),
		GitHubSecrets:   l.list("GITHUB_WEBHOOK_SECRET"),
		LeaseDuration:   l.duration("LEASE_DURATION", DefaultLease),
		SMTPAddr:        l.str("SMTP_ADDR", ""),
		SMTPUsername:    l.str("SMTP_USERNAME", ""),
		SMTPPassword:    l.str("SMTP_PASSWORD", ""),
		MailDir:         l.str("MAIL_DIR", DefaultMailDir),
		MailFrom:        l.str("MAIL_FROM", DefaultMailFrom),
		NotifyEmail:     l.str("NOTIFY_EMAIL", ""),
		FulfillmentURL:  strings.TrimRight(l.str("FULFILLMENT_URL", ""), "/"),
		MaxBodyBytes:    int64(l.integer("MAX_BODY_BYTES", DefaultMaxBodyBytes)),
		RedriveInterval: l.duration("REDRIVE_INTERVAL", DefaultRedriveInterval),
		MaxStepAttempts: l.integer("MAX_STEP_ATTEMPTS", DefaultMaxStepAttempts),
		ShutdownTimeout: l.duration("SHUTDOWN_TIMEOUT", DefaultShutdownTimeout),
		DBMaxConns:      int32(l.integer("DB_MAX_CONNS", DefaultDBMaxConns)),
	}
	if err := c.LogLevel.UnmarshalText([]byte(l.str("LOG_LEVEL", "info"))); err != nil {
		l.fail("LOG_LEVEL", "must be debug, info, warn or error")
	}

	if c.DatabaseURL == "" {
		l.fail("DATABASE_URL", "is required (for example postgres://user:pass@localhost:5432/receiver)")
	} else if _, err := pgx.ParseConfig(c.DatabaseURL); err != nil {
		l.fail("DATABASE_URL", "is not a PostgreSQL connection URL")
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		l.fail("HTTP_ADDR", fmt.Sprintf("must be host:port or :port, got %q", c.HTTPAddr))
	}
	for i, s := range c.StripeSecrets {
		if !strings.HasPrefix(s, "whsec_") {
			l.fail("STRIPE_WEBHOOK_SECRET", fmt.Sprintf("secret %d does not start with whsec_ (use the endpoint's signing secret, or `stripe listen --print-secret`)", i+1))
		}
	}
	for i, s := range c.GitHubSecrets {
		if len(s) < 8 {
			l.fail("GITHUB_WEBHOOK_SECRET", fmt.Sprintf("secret %d is shorter than 8 characters", i+1))
		}
	}
	if c.LeaseDuration < time.Second {
		l.fail("LEASE_DURATION", "must be at least 1s")
	}
	if c.SMTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.SMTPAddr); err != nil {
			l.fail("SMTP_ADDR", fmt.Sprintf("must be host:port, got %q", c.SMTPAddr))
		}
	}
	if (c.SMTPUsername == "") != (c.SMTPPassword == "") {
		l.fail("SMTP_USERNAME", "and SMTP_PASSWORD must be set together")
	}
	if _, err := mail.ParseAddress(c.MailFrom); err != nil {
		l.fail("MAIL_FROM", fmt.Sprintf("is not an email address: %q", c.MailFrom))
	}
	if c.NotifyEmail != "" {
		if _, err := mail.ParseAddress(c.NotifyEmail); err != nil {
			l.fail("NOTIFY_EMAIL", fmt.Sprintf("is not an email address: %q", c.NotifyEmail))
		}
	}
	if c.FulfillmentURL != "" {
		u, err := url.Parse(c.FulfillmentURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.fail("FULFILLMENT_URL", fmt.Sprintf("must be an absolute http(s) URL, got %q", c.FulfillmentURL))
		}
	}
	if c.MaxBodyBytes <= 0 {
		l.fail("MAX_BODY_BYTES", "must be a positive number of bytes")
	}
	if c.RedriveInterval < 100*time.Millisecond {
		l.fail("REDRIVE_INTERVAL", "must be at least 100ms")
	}
	if c.MaxStepAttempts < 1 {
		l.fail("MAX_STEP_ATTEMPTS", "must be at least 1")
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

// MailDomain is the domain of MAIL_FROM, used on the right of Message-IDs.
func (c Config) MailDomain() string {
	if a, err := mail.ParseAddress(c.MailFrom); err == nil {
		if _, domain, ok := strings.Cut(a.Address, "@"); ok {
			return domain
		}
	}
	return "localhost"
}

// LogValue implements slog.LogValuer: the effective configuration with
// every secret masked.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("DATABASE_URL", maskURL(c.DatabaseURL)),
		slog.String("HTTP_ADDR", c.HTTPAddr),
		slog.String("STRIPE_WEBHOOK_SECRET", maskList(c.StripeSecrets)),
		slog.String("GITHUB_WEBHOOK_SECRET", maskList(c.GitHubSecrets)),
		slog.String("LEASE_DURATION", c.LeaseDuration.String()),
		slog.String("SMTP_ADDR", c.SMTPAddr),
		slog.String("SMTP_USERNAME", c.SMTPUsername),
		slog.String("SMTP_PASSWORD", mask(c.SMTPPassword)),
		slog.String("MAIL_DIR", c.MailDir),
		slog.String("MAIL_FROM", c.MailFrom),
		slog.String("NOTIFY_EMAIL", c.NotifyEmail),
		slog.String("FULFILLMENT_URL", maskURL(c.FulfillmentURL)),
		slog.Int64("MAX_BODY_BYTES", c.MaxBodyBytes),
		slog.String("REDRIVE_INTERVAL", c.RedriveInterval.String()),
		slog.Int("MAX_STEP_ATTEMPTS", c.MaxStepAttempts),
		slog.String("SHUTDOWN_TIMEOUT", c.ShutdownTimeout.String()),
		slog.Int("DB_MAX_CONNS", int(c.DBMaxConns)),
		slog.String("LOG_LEVEL", c.LogLevel.String()),
	)
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return "****"
}

// maskList shows how many secrets there are and a hint of each that is
// safe to log: the whsec_ prefix at most.
func maskList(secrets []string) string {
	if len(secrets) == 0 {
		return "(unset)"
	}
	out := make([]string, len(secrets))
	for i, s := range secrets {
		if strings.HasPrefix(s, "whsec_") {
			out[i] = "whsec_****"
		} else {
			out[i] = "****"
		}
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
