// Package portal puts a billing-portal link in every customer email whose
// provider has a portal (Stripe's billing portal, Paddle's and Polar's
// customer portals), and serves it: GET /billing/portal?t=… on HTTP_ADDR.
//
// A provider's portal session is short-lived and "will expire if the
// customer does not visit the URL" (Stripe): it cannot go in an email. The
// email carries a link to the receiver instead, whose token (t) is sealed
// with PORTAL_LINK_SECRET (AES-256-GCM, token.go): it names the provider,
// its customer (and a Stripe connected account) and when it expires,
// readable and writable by nobody without the key, so that the customer id
// is never in the link in clear and nobody makes a link to another
// customer's portal. A click opens a fresh portal session through the
// provider's API and redirects the customer to it (303).
//
// A link is refused, with a plain page that says to ask for a new one and
// no call to the provider, when its token is forged (no key opens it: made
// up, altered, or sealed with a key since dropped), expired
// (PORTAL_LINK_TTL after its email was sent), or used past its limit
// (PORTAL_LINK_USES opens, counted in portal_link_uses by the token's
// nonce, migration 23). Like every public route, it is held to a few calls
// a second per client (internal/ratelimit: 429), and to a bound of its own
// overall.
//
// Keys are rotated as webhook secrets are: PORTAL_LINK_SECRET is a
// comma-separated list, the first key seals, every key opens; put a new key
// first, and drop the old one once the links it sealed have expired
// (PORTAL_LINK_TTL).
package portal

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/ratelimit"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Route is the links' path on HTTP_ADDR.
const Route = "/billing/portal"

// Opener opens a portal session for a customer through the provider's API
// and returns its URL.
type Opener interface {
	Open(ctx context.Context, customerID, account, returnURL string) (string, error)
}

// Provider is the registry's line of a provider that has a portal.
type Provider struct {
	Source string
	// Opener builds the provider's opener from its settings; nil (and no
	// error) when they do not allow one (its API key is unset).
	Opener func(webhooks.Settings) (Opener, error)
}

// Settings are what Setup reads.
type Settings struct {
	Keys      [][]byte // PORTAL_LINK_SECRET
	PublicURL string   // PUBLIC_URL
	TTL       time.Duration
	Uses      int
	ReturnURL string
	// Provider is a source's settings (wiring.Setup.Settings).
	Provider func(source string) webhooks.Settings
}

// Setup reads what the links need: the keys, the public URL, and the
// providers whose portal can be opened (their API key is set). With none of
// them, off says why there are no links ("" when PORTAL_LINK_SECRET is
// simply unset).
func Setup(s Settings, ps []Provider) (keys *Keys, openers map[string]Opener, off string, err error) {
	switch {
	case len(s.Keys) == 0:
		return nil, nil, "", nil
	case s.PublicURL == "":
		return nil, nil, "PORTAL_LINK_SECRET is set but PUBLIC_URL is not: the emails cannot link to the receiver", nil
	}
	if keys, err = NewKeys(s.Keys); err != nil {
		return nil, nil, "", err
	}
	openers = map[string]Opener{}
	for _, p := range ps {
		o, err := p.Opener(s.Provider(p.Source))
		if err != nil {
			return nil, nil, "", err
		}
		if o != nil {
			openers[p.Source] = o
		}
	}
	if len(openers) == 0 {
		return nil, nil, "PORTAL_LINK_SECRET is set but no provider with a portal has its API key set", nil
	}
	return keys, openers, "", nil
}

// Linker makes the links the emails carry (mail.Kind.Portal).
type Linker struct {
	Keys    *Keys
	Base    string          // PUBLIC_URL
	TTL     time.Duration   // PORTAL_LINK_TTL
	Sources map[string]bool // the providers whose portal opens
	Now     func() time.Time
}

// Link is the link to c's portal, valid for TTL from now; "" for a
// provider whose portal does not open here, or should sealing fail.
func (l *Linker) Link(c mail.Customer) string {
	if !l.Sources[c.Source] || c.ID == "" {
		return ""
	}
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	t, err := l.Keys.Seal(Claims{Source: c.Source, Customer: c.ID, Account: c.Account, Expires: now().Add(l.TTL)})
	if err != nil {
		return ""
	}
	return l.Base + Route + "?t=" + t
}

// Querier runs the uses' statements (the pool).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Config is what a Handler is built from.
type Config struct {
	Keys      *Keys
	Openers   map[string]Opener
	Uses      int // PORTAL_LINK_USES
	ReturnURL string
	DB        Querier
	ClientIP  func(*http.Request) string
	Limits    ratelimit.Limits
	Log       *slog.Logger
	// Registerer takes the handler's series; nil: none.
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// OpenTimeout bounds one opening of a portal session, retries included.
const OpenTimeout = 5 * time.Second

// Outcomes are the values of billing_portal_links_total's outcome label.
var Outcomes = []string{"opened", "forged", "expired", "used_up", "unavailable", "api_failed", "throttled", "busy", "failed"}

// Handler serves GET /billing/portal.
type Handler struct {
	cfg      Config
	limiter  *ratelimit.Limiter
	outcomes *prometheus.CounterVec

	mu    sync.Mutex
	swept time.Time
}

// New returns the handler cfg describes.
func New(cfg Config) *Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg, limiter: ratelimit.New(cfg.Limits), outcomes: ratelimit.Outcomes("billing_portal_links_total",
		"Billing-portal links followed (GET /billing/portal), by what became of them: opened (redirected to a fresh "+
			"portal session), forged, expired, used_up, unavailable (the provider's portal is not configured), api_failed, "+
			"throttled (429), busy, failed.", Outcomes, cfg.Registerer)}
}

