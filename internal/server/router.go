package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// router registers every route of the receiver, in one place.
func (s *Server) router() *echo.Echo {
	e := echo.NewWithConfig(echo.Config{
		HTTPErrorHandler: s.errorHandler,
		IPExtractor:      ipExtractor(s.cfg.TrustedProxies),
		Logger:           s.log,
	})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "http_request_duration_seconds",
		Help:    "Latency of HTTP requests by route (\"unmatched\" for any path no route serves), method (\"other\" beyond the standard ones) and status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method", "code"})
	s.registry.MustRegister(latency)

	s.webhookRoutes = nil
	for _, p := range s.providers {
		if p.on {
			s.webhookRoutes = append(s.webhookRoutes, p.spec.Route())
		}
	}
	// Pre: it sees every request, routed or not (404, 405 included).
	e.Pre(s.requests(latency), trailingSlash(s.webhookRoutes))

	e.GET("/healthz", func(c *echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.readyz)
	if s.cfg.MetricsAddr == "" {
		e.GET("/metrics", echo.WrapHandler(s.metricsHandler()))
	}

	h := webhooks.NewHandler(s.proc, s.metrics, s.log, webhooks.Limits{
		MaxBody:         s.cfg.MaxBodyBytes,
		MaxInflight:     s.cfg.MaxInflight,
		UnverifiedBytes: s.cfg.UnverifiedBodyBytes,
		BodyTimeout:     s.cfg.BodyTimeout,
		// The same client address as the request log's remote.
		ClientAddr: ipExtractor(s.cfg.TrustedProxies),
		// Its connection is a sender's from then on (connLimit).
		Verified: requestVerified,
	})
	s.closers = append(s.closers, func(context.Context) error { h.FlushLog(); return nil })
	adm := h.Admission()
	s.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "webhook_unverified_body_bytes",
		Help: "Bytes held by webhook bodies whose signature has not been verified yet (at most UNVERIFIED_BODY_BYTES).",
	}, func() float64 {
		n, _ := adm.Used()
		return float64(n)
	}))
	for _, p := range s.providers {
		if !p.on {
			s.log.Warn("webhook route not mounted: its secret is not set", "route", p.spec.Route(), "variable", p.spec.Secret.Name)
			continue
		}
		e.POST(p.spec.Route(), echo.WrapHandler(h.Route(p.spec, p.prov)))
		s.log.Info("webhook route mounted", "route", p.spec.Route())
	}
	for _, b := range s.buyer {
		e.GET(b.path, echo.WrapHandler(b.h))
	}
	return e
}

// trailingSlash answers a webhook route written with a trailing slash
// (/webhooks/stripe/) as the route itself: a sender, or the Stripe CLI's
// --forward-to, posts to the URL as it was typed and follows no redirect.
// Only those exact paths are rewritten; any other path is routed as it is.
func trailingSlash(routes []string) echo.MiddlewareFunc {
	slashed := map[string]string{}
	for _, r := range routes {
		slashed[r+"/"] = r
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			u := c.Request().URL
			if r, ok := slashed[u.EscapedPath()]; ok {
				u.Path, u.RawPath = r, ""
			}
			return next(c)
		}
	}
}

// ipExtractor is where a request's client address comes from: the socket,
// unless TRUSTED_PROXIES names the proxies whose X-Forwarded-For counts
// (and no others: not loopback, not private networks, by default).
func ipExtractor(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		_, n, err := net.ParseCIDR(p.String())
		if err == nil {
			opts = append(opts, echo.TrustIPRange(n))
		}
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// requestIDs makes the receiver's own request ids: a random prefix per
// process and a counter, unique and cheap.
var requestIDs = func() func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := hex.EncodeToString(b[:]) + "-"
	var n atomic.Uint64
	return func() string { return prefix + strconv.FormatUint(n.Add(1), 36) }
}()

// clientRequestID keeps a client's X-Request-ID only when it is short and
// of a safe character set; it is logged beside the receiver's own id,
// never instead of it.
func clientRequestID(v string) string {
	if v == "" || len(v) > 64 {
		return ""
	}
	for _, c := range v {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return ""
		}
	}
	return v
}

// methods are the label values of a request's method; anything else is
// "other".
var methods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodOptions: true,
}

func methodLabel(m string) string {
	if methods[m] {
		return m
	}
	return "other"
}

