package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL counts a backend's WAL flushes (pg_stat_wal's wal_sync) and
// commits (pg_stat_database's xact_commit) in the backend and adds them to
// the shared counters at most once a second, or when it exits: read while
// a server's pool is connected, they would lag by a second or more, and
// land in whichever slot came later. So they are read only with the
// database's backends gone, before a server starts and after it stopped:
// the cost windows (each starts its server afresh) and pgbench's windows
// (whose connections end with it).

// flushCounts are the cluster's WAL flushes and one database's commits.
type flushCounts struct {
	flushes, commits int64
	ok               bool
}

// groupCommit is what one window measured: deliveries (or pgbench's
// transactions), the database's commits and the cluster's WAL flushes.
type groupCommit struct {
	side                         string
	deliveries, commits, flushes int64
}

func (g groupCommit) perCommit() float64 {
	if g.commits == 0 {
		return 0
	}
	return float64(g.flushes) / float64(g.commits)
}

// quietCounts waits until no client backend is connected to dbname, then
// reads the counters until two reads 100 ms apart agree (an exiting
// backend leaves pg_stat_activity before it adds its counts).
func (b *bench) quietCounts(ctx context.Context, dbname string) flushCounts {
	cfg, err := pgx.ParseConfig(b.url(dbname))
	if err != nil {
		return flushCounts{}
	}
	dbname = cfg.Database
	conn, err := pgx.Connect(ctx, b.url("postgres"))
	if err != nil {
		return flushCounts{}
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, dbname).Scan(&n); err != nil {
			return flushCounts{}
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			logf("  %d backends still connected to %s: no flush counts", n, dbname)
			return flushCounts{}
		}
		select {
		case <-ctx.Done():
			return flushCounts{}
		case <-time.After(20 * time.Millisecond):
		}
	}
	read := func() (flushCounts, error) {
		var c flushCounts
		err := conn.QueryRow(ctx, `
SELECT (SELECT wal_sync FROM pg_stat_wal), (SELECT xact_commit FROM pg_stat_database WHERE datname = $1)`, dbname).Scan(&c.flushes, &c.commits)
		c.ok = err == nil
		return c, err
	}
	prev, err := read()
	for i := 0; err == nil && i < 20; i++ {
		time.Sleep(100 * time.Millisecond)
		var cur flushCounts
		if cur, err = read(); err == nil && cur == prev {
			return cur
		}
		prev = cur
	}
	return prev
}

// flushSpan is what happened between two quiet readings.
func flushSpan(side string, deliveries int, a, b flushCounts) (groupCommit, bool) {
	if !a.ok || !b.ok || b.commits < a.commits || b.flushes < a.flushes {
		return groupCommit{}, false
	}
	return groupCommit{side: side, deliveries: int64(deliveries), commits: b.commits - a.commits, flushes: b.flushes - a.flushes}, true
}

// pgbenchFlushes runs script on dbname for the cost windows' time with
// the database otherwise idle, and counts its flushes per commit.
func (b *bench) pgbenchFlushes(ctx context.Context, side, dbname string, run func(context.Context) (sample, error)) (groupCommit, error) {
	before := b.quietCounts(ctx, dbname)
	s, err := run(ctx)
	if err != nil {
		return groupCommit{}, err
	}
	g, ok := flushSpan(side, s.n, before, b.quietCounts(ctx, dbname))
	if !ok {
		return groupCommit{}, fmt.Errorf("%s: no flush counts", side)
	}
	return g, nil
}
