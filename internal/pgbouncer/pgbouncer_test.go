package pgbouncer_test

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/pgbouncer"
	"github.com/paywebhooks/receiver/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// start starts a PgBouncer in front of a fresh test database and returns it
// with the database's name.
func start(t *testing.T) (*pgbouncer.Bouncer, string) {
	t.Helper()
	if _, err := pgbouncer.Find(); err != nil {
		t.Skip(err)
	}
	dbURL := pgtest.NewDB(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	b, err := pgbouncer.Start(context.Background(), pgbouncer.Options{Upstream: dbURL, PoolSize: 2, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("pgbouncer's log:\n%s", log.String())
		}
	})
	return b, strings.TrimPrefix(u.Path, "/")
}

func TestStart(t *testing.T) {
	ctx := context.Background()
	b, dbname := start(t)

	t.Run("ReachesTheDatabase", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, b.URL(dbname))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		// A migrated test database: the receiver's tables are there.
		var db string
		var tables int
		err = conn.QueryRow(ctx, `SELECT current_database(), (SELECT count(*) FROM pg_tables WHERE tablename = 'processed_events')`).Scan(&db, &tables)
		if err != nil {
			t.Fatal(err)
		}
		if db != dbname || tables != 1 {
			t.Errorf("through the pooler: database %q with %d processed_events tables, want %q and 1", db, tables, dbname)
		}
		// A pipelined batch, as the receiver sends a new event's
		// transaction, in the exec mode URL names.
		br := conn.SendBatch(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{
			{SQL: `SELECT set_config('bench.x', $1, true)`, Arguments: []any{"yes"}},
			{SQL: `SELECT current_setting('bench.x', true)`},
		}})
		var set, got string
		if err := br.QueryRow().Scan(&set); err != nil {
			t.Fatal(err)
		}
		if err := br.QueryRow().Scan(&got); err != nil {
			t.Fatal(err)
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
		if got != "yes" {
			t.Errorf("a batch is not one transaction through the pooler: read %q, want yes", got)
		}
	})

	t.Run("TransactionMode", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(b.PlainURL("pgbouncer") + "&default_query_exec_mode=simple_protocol")
		if err != nil {
			t.Fatal(err)
		}
		admin, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		rows, err := admin.Query(ctx, "SHOW POOLS")
		if err != nil {
			t.Fatal(err)
		}
		modes := map[string]string{}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			var db, mode string
			for i, f := range rows.FieldDescriptions() {
				switch f.Name {
				case "database":
					db, _ = vals[i].(string)
				case "pool_mode":
					mode, _ = vals[i].(string)
				}
			}
			modes[db] = mode
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if modes[dbname] != "transaction" {
			t.Errorf("pool modes %v: want %s in transaction mode", modes, dbname)
		}
	})

	t.Run("Stop", func(t *testing.T) {
		b, _ := start(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port()))
		if err := b.Stop(); err != nil {
			t.Fatal(err)
		}
		if b.PID() != 0 {
			t.Error("PID after Stop")
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Stop", addr)
		}
		if err := b.Stop(); err != nil {
			t.Errorf("a second Stop: %v", err)
		}
	})
}
