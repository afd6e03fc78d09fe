// Package telemetry is the receiver's OpenTelemetry tracing: its set-up from
// the standard OTEL_* environment variables (Setup), the switch every
// instrumentation point reads (Enabled), the helpers that start the
// receiver's own spans, and the W3C trace context stored with a step so that
// whoever finishes it later links back to the delivery that planned it.
//
// Tracing is off unless Setup finds it configured (see Setup) or a test
// installs a provider (Install). While it is off nothing is wrapped, no span
// is started and nothing is allocated: every instrumentation point asks
// Enabled first, per request, per statement or per step.
//
// The instrumentation uses the global provider (otel.GetTracerProvider),
// looked up at each span, never captured: a test installs an in-memory
// recorder with Install and every instrumentation point follows, whatever
// was built before.
package telemetry

import (
	"context"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the receiver's own spans.
const ScopeName = "github.com/paywebhooks/receiver"

// The attributes of the receiver's spans. Their values are identifiers and
// closed vocabularies: never a secret, a header, a body or a customer's
// email address.
const (
	AttrSource      = attribute.Key("webhook.source")       // the provider's Spec.Source
	AttrEventID     = attribute.Key("webhook.event_id")     // the provider's id, as sent
	AttrEventKey    = attribute.Key("webhook.event_key")    // the claim key: the one to search for
	AttrEventType   = attribute.Key("webhook.event_type")   // as sent (signed)
	AttrVia         = attribute.Key("webhook.via")          // delivery, reconcile, checkout_return
	AttrOutcome     = attribute.Key("webhook.outcome")      // processed, duplicate, … (webhooks.Outcome), rejected
	AttrRejection   = attribute.Key("webhook.rejection")    // why a delivery was refused (missing_signature, …)
	AttrClaimed     = attribute.Key("webhook.claimed")      // this transaction made the event's claim
	AttrFound       = attribute.Key("webhook.found")        // a resend's lookup found the event claimed before
	AttrWrites      = attribute.Key("webhook.writes")       // writes queued in the event's transaction
	AttrStepsQueued = attribute.Key("webhook.steps.queued") // steps queued (each under its condition)
	AttrStepsLeased = attribute.Key("webhook.steps.leased") // steps planned and leased to this worker
	AttrStep        = attribute.Key("webhook.step")         // the step's name: email.confirmation
	AttrStepKind    = attribute.Key("webhook.step.kind")    // email, fulfillment
	AttrStepKey     = attribute.Key("webhook.step_key")     // <event key>/<step name>
	AttrAttempt     = attribute.Key("webhook.step.attempt") // 1 for the delivery's own attempt
	AttrStepOutcome = attribute.Key("webhook.step.outcome") // done, failed, parked, skipped, lease_lost
	AttrRunner      = attribute.Key("webhook.step.runner")  // redriver, operator, replay; unset when the delivery runs it
)

// enabled is the switch: set by Install, read by every instrumentation
// point.
var enabled atomic.Bool

// Enabled reports whether tracing is on: a provider was installed by Setup
// or by a test. The instrumentation starts no span and wraps nothing while
// it is off.
func Enabled() bool { return enabled.Load() }

// Install makes tp the global tracer provider (and W3C trace context the
// global propagator) and turns the instrumentation on. restore puts back
// what was there before; a test calls it in its cleanup.
func Install(tp trace.TracerProvider) (restore func()) {
	prevTP, prevProp, prevOn := otel.GetTracerProvider(), otel.GetTextMapPropagator(), enabled.Load()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
	return func() {
		enabled.Store(prevOn)
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	}
}

// Provider is a tracer provider that resolves the global one at every
// span: what the instrumentation libraries (otelhttp, otelpgx) are given,
// since they keep the tracer they are built with.
func Provider() trace.TracerProvider { return globalProvider{} }

type globalProvider struct{ embedded.TracerProvider }

func (globalProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &globalTracer{name: name, opts: opts}
}

// globalTracer is the tracer of one scope in whatever provider is global,
// cached until the global provider changes.
type globalTracer struct {
	embedded.Tracer
	name   string
	opts   []trace.TracerOption
	cached atomic.Pointer[providerTracer]
}

type providerTracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

func (g *globalTracer) tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	if c := g.cached.Load(); c != nil && c.tp == tp {
		return c.t
	}
	t := tp.Tracer(g.name, g.opts...)
	g.cached.Store(&providerTracer{tp: tp, t: t})
	return t
}