// requests gives every request the receiver's own request id (in the
// response's X-Request-ID and every log line), recovers a panic into a
// 500, observes the latency with label values from closed sets only, and
// logs the request once it is answered (webhook routes log their own line
// with what became of the delivery). A refused request's line (4xx, 5xx:
// a stranger's GET of paths that are not there) is sampled by its route,
// method and status (reqlog.Repeats): the first of a minute whole, the
// others counted.
func (s *Server) requests(latency *prometheus.HistogramVec) echo.MiddlewareFunc {
	refused := reqlog.NewRepeats(s.log, reqlog.RepeatPeriod, nil)
	s.closers = append(s.closers, func(context.Context) error { refused.Flush(); return nil })
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) (err error) {
			start := time.Now()
			req := c.Request()
			id := requestIDs()
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			ctx := reqlog.With(req.Context(), "request_id", id)
			if cid := clientRequestID(req.Header.Get(echo.HeaderXRequestID)); cid != "" {
				ctx = reqlog.With(ctx, "client_request_id", cid)
			}
			c.SetRequest(req.WithContext(ctx))
			defer func() {
				if r := recover(); r != nil {
					if r == http.ErrAbortHandler {
						panic(r)
					}
					s.log.ErrorContext(ctx, "panic while serving request", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
					err = echo.NewHTTPError(http.StatusInternalServerError, "")
				}
				if err != nil {
					c.Echo().HTTPErrorHandler(c, err)
					err = nil
				}
				status := http.StatusOK
				if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Status != 0 {
					status = r.Status
				}
				route := c.Path()
				if route == "" {
					route = "unmatched"
				}
				obs := latency.WithLabelValues(route, methodLabel(req.Method), codeLabel(status))
				if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
					// An exemplar: from a slow bucket to the trace of one
					// request in it (OpenMetrics exposition only).
					obs.(prometheus.ExemplarObserver).ObserveWithExemplar(time.Since(start).Seconds(),
						prometheus.Labels{"trace_id": sc.TraceID().String()})
				} else {
					obs.Observe(time.Since(start).Seconds())
				}
				switch {
				case strings.HasPrefix(route, "/webhooks/") && status != http.StatusNotFound && status != http.StatusMethodNotAllowed,
					route == "/healthz", route == "/readyz", route == "/metrics":
				case status >= 400:
					kind := []slog.Attr{slog.String("route", route), slog.String("method", methodLabel(req.Method)), slog.Int("status", status)}
					refused.Log(ctx, slog.LevelInfo, "request", kind, "method", methodLabel(req.Method), "path", webhooks.Quote(req.URL.Path, 200),
						"status", status, "duration_ms", time.Since(start).Milliseconds(), "remote", c.RealIP())
				default:
					s.log.InfoContext(ctx, "request", "method", methodLabel(req.Method), "path", reqlog.Untrusted(req.URL.Path, 200),
						"status", status, "duration_ms", time.Since(start).Milliseconds(), "remote", c.RealIP())
				}
			}()
			return next(c)
		}
	}
}

func codeLabel(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status)
}

// errorHandler answers every error with its status and a generic message.
// The cause of a 5xx is logged, never sent.
func (s *Server) errorHandler(c *echo.Context, err error) {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return
	}
	code := echo.StatusCode(err)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if code >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", "error", err)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	if p := c.Request().URL.Path; code == http.StatusNotFound && (p == "/webhooks" || strings.HasPrefix(p, "/webhooks/")) {
		// A sender pointed at a wrong or unmounted route: say which are
		// mounted (the configuration's, never anything of the request).
		routes := make([]string, 0, len(s.webhookRoutes))
		for _, r := range s.webhookRoutes {
			routes = append(routes, "POST "+r)
		}
		_ = c.JSON(code, struct {
			Error  string   `json:"error"`
			Routes []string `json:"webhook_routes"`
			Hint   string   `json:"hint"`
		}{http.StatusText(code), routes, "a provider's route is mounted only when its secret is set"})
		return
	}
	_ = c.JSON(code, map[string]string{"error": http.StatusText(code)})
}

// readyz answers 200 when the database answers and its schema is the one
// this binary embeds, 503 otherwise.
func (s *Server) readyz(c *echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	r, err := db.Ready(ctx, s.pool)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "not ready: database unavailable", "error", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "database unavailable"})
	case r.ReadOnly:
		// Reached a standby (a pooler or an address that still points
		// at a demoted primary): no delivery can be written there.
		s.log.WarnContext(ctx, "not ready: the database is a standby (read-only)")
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "database read-only"})
	case !r.Current():
		return c.JSON(http.StatusServiceUnavailable, map[string]any{
			"status": "unavailable", "reason": "schema not current", "schema_version": r.Version, "want": r.Want, "dirty": r.Dirty})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "schema_version": r.Version})
}
