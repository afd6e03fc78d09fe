package telemetry_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/telemetry"
)

// TestConsoleExporter: OTEL_TRACES_EXPORTER=console writes every span to
// standard output as it ends, one JSON object a line, with its name,
// parent and attributes, even when an OTLP endpoint is also set.
func TestConsoleExporter(t *testing.T) {
	env := map[string]string{
		"OTEL_TRACES_EXPORTER":        "console",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", // named, and not used
	}
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, shutdown, err := telemetry.SetupWith(context.Background(), log, func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !telemetry.Enabled() {
		t.Fatal("tracing off with OTEL_TRACES_EXPORTER=console")
	}
	ctx, span := telemetry.Start(context.Background(), "webhook.process", trace.SpanKindInternal, telemetry.AttrSource.String("stripe"))
	_, child := telemetry.Start(ctx, "webhook.transaction", trace.SpanKindInternal)
	child.End()
	span.End()
	// Written as they end, before the shutdown flushes anything.
	written := out.String()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if telemetry.Enabled() {
		t.Error("tracing still on after shutdown")
	}

	type spanJSON struct {
		Name        string
		SpanContext struct{ TraceID, SpanID string }
		Parent      struct{ SpanID string }
		Attributes  []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	var spans []spanJSON
	sc := bufio.NewScanner(bytes.NewReader([]byte(written)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s spanJSON
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("a line is not a JSON object: %v\n%s", err, sc.Bytes())
		}
		spans = append(spans, s)
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"webhook.transaction", "webhook.process"}, names); diff != "" {
		t.Fatalf("spans written before shutdown (-want +got):\n%s\noutput:\n%s", diff, written)
	}
	if spans[0].Parent.SpanID != spans[1].SpanContext.SpanID || spans[0].SpanContext.TraceID != spans[1].SpanContext.TraceID {
		t.Errorf("the child's parent is %s in trace %s, want %s in %s", spans[0].Parent.SpanID, spans[0].SpanContext.TraceID,
			spans[1].SpanContext.SpanID, spans[1].SpanContext.TraceID)
	}
	found := false
	for _, a := range spans[1].Attributes {
		found = found || (a.Key == "webhook.source" && a.Value.Value == "stripe")
	}
	if !found {
		t.Errorf("webhook.process has no webhook.source=stripe: %+v", spans[1].Attributes)
	}
}