// ServeHTTP answers a link: 303 to a fresh portal session, or a plain page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ts := r.URL.Query()["t"]
	switch v, wait := h.limiter.Allow(ratelimit.ClientOf(r, h.cfg.ClientIP), h.cfg.Now()); v {
	case ratelimit.ClientLimited:
		h.page(w, r, "throttled", http.StatusTooManyRequests, wait, "Too many requests from your address: try again in a moment.")
		return
	case ratelimit.OverallLimited:
		h.page(w, r, "busy", http.StatusServiceUnavailable, wait, "The billing portal is busy: try again in a moment.")
		return
	}
	if len(ts) != 1 {
		h.page(w, r, "forged", http.StatusForbidden, 0, "This link does not work. "+askAgain)
		return
	}
	c, err := h.cfg.Keys.Open(ts[0])
	switch {
	case err != nil:
		h.page(w, r, "forged", http.StatusForbidden, 0, "This link does not work. "+askAgain)
		return
	case !h.cfg.Now().Before(c.Expires):
		h.page(w, r, "expired", http.StatusGone, 0, "This link has expired. "+askAgain)
		return
	}
	opener := h.cfg.Openers[c.Source]
	if opener == nil {
		h.page(w, r, "unavailable", http.StatusGone, 0, "This link does not work any more. "+askAgain)
		return
	}
	ctx := r.Context()
	switch ok, err := h.use(ctx, c); {
	case err != nil:
		h.cfg.Log.ErrorContext(ctx, "billing portal: the link's use not counted", "error", err)
		h.page(w, r, "failed", http.StatusServiceUnavailable, 0, "The billing portal cannot be opened right now: try again in a moment.")
		return
	case !ok:
		h.page(w, r, "used_up", http.StatusGone, 0, "This link has been used as often as it may be. "+askAgain)
		return
	}
	octx, cancel := context.WithTimeout(ctx, OpenTimeout)
	to, err := opener.Open(octx, c.Customer, c.Account, h.cfg.ReturnURL)
	cancel()
	if err == nil {
		err = checkURL(to)
	}
	if err != nil {
		h.giveBack(context.WithoutCancel(ctx), c)
		h.cfg.Log.WarnContext(ctx, "billing portal: session not opened", "source", c.Source, "error", err)
		h.page(w, r, "api_failed", http.StatusBadGateway, 0, "The billing portal cannot be opened right now: try again in a moment.")
		return
	}
	h.outcomes.WithLabelValues("opened").Inc()
	h.cfg.Log.InfoContext(ctx, "billing portal opened", "source", c.Source)
	w.Header().Set("Location", to)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusSeeOther)
}

// askAgain is what every refused link says.
const askAgain = "Please ask for a new link: reply to the email you received it in, or contact us."

// page answers a plain text page and counts the outcome.
func (h *Handler) page(w http.ResponseWriter, r *http.Request, outcome string, status int, retry time.Duration, text string) {
	h.outcomes.WithLabelValues(outcome).Inc()
	if outcome != "throttled" && outcome != "busy" {
		h.cfg.Log.InfoContext(r.Context(), "billing portal link refused", "outcome", outcome)
	}
	ratelimit.Page(w, status, retry, text)
}

// The uses of a link, by its token's nonce (migration 23): counted before
// the portal is opened, given back when it could not be.
const (
	useSQL = `
INSERT INTO portal_link_uses AS u (link_id, uses, expires_at) VALUES ($1, 1, $2)
ON CONFLICT (link_id) DO UPDATE SET uses = u.uses + 1 WHERE u.uses < $3
RETURNING uses`
	giveBackSQL = `UPDATE portal_link_uses SET uses = uses - 1 WHERE link_id = $1 AND uses > 0`
	sweepSQL    = `DELETE FROM portal_link_uses WHERE expires_at < now()`
)

// use counts one use of the link c, and reports whether it was within its
// limit. Expired links' rows are deleted at most once a minute.
func (h *Handler) use(ctx context.Context, c Claims) (bool, error) {
	var n int
	err := h.cfg.DB.QueryRow(ctx, useSQL, c.ID, c.Expires, h.cfg.Uses).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.mu.Lock()
	sweep := h.cfg.Now().Sub(h.swept) >= time.Minute
	if sweep {
		h.swept = h.cfg.Now()
	}
	h.mu.Unlock()
	if sweep {
		if _, err := h.cfg.DB.Exec(ctx, sweepSQL); err != nil {
			h.cfg.Log.WarnContext(ctx, "billing portal: expired links not swept", "error", err)
		}
	}
	return true, nil
}

func (h *Handler) giveBack(ctx context.Context, c Claims) {
	if _, err := h.cfg.DB.Exec(ctx, giveBackSQL, c.ID); err != nil {
		h.cfg.Log.WarnContext(ctx, "billing portal: a use not given back", "error", err)
	}
}

// checkURL accepts an absolute http(s) URL, what a portal session is.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return errors.New("the provider's answer has no portal URL")
	}
	return nil
}
