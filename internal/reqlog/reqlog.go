// Package reqlog carries a request's structured logger in its context, so
// that every line logged while serving a request carries the request id, and
// the fields a handler adds (source, event id, event type) as it learns them.
package reqlog

import (
	"context"
	"log/slog"
)

type ctxKey struct{}

// With returns ctx carrying logger.
func With(ctx context.Context, logger *slog.Logger) context.Context {
	return context.WithValue(ctx, ctxKey{}, logger)
}

// From returns the logger in ctx, or slog.Default.
func From(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(ctxKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// Add returns ctx whose logger carries the extra attributes.
func Add(ctx context.Context, args ...any) context.Context {
	return With(ctx, From(ctx).With(args...))
}
