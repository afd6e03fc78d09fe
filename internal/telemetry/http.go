package telemetry

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
)

// Handler wraps next in otelhttp's server span while tracing is on, and is
// next itself while it is off. The span is always the root of a trace: no
// payment provider sends a trace context, and one sent by anyone else is
// not trusted (it would choose our sampling and join our traces to theirs).
// opts add to these defaults (a span name formatter, a filter).
func Handler(next http.Handler, opts ...otelhttp.Option) http.Handler {
	traced := otelhttp.NewHandler(next, "receive", append([]otelhttp.Option{
		otelhttp.WithTracerProvider(Provider()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()), // latency is Prometheus's
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
	}, opts...)...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if enabled.Load() {
			traced.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Transport wraps base in otelhttp's client span while tracing is on, so
// that the call is a span of the step that makes it and the traceparent
// header carries it to the API called; it is base itself, per request,
// while tracing is off. The span is named after the method and the path:
// use it for a client of an API whose paths are a closed set.
func Transport(base http.RoundTripper) http.RoundTripper {
	return transport{base: base, traced: otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(Provider()),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
	)}
}

type transport struct {
	base   http.RoundTripper
	traced http.RoundTripper
}

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if enabled.Load() {
		return t.traced.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the base transport.
func (t transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
