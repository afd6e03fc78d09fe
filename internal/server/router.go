package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// router registers every route of the receiver, in one place.
func (s *Server) router(providers []provider) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler

	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "http_request_duration_seconds",
		Help:    "Latency of HTTP requests by route, method and status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method", "code"})
	s.registry.MustRegister(latency)

	e.Use(middleware.RequestID())
	e.Use(s.requestLogger(latency))
	e.Use(s.recoverer)

	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})))

	h := webhooks.NewHandler(s.proc, s.metrics, s.cfg.MaxBodyBytes)
	hooks := e.Group("/webhooks")
	for _, p := range providers {
		route := "/webhooks/" + p.Source()
		if !p.mounted {
			s.log.Warn("webhook route not mounted: its secret is not set", "route", route)
			continue
		}
		hooks.POST("/"+p.Source(), h.Route(p))
		s.log.Info("webhook route mounted", "route", route)
	}
	return e
}

// requestLogger gives every request a logger carrying its request id, logs
// the request once it is answered, and observes its latency.
func (s *Server) requestLogger(latency *prometheus.HistogramVec) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			id := c.Response().Header().Get(echo.HeaderXRequestID)
			req := c.Request()
			ctx := reqlog.With(req.Context(), s.log.With("request_id", id))
			c.SetRequest(req.WithContext(ctx))
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			latency.WithLabelValues(route, req.Method, strconv.Itoa(status)).Observe(time.Since(start).Seconds())
			if route != "/healthz" && route != "/readyz" && route != "/metrics" {
				reqlog.From(c.Request().Context()).Info("request",
					"method", req.Method, "path", req.URL.Path, "status", status,
					"duration_ms", time.Since(start).Milliseconds(), "remote", c.RealIP())
			}
			return nil
		}
	}
}

// recoverer turns a panic into a 500 and logs it with its stack.
func (s *Server) recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				reqlog.From(c.Request().Context()).Error("panic while serving request",
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = echo.NewHTTPError(http.StatusInternalServerError)
			}
		}()
		return next(c)
	}
}

// errorHandler answers every error with its status and a generic message.
// The cause of a 5xx is logged, never sent.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := http.StatusInternalServerError
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
	}
	if code >= 500 {
		reqlog.From(c.Request().Context()).Error("request failed", "error", err)
	}
	msg := http.StatusText(code)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	_ = c.JSON(code, map[string]string{"error": msg})
}

// readyz answers 200 when the database answers and its schema is the one
// this binary embeds, 503 otherwise.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	want, err := db.LatestVersion()
	if err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "migrations unreadable"})
	}
	var version int64
	var dirty bool
	err = s.pool.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&version, &dirty)
	switch {
	case err != nil:
		reqlog.From(ctx).Warn("not ready: database unavailable", "error", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "database unavailable"})
	case dirty || version != int64(want):
		return c.JSON(http.StatusServiceUnavailable, map[string]any{
			"status": "unavailable", "reason": "schema not current", "schema_version": version, "want": want, "dirty": dirty})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready", "schema_version": version})
}
