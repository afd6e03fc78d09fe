// Package snippetdb is the copied snippet's schema (schema.sql): the two
// tables a user who copies the dedupe snippet creates, processed_events
// keyed by the event and invoices unique by Stripe's id, without the
// receiver's columns and indexes. Both snippets (bench/snippet-nethttp,
// bench/snippet) create it when they start, and the benchmark gives it to
// pgbench's copies of the snippet's SQL; a database migrated like the
// receiver's keeps its own tables (the benchmark's "receiver's schema"
// rows).
package snippetdb

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5/pgconn"
)

// Schema is schema.sql.
//
//go:embed schema.sql
var Schema string

// Execer runs SQL: a pgx pool, connection or transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Create creates the tables that are not there yet.
func Create(ctx context.Context, db Execer) error {
	_, err := db.Exec(ctx, Schema)
	return err
}
