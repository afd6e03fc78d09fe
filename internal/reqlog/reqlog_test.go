package reqlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/telemetry"
	"github.com/paywebhooks/receiver/internal/telemetry/telemetrytest"
)

// TestTraceIDs: a record logged inside a span carries the span's trace and
// span ids beside the context's attributes; one logged outside any span
// carries neither.
func TestTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(&buf, nil)))
	line := func() map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		buf.Reset()
		return m
	}

	ctx := reqlog.With(context.Background(), "source", "stripe")
	log.InfoContext(ctx, "delivery")
	if m := line(); m["source"] != "stripe" || m["trace_id"] != nil || m["span_id"] != nil {
		t.Errorf("outside a span: %v, want source and no ids", m)
	}

	telemetrytest.Install(t)
	sctx, span := telemetry.Start(ctx, "webhook.process", trace.SpanKindInternal)
	log.InfoContext(sctx, "delivery")
	span.End()
	sc := span.SpanContext()
	if m := line(); m["source"] != "stripe" || m["trace_id"] != sc.TraceID().String() || m["span_id"] != sc.SpanID().String() {
		t.Errorf("inside a span: %v, want source, trace_id %s, span_id %s", m, sc.TraceID(), sc.SpanID())
	}
}
