package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of the receiver's traces unless
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says
// otherwise.
const ServiceName = "paywebhooks-receiver"

// Settings are what Setup read from the environment.
type Settings struct {
	On       bool   // tracing is configured
	Why      string // why it is on or off, for the start-up log
	Protocol string // http/protobuf (the default), http/json or grpc; "" for the console
	Endpoint string // where spans go, without credentials ("stdout" for the console)
	Console  bool   // OTEL_TRACES_EXPORTER=console: spans written to stdout as JSON lines
	Sampler  sdktrace.Sampler
}

// Read decides from the environment whether tracing is on, and checks what
// the receiver itself interprets. Tracing is on when
//
//   - OTEL_SDK_DISABLED is not "true", and
//   - OTEL_TRACES_EXPORTER is "console" (spans are written to standard
//     output, one JSON object a line: for development), or
//   - OTEL_TRACES_EXPORTER is unset or "otlp" (it may be "none": off), and
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is
//     set, or OTEL_TRACES_EXPORTER is "otlp" (then the specification's
//     default, http://localhost:4318, or localhost:4317 for gRPC).
//
// The protocol (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL)
// is http/protobuf, the specification's default, http/json or grpc.
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG take the specification's
// samplers except jaeger_remote and xray. Any other value of these
// variables is an error, reported at start-up.
func Read(getenv func(string) string) (Settings, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return Settings{Why: "OTEL_SDK_DISABLED=true"}, nil
	}
	var errs []error
	exporter := strings.ToLower(get("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "", "otlp", "console":
	case "none":
		return Settings{Why: "OTEL_TRACES_EXPORTER=none"}, nil
	default:
		errs = append(errs, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: the receiver exports traces with otlp, console (or none)", exporter))
	}
	protocol := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "":
		protocol = "http/protobuf"
	case "http/protobuf", "http/json", "grpc":
	default:
		errs = append(errs, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: one of http/protobuf (the default), http/json, grpc", protocol))
	}
	sampler, err := samplerFromEnv(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, err
	}

	if exporter == "console" {
		return Settings{On: true, Why: "OTEL_TRACES_EXPORTER=console", Endpoint: "stdout", Console: true, Sampler: sampler}, nil
	}
	s := Settings{Protocol: protocol, Sampler: sampler}
	grpc := protocol == "grpc"
	switch traces, base := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), get("OTEL_EXPORTER_OTLP_ENDPOINT"); {
	case traces != "":
		s.On, s.Why, s.Endpoint = true, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set", traces
	case base != "" && grpc:
		s.On, s.Why, s.Endpoint = true, "OTEL_EXPORTER_OTLP_ENDPOINT is set", base
	case base != "":
		s.On, s.Why, s.Endpoint = true, "OTEL_EXPORTER_OTLP_ENDPOINT is set", strings.TrimRight(base, "/")+"/v1/traces"
	case exporter == "otlp" && grpc:
		s.On, s.Why, s.Endpoint = true, "OTEL_TRACES_EXPORTER=otlp", "localhost:4317"
	case exporter == "otlp":
		s.On, s.Why, s.Endpoint = true, "OTEL_TRACES_EXPORTER=otlp", "http://localhost:4318/v1/traces"
	default:
		s.Why = "no OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT)"
	}
	s.Endpoint = withoutUserinfo(s.Endpoint)
	return s, nil
}

// Setup turns tracing on when the process environment configures it (see
// Read): spans are written to standard output as they end
// (OTEL_TRACES_EXPORTER=console), or batched and sent with OTLP, configured by the
// exporter's own OTEL_EXPORTER_OTLP_* variables (endpoint, headers,
// timeout, compression, certificates, insecure) and OTEL_BSP_*; the resource is
// service.name (OTEL_SERVICE_NAME, default ServiceName), the service's
// version, OTEL_RESOURCE_ATTRIBUTES, the host and the SDK. Export errors
// are logged to log.
//
// It returns the provider in force and a shutdown that flushes the spans
// still buffered and puts back the provider that was global before. When
// tracing is not configured, it installs nothing and returns the global
// provider as it is (a no-op unless a test installed a recorder) and a
// shutdown that does nothing.
func Setup(ctx context.Context, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	return setup(ctx, log, os.Getenv, os.Stdout)
}

