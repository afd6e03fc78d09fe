// Package console is the operator console: a few server-rendered pages on
// a listener of their own (ADMIN_ADDR), never on the public webhook
// listener. It shows the receiver's health, finds events by any id an
// operator holds, shows one event with every claim and the rows it wrote,
// and runs the operator's actions (replay an event, replay what was parked
// in a window, run a step now, reconcile a window, resolve a parked event
// no replay can fix), each with a preview first.
//
// It holds no claim logic and no SQL of its own but its sign-in sessions'
// (console_sessions): queries and actions are internal/ops', shared with
// the `server events` commands, and actions go through the same processor
// and claims as a delivery.
//
// Security: a request whose Host does not name the console is refused 421
// (host.go). Every page needs ADMIN_TOKEN, as `Authorization: Bearer` or
// as the session cookie that POST /login sets (HttpOnly, SameSite=Strict,
// Secure with ADMIN_COOKIE_SECURE or behind a trusted https proxy), whose
// session lives in PostgreSQL until it expires or POST /logout revokes it
// (session.go). Every check of a token, sign-in or bearer, is throttled
// per client and overall (throttle.go). A state-changing request made with
// the cookie is a POST carrying the page's CSRF token, or it is refused
// 403; after sign-in the console redirects only to its own paths. Every
// answer carries a strict Content-Security-Policy: the only script and
// style are the console's own, from /assets/. Templates escape everything
// they render, stored bodies included; no secret is ever rendered.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Processor is what the console's actions need of the processor:
// *webhooks.Processor.
type Processor interface {
	ops.Replayer
	ops.StepRunner
	Runnable(kind string, payload json.RawMessage) string
}

// Reconciler runs a reconciliation of one source over a window (the events
// the provider created within it), the work of `server reconcile`. With
// dryRun it writes nothing and reports what it would do: the action's
// preview. The console shows the action only when one is configured.
type Reconciler interface {
	// Sources are the sources it can reconcile, as reconcile_runs names
	// them.
	Sources() []string
	Reconcile(ctx context.Context, source string, window time.Duration, dryRun bool, actor string) (ReconcileReport, error)
}

// ReconcileReport is what a reconciliation found and did.
type ReconcileReport struct {
	Summary string   // one paragraph, as the CLI prints it
	Lines   []string // one line per event or finding
}

// Config is what the console is built from.
type Config struct {
	Token string // ADMIN_TOKEN
	// Addr is ADMIN_ADDR and Hosts ADMIN_HOSTS: together, the names a
	// request's Host may give (host.go).
	Addr  string
	Hosts []string
	// CookieSecure (ADMIN_COOKIE_SECURE) makes the session cookie Secure
	// on every answer.
	CookieSecure bool
	// TrustedProxies (TRUSTED_PROXIES): a request from one of them with
	// X-Forwarded-Proto: https gets a Secure cookie.
	TrustedProxies []netip.Prefix
	// ClientIP is a request's client address as TRUSTED_PROXIES makes it
	// (the receiver's own rule); sign-ins are throttled per client by it.
	// nil: the socket's peer.
	ClientIP func(*http.Request) string
	// Lockout (ADMIN_LOCKOUT) is how long a client that gave too many
	// wrong tokens is refused, and the window they are counted in (0:
	// DefaultLockout).
	Lockout   time.Duration
	DB        webhooks.Querier
	Processor Processor
	Providers map[string]webhooks.Provider // by source
	Specs     []webhooks.Spec
	// Owners are the owners of the business tables an event's page and a
	// search read (wiring.Owners).
	Owners []ops.Owner
	// Alerts are where the overview reads the alerts sent (alerts.Log);
	// nil: it lists none.
	Alerts ops.AlertLog
	Lease  time.Duration // LEASE_DURATION
	// Kinds are the step kinds, which say what each step sends that an
	// operator can look for downstream (webhooks.Referrer).
	Kinds      webhooks.StepKinds
	Gatherer   prometheus.Gatherer
	Reconciler Reconciler // nil: no reconcile action
	// AlertChannels are the operator alerts' channels configured
	// ("webhook", "email"), which the overview names; none: alerts off.
	AlertChannels []string
	Log           *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// APIToken (API_TOKEN) opens the read API (/api/…) and nothing else;
	// "": no API. Entitlements are what it and the entitlements page read
	// (nil: ENTITLEMENTS_FILE is unset).
	APIToken     string
	Entitlements Entitlements
}