func (g *globalTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return g.tracer().Start(ctx, name, opts...)
}

// receiver is the tracer of the receiver's own spans.
var receiver = &globalTracer{name: ScopeName}

// Start starts a span named name, a child of ctx's span, with attrs, when
// tracing is on. When it is off, or ctx's span was not sampled (every
// sampler Setup builds would drop its children too), it returns ctx as it
// is and a span that does nothing, allocating nothing; End it all the same.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Active(ctx) {
		return ctx, noop.Span{}
	}
	return receiver.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(slices.Clone(attrs)...))
}

// StartLinked starts a span like Start, linked to each span whose W3C
// trace context is in traceparents (stored with a step by the transaction
// that planned it) unless that span is of ctx's own trace. Without a parent span in
// ctx, the span is the root of a trace of its own, sampled when the linked
// span was (see Setup's sampler).
func StartLinked(ctx context.Context, name string, traceparents []string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Active(ctx) {
		return ctx, noop.Span{}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(slices.Clone(attrs)...)}
	own := trace.SpanContextFromContext(ctx).TraceID()
	for _, tp := range traceparents {
		if sc, ok := ParseTraceparent(tp); ok && sc.TraceID() != own {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{linkPlannedBy}}))
		}
	}
	return receiver.Start(ctx, name, opts...)
}

// Active reports whether a span started in ctx would record: tracing is on
// and ctx's span, if any, belongs to a sampled trace.
func Active(ctx context.Context) bool {
	if !enabled.Load() {
		return false
	}
	sc := trace.SpanContextFromContext(ctx)
	return !sc.IsValid() || sc.IsSampled()
}

// Annotate sets attrs on ctx's span (the request's, otelhttp's) when it
// records.
func Annotate(ctx context.Context, attrs ...attribute.KeyValue) {
	if !enabled.Load() {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(slices.Clone(attrs)...)
	}
}

// linkPlannedBy marks the link from a step's span to the span of the
// transaction that planned the step.
var linkPlannedBy = attribute.String("webhook.link", "planned_by")

// Failed marks span as failed with a description from a closed set (a
// reason, an error class), never an error's text: errors quote SMTP
// replies and API answers, which may carry an address.
func Failed(span trace.Span, class string) {
	if !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, class)
	span.SetAttributes(semconv.ErrorTypeKey.String(class))
}

// ErrorClass is a low-cardinality name for err: "timeout", "canceled", or
// the Go type of the innermost error of its chain ("*fulfillment.StatusError",
// "*net.OpError").
func ErrorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return reflect.TypeOf(err).String()
		}
		err = next
	}
}

// Traceparent is the W3C traceparent of ctx's span ("00-<trace id>-<span
// id>-<flags>"), or "" when ctx has none (tracing is off).
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	tid, sid := sc.TraceID(), sc.SpanID()
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(sc.TraceFlags())})
	return string(b)
}

// ParseTraceparent reads a W3C traceparent as Traceparent writes it.
func ParseTraceparent(s string) (trace.SpanContext, bool) {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err1 := trace.TraceIDFromHex(s[3:35])
	sid, err2 := trace.SpanIDFromHex(s[36:52])
	var flags [1]byte
	_, err3 := hex.Decode(flags[:], []byte(s[53:55]))
	if err1 != nil || err2 != nil || err3 != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}
