package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/paywebhooks/receiver/internal/telemetry"
	"github.com/paywebhooks/receiver/internal/telemetry/telemetrytest"
)

// TestRead: what turns tracing on, what leaves it off, what is refused.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		on       bool
		endpoint string
		err      bool
	}{
		{name: "Unset", env: nil},
		{name: "Endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318/"},
			on: true, endpoint: "http://jaeger:4318/v1/traces"},
		{name: "TracesEndpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://otel.example/api/traces"},
			on: true, endpoint: "https://otel.example/api/traces"},
		{name: "ExporterOTLPAlone", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			on: true, endpoint: "http://localhost:4318/v1/traces"},
		{name: "CredentialsNotShown", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:secret@otel.example"},
			on: true, endpoint: "https://otel.example/v1/traces"},
		{name: "ExporterNone", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}},
		{name: "SDKDisabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}},
		{name: "SDKDisabledWinsOverErrors", env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_SAMPLER": "xray"}},
		{name: "HTTPProtobuf", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			on: true, endpoint: "http://c:4318/v1/traces"},
		{name: "GRPC", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
			on: true, endpoint: "http://c:4317"},
		{name: "GRPCDefaultEndpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_TRACES_EXPORTER": "otlp"},
			on: true, endpoint: "localhost:4317"},
		{name: "Console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, on: true, endpoint: "stdout"},
		{name: "ConsoleWinsOverEndpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "Console", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			on: true, endpoint: "stdout"},
		{name: "ErrProtocol", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, err: true},
		{name: "ErrExporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{name: "ErrSampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: true},
		{name: "ErrSamplerArg", env: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := telemetry.Read(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error: %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if s.On != tc.on || s.Endpoint != tc.endpoint {
				t.Errorf("on %v endpoint %q (%s), want on %v endpoint %q", s.On, s.Endpoint, s.Why, tc.on, tc.endpoint)
			}
		})
	}
}

// TestSampler: OTEL_TRACES_SAMPLER as the specification reads it, and a
// root linked to a sampled span is sampled whatever the ratio.
func TestSampler(t *testing.T) {
	s, err := telemetry.Read(func(k string) string {
		return map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Sampler.Description(), "LinkedSampled{ParentBased{root:TraceIDRatioBased{0}"; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("sampler %s, want %s…", got, want)
	}
	sampled, _ := telemetry.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	dropped, _ := telemetry.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319d-b7ad6b7169203331-00")
	tid := trace.TraceID{1}
	for _, tc := range []struct {
		name  string
		links []trace.Link
		want  sdktrace.SamplingDecision
	}{
		{"Root", nil, sdktrace.Drop},
		{"LinkedToSampled", []trace.Link{{SpanContext: dropped}, {SpanContext: sampled}}, sdktrace.RecordAndSample},
		{"LinkedToDropped", []trace.Link{{SpanContext: dropped}}, sdktrace.Drop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tid,
				Name: "webhook.step fulfillment", Links: tc.links})
			if got.Decision != tc.want {
				t.Errorf("decision %v, want %v", got.Decision, tc.want)
			}
		})
	}
}

// TestTraceparent: what a step stores reads back as the same span context.
func TestTraceparent(t *testing.T) {
	rec := telemetrytest.Install(t)
	ctx, span := telemetry.Start(context.Background(), "webhook.transaction", trace.SpanKindInternal)
	tp := telemetry.Traceparent(ctx)
	span.End()
	sc, ok := telemetry.ParseTraceparent(tp)
	if !ok || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsSampled() {
		t.Fatalf("traceparent %q read back as %v (ok %v), want the span's %v", tp, sc, ok, span.SpanContext())
	}
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans recorded, want 1", n)
	}
	for _, bad := range []string{"", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-zz"} {
		if _, ok := telemetry.ParseTraceparent(bad); ok {
			t.Errorf("ParseTraceparent(%q) ok, want refused", bad)
		}
	}
	if got := telemetry.Traceparent(context.Background()); got != "" {
		t.Errorf("Traceparent without a span = %q, want empty", got)
	}
}