// Console serves the pages.
type Console struct {
	cfg      Config
	auth     auth
	hosts    hosts
	sessions sessions
	throttle *throttle
	apiAuth  *auth // API_TOKEN's; nil: no API
	pages    map[string]*template.Template
	counters *counters
	mux      *http.ServeMux

	lastMisdirected atomic.Int64 // when a foreign Host was last logged (Unix ns)
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// New builds the console. It fails on an empty token (the console is never
// served open), and without an address or a host name it could answer to.
func New(cfg Config) (*Console, error) {
	if len(cfg.Token) == 0 {
		return nil, errors.New("console: no ADMIN_TOKEN")
	}
	if cfg.DB == nil {
		return nil, errors.New("console: no database (sessions are stored in it)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Lockout <= 0 {
		cfg.Lockout = DefaultLockout
	}
	h, err := newHosts(cfg.Addr, cfg.Hosts)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{cfg: cfg, auth: newAuth(cfg.Token), hosts: h, sessions: sessions{db: cfg.DB},
		throttle: newThrottle(cfg.Lockout, cfg.Now()), pages: map[string]*template.Template{}}
	if cfg.Gatherer != nil {
		c.counters = newCounters(cfg.Gatherer, cfg.Now)
	}
	if cfg.APIToken != "" {
		if cfg.APIToken == cfg.Token {
			return nil, errors.New("console: API_TOKEN is ADMIN_TOKEN: each must open only its own")
		}
		a := newAuth(cfg.APIToken)
		c.apiAuth = &a
	}
	for _, page := range []string{"login", "overview", "events", "event", "replay", "replayed", "step", "parked",
		"reconcile", "resolve", "error", "entitlements"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		c.pages[page] = t
	}
	c.routes()
	return c, nil
}

// routes registers every route of the console, in one place.
func (c *Console) routes() {
	m := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	m.Handle("GET /assets/", http.StripPrefix("/assets/", cacheAssets(http.FileServerFS(assets))))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.Handle("POST /logout", c.authed(c.logout))

	m.Handle("GET /{$}", c.authed(c.overview))
	m.Handle("GET /events", c.authed(c.events))
	m.Handle("GET /events/{key}", c.authed(c.event))
	m.Handle("GET /events/{key}/replay", c.authed(c.replayPreview))
	m.Handle("POST /events/{key}/replay", c.authed(c.replay))
	m.Handle("GET /events/{key}/resolve", c.authed(c.resolvePreview))
	m.Handle("POST /events/{key}/resolve", c.authed(c.resolve))
	m.Handle("GET /events/{key}/steps/{step}/run", c.authed(c.stepPreview))
	m.Handle("POST /events/{key}/steps/{step}/run", c.authed(c.stepRun))
	m.Handle("GET /replay-parked", c.authed(c.parkedPreview))
	m.Handle("POST /replay-parked", c.authed(c.parkedReplay))
	m.Handle("GET /entitlements", c.authed(c.entitlementsPage))
	m.Handle("GET /entitlements/{subject...}", c.authed(c.entitlementsPage))
	m.Handle("GET /api/entitlements/{subject...}", c.api(c.apiEntitlements))
	m.Handle("GET /reconcile", c.authed(c.reconcilePage))
	m.Handle("POST /reconcile", c.authed(c.reconcile))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "No such page.", nil)
	})
	c.mux = m
}

// Run samples the receiver's counters every minute until ctx ends, so that
// the overview can tell deliveries and rejections over the last hour.
func (c *Console) Run(ctx context.Context) {
	if c.counters == nil {
		return
	}
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		c.counters.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// csp is the policy of every answer: nothing from outside, no inline
// script or style, no framing, forms only to the console itself.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP implements http.Handler: a request for another Host is
// refused 421; every answer, errors and assets included, carries the
// security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer a browser sends
	// "Origin: null" on the console's own form posts.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/assets/") {
		h.Set("Cache-Control", "no-store")
	}
	if !c.hosts.allowed(r) {
		c.misdirected(w, r)
		return
	}
	c.mux.ServeHTTP(w, r)
}

func cacheAssets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// actor names who runs an action in the logs: the console and the remote
// address (one token, no user names).
func actor(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "console " + host
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string // the section the page belongs to
	CSRF    string // "" for scripts (bearer): no forms need it
	Signed  bool   // signed in with the cookie (a sign-out button)
	Now     time.Time
	Data    any
	Recon   bool // a reconciler is configured
	Request *http.Request
}

// render writes a page with status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page, title, nav string, data any) {
	v := view{Title: title, Nav: nav, Now: c.cfg.Now(), Data: data, Recon: c.cfg.Reconciler != nil, Request: r}
	if s, ok := sessionOf(r); ok {
		v.Signed = true
		v.CSRF = c.auth.csrfToken(s.cookie)
	}
	var buf strings.Builder
	if err := c.pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "console: render", "page", page, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// wantsJSON reports whether a script asked for JSON rather than a page.
func wantsJSON(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "application/json") && !strings.Contains(a, "text/html")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// errorView is the error page's data.
type errorView struct {
	Status  int
	Message string
}

// fail answers an error: the message to the operator, the cause to the
// log only (it may name internals).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "console: "+msg, "path", reqlog.Untrusted(r.URL.Path, 200), "error", err)
	}
	if wantsJSON(r) {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	c.render(w, r, status, "error", http.StatusText(status), "", errorView{Status: status, Message: msg})
}