// setup is Setup reading getenv, the console exporter writing to stdout.
func setup(ctx context.Context, log *slog.Logger, getenv func(string) string, stdout io.Writer) (trace.TracerProvider, func(context.Context) error, error) {
	s, err := Read(getenv)
	if err != nil {
		return nil, nil, err
	}
	if !s.On {
		log.Debug("tracing off", "why", s.Why)
		return otel.GetTracerProvider(), func(context.Context) error { return nil }, nil
	}
	var exp sdktrace.SpanExporter
	switch {
	case s.Console:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(stdout))
	case s.Protocol == "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("trace exporter: %w", err)
	}
	// The console's reader is a person waiting for the span: each is
	// written as it ends, not with a batch seconds later.
	processor := sdktrace.WithBatcher(exp)
	if s.Console {
		processor = sdktrace.WithSyncer(exp)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version())),
		resource.WithFromEnv(), resource.WithHost(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(processor, sdktrace.WithResource(res),
		sdktrace.WithSampler(s.Sampler), sdktrace.WithRawSpanLimits(SpanLimits(getenv)))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "error", err) }))
	restore := Install(tp)
	log.Info("tracing on", "why", s.Why, "protocol", s.Protocol, "endpoint", s.Endpoint, "sampler", s.Sampler.Description())
	return tp, func(ctx context.Context) error {
		defer restore()
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("flush traces: %w", err)
		}
		return nil
	}, nil
}

// AttributeValueLimit is the length, in bytes, that every span attribute's
// value is cut to unless OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (or
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT) says otherwise: otelhttp records
// what a request says of itself (its User-Agent, its path), which nobody
// signed, and a span must not carry 8 KB of an attacker's header to the
// collector. 4 KiB keeps every value the receiver itself records whole
// (the longest, a statement's text, is under 2 KiB: TestSpanAttributesBounded
// says by how much).
const AttributeValueLimit = 4 << 10

// SpanLimits are the SDK's span limits from the environment (getenv), with
// the attribute values cut to AttributeValueLimit when the environment
// sets no length: what Setup installs, and telemetrytest too.
func SpanLimits(getenv func(string) string) sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	if getenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT") == "" && getenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT") == "" {
		l.AttributeValueLengthLimit = AttributeValueLimit
	}
	return l
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and its argument name
// (the SDK's own reading of them, which reports errors only to the global
// error handler), wrapped so that a root span linked to a sampled span is
// sampled too (see LinkedSampler).
func samplerFromEnv(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v < 0 || v > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: a ratio between 0 and 1", arg)
		}
		return v, nil
	}
	var base sdktrace.Sampler
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		base = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		base = sdktrace.ParentBased(sdktrace.NeverSample())
	case "always_on":
		base = sdktrace.AlwaysSample()
	case "always_off":
		base = sdktrace.NeverSample()
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		base = sdktrace.TraceIDRatioBased(r)
		if strings.HasPrefix(strings.ToLower(name), "parentbased_") {
			base = sdktrace.ParentBased(base)
		}
	default:
		return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: one of parentbased_always_on (the default), parentbased_always_off, "+
			"parentbased_traceidratio, always_on, always_off, traceidratio", name)
	}
	return LinkedSampler(base), nil
}

// LinkedSampler samples a root span that links to a sampled span, and
// leaves every other decision to base. A step finished later by the
// redriver or an operator is the root of a trace of its own, linked to the
// delivery that planned it: with it, that step's trace is kept whenever the
// delivery's was, whatever the ratio, so one event's story is whole.
func LinkedSampler(base sdktrace.Sampler) sdktrace.Sampler { return linkedSampler{base} }

type linkedSampler struct{ base sdktrace.Sampler }

func (s linkedSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !trace.SpanContextFromContext(p.ParentContext).IsValid() {
		for _, l := range p.Links {
			if l.SpanContext.IsSampled() {
				return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
			}
		}
	}
	return s.base.ShouldSample(p)
}

func (s linkedSampler) Description() string { return "LinkedSampled{" + s.base.Description() + "}" }

// version is the module version the binary was built from, or "devel".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func withoutUserinfo(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.User == nil {
		return endpoint
	}
	u.User = nil
	return u.String()
}
