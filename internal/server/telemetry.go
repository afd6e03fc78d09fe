package server

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/telemetry"
)

// setupTracing configures tracing from the OTEL_* environment variables
// (telemetry.Setup) before anything that is traced is built, and registers
// the flush of buffered spans with the closers. When they configure
// nothing, tracing stays off, at no cost.
func (s *Server) setupTracing(ctx context.Context) error {
	_, shutdown, err := telemetry.Setup(ctx, s.log)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	s.closers = append(s.closers, shutdown)
	return nil
}

// traced wraps the public handler in otelhttp's server span, named after
// the route ("POST /webhooks/stripe"), with http.route and the client
// address as the router sees it (TRUSTED_PROXIES; otelhttp would believe
// any X-Forwarded-For). Probes and scrapes are not traced. While tracing
// is off, each request goes straight to h.
func (s *Server) traced(h http.Handler) http.Handler {
	routes := map[string]string{} // "POST /webhooks/stripe" → "/webhooks/stripe"
	for _, r := range s.echo.Router().Routes() {
		if len(r.Parameters) == 0 {
			routes[r.Method+" "+r.Path] = r.Path
		}
	}
	untraced := map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}
	realIP := ipExtractor(s.cfg.TrustedProxies)
	named := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
			span.SetAttributes(semconv.ClientAddress(realIP(r)))
			if route, ok := routes[r.Method+" "+r.URL.Path]; ok {
				span.SetAttributes(semconv.HTTPRoute(route))
			}
		}
		h.ServeHTTP(w, r)
	})
	return telemetry.Handler(named,
		otelhttp.WithFilter(func(r *http.Request) bool { return !untraced[r.URL.Path] }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if route, ok := routes[r.Method+" "+r.URL.Path]; ok {
				return r.Method + " " + route
			}
			return methodLabel(r.Method) // any other path or method: a closed set of names all the same
		}))
}
