package db_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pgbouncer"
	"github.com/paywebhooks/receiver/internal/pgtest"
)

// TestPoolerExecModes runs the receiver's kind of work through PgBouncer in
// transaction mode, with two server connections for eight clients, in each
// statement mode: a pipelined batch that sets a transaction-local setting
// and reads it back (one transaction, on one server connection) and a
// parameterised query, many times over. The modes PoolerURL accepts never
// fail; the one it refuses by default (pgx's own, cache_statement) does,
// with the very errors a transaction pooler gives named statements.
func TestPoolerExecModes(t *testing.T) {
	if _, err := pgbouncer.Find(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	direct := pgtest.NewDB(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgbouncer.Start(ctx, pgbouncer.Options{Upstream: direct, PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	plain := b.PlainURL(strings.TrimPrefix(u.Path, "/"))

	work := func(mode string) error {
		connURL := plain
		if mode != "" {
			connURL += "&" + db.ExecModeParam + "=" + mode
		}
		u, err := db.PoolerURL(connURL)
		if err != nil {
			u = connURL // the refused mode, tried all the same
		}
		pool, err := db.Open(ctx, u, 8)
		if err != nil {
			return err
		}
		defer pool.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := range 25 {
					want := fmt.Sprintf("w%d-%d", w, i)
					var got string
					br := pool.SendBatch(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{
						{SQL: `SELECT set_config('receiver.test', $1, true)`, Arguments: []any{want}},
						{SQL: `SELECT current_setting('receiver.test', true)`},
					}})
					err := br.QueryRow().Scan(new(string))
					if err == nil {
						err = br.QueryRow().Scan(&got)
					}
					if cerr := br.Close(); err == nil {
						err = cerr
					}
					if err == nil && got != want {
						err = fmt.Errorf("a batch is not one transaction: read %q, want %q", got, want)
					}
					var n int
					if err == nil {
						err = pool.QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE source = $1`, want).Scan(&n)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}

	for _, mode := range []string{"", "exec", "simple_protocol", "cache_describe"} {
		if err := work(mode); err != nil {
			t.Errorf("default_query_exec_mode=%q through the pooler: %v", mode, err)
		}
	}
	err = work("cache_statement")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "26000" && pgErr.Code != "42P05") {
		t.Errorf("cache_statement through the pooler: %v; want prepared statement … does not exist (26000) or already exists (42P05)", err)
	} else {
		t.Logf("cache_statement through the pooler, as expected: %v", err)
	}
}
