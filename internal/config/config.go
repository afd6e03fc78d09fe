// Package config reads the receiver's configuration from the environment
// into plain values (strings, numbers, durations, addresses, lists) and
// validates all of it at once, each problem naming its variable. It is a
// leaf: it imports no domain package. A value whose meaning belongs to
// another package (the mail templates of MAIL_TEMPLATES_DIR, the
// entitlements catalogue, the fulfillment secret's key, the alert
// webhook's URL) is read by internal/wiring, which has its owner parse it
// and reports what the owner refuses with the problems found here. The
// variables of each webhook provider come from its webhooks.Spec, so this
// package names none of them.
//
// Each concern has its loader, in its file: the HTTP listeners and what a
// request may cost (http.go), the database (database.go), the processor
// (processor.go), mail (mail.go), the fulfillment API (fulfillment.go),
// operator alerts (alerts.go), the console and the read API (console.go),
// the providers' variables (providers.go), the log (output.go), the public
// URL (public.go) and the billing-portal links (portal.go).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Config is the receiver's configuration as plain values. The zero values
// of optional fields mean "off", as docs/configuration.md's table says.
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

	// Providers are the variables of each provider Load was given, as its
	// Spec declares them and as read, in the order of the specs
	// (providers.go).
	Providers []Provider

	LeaseDuration  time.Duration
	StepTimeout    time.Duration
	SMTPAddr       string
	SMTPUsername   string
	SMTPPassword   string
	MailDir        string
	MailFrom       string
	NotifyEmail    string
	FulfillmentURL string
	// AlertEmail (ALERT_EMAIL) is where operator alerts are emailed;
	// SilenceAlertAfter (SILENCE_ALERT_AFTER, "stripe=6h,github=7d")
	// overrides the learnt silence of a provider past which it is alerted
	// on (0: never). The alert webhook's URL is read by the wiring.
	AlertEmail string
	// AllowInsecureHTTP (ALLOW_INSECURE_HTTP) lets FULFILLMENT_URL and
	// ALERT_WEBHOOK_URL be http:// to a host off this machine (start-up
	// warns); without it only a loopback host may be reached in clear
	// (CheckCleartext).
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

	// What a request may cost before its signature is verified
	// (docs/http.md, "What a request costs").
	UnverifiedBodyBytes int64         // budget shared by unverified bodies (webhooks.Admission)
	BodyTimeout         time.Duration // how long a body may take after its headers
	MaxConnections      int           // connections open on HTTP_ADDR at once
	// MemoryLimitSet: GOMEMLIMIT is set, and the runtime's soft memory
	// limit is the operator's; otherwise it is MemoryBound.
	MemoryLimitSet bool

	// LogFormat is how log lines are written (LOG_FORMAT): LogJSON, or
	// LogText for a person at a terminal.
	LogFormat LogFormat

	// PublicURL (PUBLIC_URL) is the receiver's public base URL, without a
	// trailing slash: "" when unset (public.go).
	PublicURL string
	// Portal is the billing-portal links' configuration (portal.go).
	Portal Portal

	// APIToken (API_TOKEN) opens the read API on ADMIN_ADDR (/api/…);
	// "": no API.
	APIToken string

	// Warnings are what start-up logs about values it accepts but should
	// not have to (a short secret).
	Warnings []Warning
}

// Warning is one accepted but weak setting.
type Warning struct {
	Var     string // the variable's name
	Message string // what is wrong and what to do, never the value
}

// Warn adds a warning of the variable name.
func (c *Config) Warn(name, message string) {
	c.Warnings = append(c.Warnings, Warning{Var: name, Message: message})
}

// DevEnv is the variable the development tool (cmd/dev: `make run`,
// `make test`) sets to "1" for the process it runs. Outside it, a webhook
// secret or ADMIN_TOKEN that contains "development" (in any case) is
// refused: such values come from examples (docker-compose.yml's of old, a
// tutorial) and must never guard a production endpoint.
const DevEnv = "PAYWEBHOOKS_DEV"

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
// every problem at once, each naming its variable. The receiver loads
// through internal/wiring, which adds the problems of the values their
// owners read.
func Load(getenv func(string) string, specs []webhooks.Spec) (Config, error) {
	c, problems := Read(getenv, specs)
	if err := problems.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Read is Load for the wiring: it returns what it read and the problems it
// found, to which the wiring adds those of the values their owners read,
// so that start-up still reports every problem at once.
func Read(getenv func(string) string, specs []webhooks.Spec) (Config, *Problems) {
	l := &loader{getenv: getenv, problems: &Problems{}}
	dev := strings.TrimSpace(getenv(DevEnv)) == "1"
	var c Config
	c.loadOutput(l, dev)
	c.loadProviders(l, specs, dev)
	c.loadDatabase(l)
	c.loadHTTP(l)
	c.loadConsole(l, dev)
	c.loadProcessor(l)
	c.loadMail(l)
	c.loadFulfillment(l)
	c.loadAlerts(l, specs)
	c.loadPublicURL(l)
	c.loadPortal(l)
	return c, l.problems
}

// Problems are what is wrong with a configuration, each naming its
// variable.
type Problems struct{ errs []error }

// Add records that the variable name's value is wrong: msg follows the
// name ("must be at least 1s").
func (p *Problems) Add(name, msg string) { p.errs = append(p.errs, fmt.Errorf("%s %s", name, msg)) }

// AddError records a problem whose text names its variable itself.
func (p *Problems) AddError(err error) { p.errs = append(p.errs, err) }

// Err is every problem, one a line, or nil when there is none.
func (p *Problems) Err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration:\n  %w", errors.Join(p.errs...))
}

// loader reads variables, collecting what is wrong with them.
type loader struct {
	getenv   func(string) string
	problems *Problems
}

func (l *loader) fail(name, msg string) { l.problems.Add(name, msg) }

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

// boolean reads a variable that must be true or false.
func (l *loader) boolean(name string) bool {
	v := l.str(name, "false")
	if v != "true" && v != "false" {
		l.fail(name, fmt.Sprintf("must be true or false, got %q", v))
	}
	return v == "true"
}
