package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WaitForLockWaits waits until n backends of pool's database wait for a
// heavyweight lock (another transaction's row, say), polling on a
// connection of its own (the pool's may all be in the test's
// transactions), and fails the test after a minute.
func WaitForLockWaits(tb testing.TB, pool *pgxpool.Pool, n int) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting int
		if err := conn.QueryRow(ctx, `
SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			tb.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d backends waited for a lock, not %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