// TestOffCostsNothing: with tracing off, the instrumentation points start
// nothing, record nothing and allocate nothing.
func TestOffCostsNothing(t *testing.T) {
	if telemetry.Enabled() {
		t.Fatal("tracing on before any test turned it on")
	}
	ctx := context.Background()
	id := "evt_1NbKYpLkdIwHu7ix1234abcd"
	allocs := testing.AllocsPerRun(1000, func() {
		sctx, span := telemetry.Start(ctx, "webhook.process", trace.SpanKindInternal,
			telemetry.AttrSource.String("stripe"), telemetry.AttrEventID.String(id), telemetry.AttrEventType.String("checkout.session.completed"))
		telemetry.Annotate(sctx, telemetry.AttrOutcome.String("processed"), attribute.Int("n", 2))
		_ = telemetry.Traceparent(sctx)
		lctx, step := telemetry.StartLinked(sctx, "webhook.step", []string{""}, telemetry.AttrStep.String("fulfillment"))
		telemetry.Failed(step, "timeout")
		step.End()
		span.End()
		if lctx != ctx {
			t.Fatal("a span was started")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per delivery's worth of instrumentation with tracing off, want 0", allocs)
	}
}

// exportTwoSpans sets tracing up from the environment, records two spans
// and shuts tracing down.
func exportTwoSpans(t *testing.T) {
	t.Helper()
	_, shutdown, err := telemetry.Setup(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !telemetry.Enabled() {
		t.Fatal("tracing off with an OTLP endpoint set")
	}
	ctx, span := telemetry.Start(context.Background(), "webhook.process", trace.SpanKindInternal, telemetry.AttrSource.String("stripe"))
	_, child := telemetry.Start(ctx, "webhook.transaction", trace.SpanKindInternal)
	child.End()
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if telemetry.Enabled() {
		t.Error("tracing still on after shutdown")
	}
}

// traceService is an OTLP/gRPC collector.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (s *traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.names = append(s.names, sp.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestSetup: configured by the environment, Setup exports spans with OTLP
// over HTTP or gRPC; its shutdown flushes them and turns tracing off again.
func TestSetup(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Run("Off", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
		t.Setenv("OTEL_TRACES_EXPORTER", "")
		_, shutdown, err := telemetry.Setup(context.Background(), log)
		if err != nil {
			t.Fatal(err)
		}
		if telemetry.Enabled() {
			t.Error("tracing on with nothing configured")
		}
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	t.Run("OTLPOverHTTP", func(t *testing.T) {
		c := telemetrytest.NewCollector(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL())
		t.Setenv("OTEL_SERVICE_NAME", "receiver-under-test")
		exportTwoSpans(t)
		var got []string
		for _, s := range c.Spans() {
			got = append(got, s.Name)
		}
		if diff := cmp.Diff([]string{"webhook.transaction", "webhook.process"}, got); diff != "" {
			t.Errorf("spans exported (-want +got):\n%s", diff)
		}
	})
	t.Run("OTLPOverGRPC", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, svc := grpc.NewServer(), &traceService{}
		coltracepb.RegisterTraceServiceServer(srv, svc)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
		exportTwoSpans(t)
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if diff := cmp.Diff([]string{"webhook.transaction", "webhook.process"}, svc.names); diff != "" {
			t.Errorf("spans exported (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkOff is the instrumentation of one delivery (its spans, their
// attributes, the stored trace context) with tracing off.
func BenchmarkOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		telemetry.Annotate(ctx, telemetry.AttrSource.String("stripe"))
		_, verify := telemetry.Start(ctx, "webhook.verify", trace.SpanKindInternal, telemetry.AttrSource.String("stripe"))
		verify.End()
		telemetry.Annotate(ctx, telemetry.AttrEventID.String("evt_1"), telemetry.AttrEventType.String("checkout.session.completed"))
		pctx, process := telemetry.Start(ctx, "webhook.process", trace.SpanKindInternal, telemetry.AttrSource.String("stripe"),
			telemetry.AttrEventID.String("evt_1"), telemetry.AttrEventKey.String("evt_1"))
		tctx, tx := telemetry.Start(pctx, "webhook.transaction", trace.SpanKindInternal)
		_ = telemetry.Traceparent(tctx)
		tx.End()
		for range 2 {
			_ = telemetry.Active(pctx)
			_, smtp := telemetry.Start(pctx, "smtp.send", trace.SpanKindClient)
			smtp.End()
		}
		process.End()
		telemetry.Annotate(ctx, telemetry.AttrOutcome.String("processed"))
	}
}
