// Package telemetrytest holds what tests of the tracing need: an in-memory
// recorder installed as the global tracer provider, a tiny OTLP/HTTP
// collector for the exporter to send to, and renderings of a recorded
// trace (an indented tree with durations, an SVG timeline).
//
//	rec := telemetrytest.Install(t) // before the receiver is built
//	... // a delivery
//	root := rec.Wait(t, telemetrytest.Named("POST /webhooks/stripe"))
//	t.Log(telemetrytest.Tree(rec.Trace(root.SpanContext().TraceID())))
package telemetrytest

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/telemetry"
)

// Recorder records every span in memory.
type Recorder struct {
	*tracetest.SpanRecorder
}

// Install turns tracing on with an in-memory recorder that samples every
// trace, as the global provider, until the test ends. Tests that install
// one must not run in parallel with other tests of their package.
func Install(tb testing.TB) *Recorder {
	tb.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr),
		sdktrace.WithSampler(telemetry.LinkedSampler(sdktrace.ParentBased(sdktrace.AlwaysSample()))),
		sdktrace.WithRawSpanLimits(telemetry.SpanLimits(os.Getenv)))
	restore := telemetry.Install(tp)
	tb.Cleanup(func() {
		restore()
		_ = tp.Shutdown(context.Background())
	})
	return &Recorder{SpanRecorder: sr}
}

// Named matches spans by name.
func Named(name string) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool { return s.Name() == name }
}

// Wait returns the first ended span that match accepts, waiting up to 10
// s for it (a server span ends after its response is sent; the redriver
// runs in the background), and fails the test if none comes.
func (r *Recorder) Wait(tb testing.TB, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range r.Ended() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("telemetrytest: no such span ended within 10s; ended: %s", names(r.Ended()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Trace returns the ended spans of one trace.
func (r *Recorder) Trace(id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.Ended() {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

func names(spans []sdktrace.ReadOnlySpan) string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name())
	}
	return strings.Join(n, ", ")
}

// node is a span and its children, in the order they started.
type node struct {
	span     sdktrace.ReadOnlySpan
	children []*node
}

// forest arranges spans by parent: the roots are the spans whose parent is
// not among them.
func forest(spans []sdktrace.ReadOnlySpan) []*node {
	byID := map[trace.SpanID]*node{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = &node{span: s}
	}
	var roots []*node
	for _, s := range spans {
		n := byID[s.SpanContext().SpanID()]
		if p, ok := byID[s.Parent().SpanID()]; ok && s.Parent().IsValid() {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	var sortTree func([]*node)
	sortTree = func(ns []*node) {
		slices.SortStableFunc(ns, func(a, b *node) int {
			return cmp.Or(a.span.StartTime().Compare(b.span.StartTime()), strings.Compare(a.span.Name(), b.span.Name()))
		})
		for _, n := range ns {
			sortTree(n.children)
		}
	}
	sortTree(roots)
	return roots
}

// walk visits the tree depth first.
func walk(ns []*node, depth int, f func(n *node, depth int)) {
	for _, n := range ns {
		f(n, depth)
		walk(n.children, depth+1, f)
	}
}

// Tree renders spans (one trace) as an indented tree, each span with its
// duration and its start after the root's, children in the order they
// started.
func Tree(spans []sdktrace.ReadOnlySpan) string {
	roots := forest(spans)
	if len(roots) == 0 {
		return ""
	}
	t0 := roots[0].span.StartTime()
	var b strings.Builder
	walk(roots, 0, func(n *node, depth int) {
		name := strings.Repeat("  ", depth) + n.span.Name()
		fmt.Fprintf(&b, "%-52s %9s  +%s\n", name, ms(n.span.EndTime().Sub(n.span.StartTime())), ms(n.span.StartTime().Sub(t0)))
	})
	return b.String()
}

// Shape renders the names of the spans keep accepts as an indented tree,
// siblings in name order: what a test compares, free of timings and of
// the order in which concurrent steps started. A span that keep refuses
// is left out with everything under it.
func Shape(spans []sdktrace.ReadOnlySpan, keep func(sdktrace.ReadOnlySpan) bool) string {
	roots := forest(spans)
	var b strings.Builder
	var rec func(ns []*node, depth int)
	rec = func(ns []*node, depth int) {
		ns = slices.Clone(ns)
		slices.SortStableFunc(ns, func(a, b *node) int { return strings.Compare(a.span.Name(), b.span.Name()) })
		for _, n := range ns {
			if !keep(n.span) {
				continue
			}
			b.WriteString(strings.Repeat("  ", depth) + n.span.Name() + "\n")
			rec(n.children, depth+1)
		}
	}
	rec(roots, 0)
	return b.String()
}

// Scope matches spans of the given instrumentation scopes.
func Scope(names ...string) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool { return slices.Contains(names, s.InstrumentationScope().Name) }
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}
