// Package reqlog carries log attributes in a context: a request's id, the
// source, event id and event type a handler learns, a step's key. Loggers
// are injected as usual; the Handler they are built on adds the attributes
// of the context a record is logged with (InfoContext and friends), when
// it is written and only then, so a request builds no logger of its own.
// While tracing is on, a record logged inside a span also carries its
// trace_id and span_id, to go from a log line to its trace and back.
package reqlog

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
)

type ctxKey struct{}

// attrs is a context's attributes: its own, then its parent's.
type attrs struct {
	parent *attrs
	list   []slog.Attr
}

// With returns ctx whose log records also carry args (key-value pairs or
// slog.Attr values, as slog.Logger.With takes them).
func With(ctx context.Context, args ...any) context.Context {
	if len(args) == 0 {
		return ctx
	}
	parent, _ := ctx.Value(ctxKey{}).(*attrs)
	r := slog.Record{}
	r.Add(args...)
	a := &attrs{parent: parent, list: make([]slog.Attr, 0, r.NumAttrs())}
	r.Attrs(func(at slog.Attr) bool { a.list = append(a.list, at); return true })
	return context.WithValue(ctx, ctxKey{}, a)
}

// Attrs returns the attributes ctx carries, oldest first.
func Attrs(ctx context.Context) []slog.Attr {
	a, _ := ctx.Value(ctxKey{}).(*attrs)
	var chain []*attrs
	for ; a != nil; a = a.parent {
		chain = append(chain, a)
	}
	var out []slog.Attr
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i].list...)
	}
	return out
}

// Handler adds the attributes of each record's context to the record, and
// the ids of the context's span when it has one.
type Handler struct{ slog.Handler }

// NewHandler wraps h.
func NewHandler(h slog.Handler) Handler { return Handler{h} }

// Handle implements slog.Handler.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	if a, _ := ctx.Value(ctxKey{}).(*attrs); a != nil {
		r.AddAttrs(Attrs(ctx)...)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h Handler) WithAttrs(as []slog.Attr) slog.Handler { return Handler{h.Handler.WithAttrs(as)} }

// WithGroup implements slog.Handler.
func (h Handler) WithGroup(name string) slog.Handler { return Handler{h.Handler.WithGroup(name)} }

// Untrusted returns s, a value that came from a request (a path, a header),
// as a log field's value: every character that is not printable (control
// characters, line and paragraph separators, bidirectional overrides,
// invalid UTF-8) escaped as Go writes it (\n, \x00, \u202e), a backslash
// doubled so that no escape can be forged, and cut at a character boundary
// to at most max bytes, then "…" and the length of s. It adds no quotes:
// the handler quotes a value that needs it (slog's text handler one with a
// space, a quote or an equals sign), so a plain value is written as it is
// and any other is quoted once.
func Untrusted(s string, max int) string {
	if len(s) <= max && printable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), max) + 24)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		esc := s[i : i+size]
		switch {
		case r == '\\':
			esc = `\\`
		case r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf(`\x%02x`, s[i])
		case !unicode.IsPrint(r):
			q := strconv.QuoteRuneToASCII(r) // '\u202e'
			esc = q[1 : len(q)-1]
		}
		if b.Len()+len(esc) > max {
			return b.String() + "… (" + strconv.Itoa(len(s)) + " bytes)"
		}
		b.WriteString(esc)
		i += size
	}
	return b.String()
}

// printable reports whether s is valid UTF-8 of printable characters
// (unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the
// ASCII space) without a backslash: what Untrusted leaves as it is.
func printable(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\\' || (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}
