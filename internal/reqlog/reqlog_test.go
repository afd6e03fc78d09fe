package reqlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestUntrusted: a value from a request, logged through the text and the
// JSON handler, is quoted once (a plain path not at all), on one line
// whatever it holds, with its unprintable characters escaped and an escape
// it holds told apart from one of ours, and cut to its bound.
func TestUntrusted(t *testing.T) {
	long := "/" + strings.Repeat("a", 9999)
	for _, c := range []struct {
		in, text, value string // the text handler's path=…, and the value as JSON decodes it
	}{
		{"/webhooks/Stripe", `path=/webhooks/Stripe`, `/webhooks/Stripe`},
		{"/a b", `path="/a b"`, `/a b`},
		{"/a\"b", `path="/a\"b"`, `/a"b`},
		{"/x\n time=forged level=ERROR", `path="/x\\n time=forged level=ERROR"`, `/x\n time=forged level=ERROR`},
		{`/x\n`, `path=/x\\n`, `/x\\n`}, // a backslash and n, not a newline
		{"/\r\x00\x7f", `path=/\r\x00\x7f`, `/\r\x00\x7f`},
		{"/\u202egnp.exe\u2028", `path=/\u202egnp.exe\u2028`, `/\u202egnp.exe\u2028`},
		{"/\xff\xfe", `path=/\xff\xfe`, `/\xff\xfe`},
		{"/café", `path=/café`, `/café`},
		{long, `path="/` + strings.Repeat("a", 199) + `… (10000 bytes)"`, "/" + strings.Repeat("a", 199) + "… (10000 bytes)"},
	} {
		var text, js bytes.Buffer
		for _, h := range []slog.Handler{slog.NewTextHandler(&text, nil), slog.NewJSONHandler(&js, nil)} {
			slog.New(reqlog.NewHandler(h)).InfoContext(context.Background(), "request", "path", reqlog.Untrusted(c.in, 200), "status", 404)
		}
		if n := strings.Count(text.String(), "\n"); n != 1 || !strings.Contains(text.String(), " "+c.text+" status=404\n") {
			t.Errorf("%q: the text handler wrote %q (%d lines), want one line with %s", c.in, text.String(), n, c.text)
		}
		var m map[string]any
		if err := json.Unmarshal(js.Bytes(), &m); err != nil || strings.Count(js.String(), "\n") != 1 || m["path"] != c.value {
			t.Errorf("%q: the JSON handler wrote %s (%v), want path %q", c.in, js.String(), err, c.value)
		}
	}

	// Cut at a character boundary, within the bound.
	for _, in := range []string{strings.Repeat("é", 300), strings.Repeat("\x01", 300), strings.Repeat("\u202e", 300)} {
		got := reqlog.Untrusted(in, 200)
		head, _, ok := strings.Cut(got, "…")
		if !ok || len(head) > 200 || !utf8.ValidString(got) || !strings.HasSuffix(got, "… ("+fmt.Sprint(len(in))+" bytes)") {
			t.Errorf("Untrusted(%q…, 200) = %q: want at most 200 bytes of it, cut at a character, then its length", in[:6], got)
		}
	}
}
