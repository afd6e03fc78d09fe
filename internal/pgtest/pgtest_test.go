package pgtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestNewDBGivesIsolatedMigratedDatabases(t *testing.T) {
	t.Parallel()
	a, b := pgtest.NewDB(t), pgtest.NewDB(t)
	if a == b {
		t.Fatalf("NewDB returned %s twice", a)
	}
	for _, u := range []string{a, b} {
		if !hasTable(t, u, "processed_events") {
			t.Errorf("%s has no processed_events table", u)
		}
	}

	mustExec(t, a, `INSERT INTO processed_events (event_key, source, status) VALUES ('evt_1', 'stripe', 'done')`)
	mustExec(t, a, `CREATE TABLE only_in_a (id int)`)
	if n := count(t, b, "SELECT count(*) FROM processed_events"); n != 0 {
		t.Errorf("b sees %d rows written to a", n)
	}
	if hasTable(t, b, "only_in_a") {
		t.Error("b sees a table created in a")
	}
}

func TestNewDBParallel(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			if !hasTable(t, pgtest.NewDB(t), "processed_events") {
				t.Error("no processed_events table")
			}
		})
	}
}

func TestNewDBDropsDatabaseAfterTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("create", func(t *testing.T) {
		conn := connect(t, pgtest.NewDB(t))
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	n := count(t, pgtest.AdminURL(t), fmt.Sprintf("SELECT count(*) FROM pg_database WHERE datname = '%s'", name))
	if n != 0 {
		t.Errorf("database %s still exists after its test", name)
	}
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM processed_events").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("new database has %d processed events", n)
	}
}

func hasTable(t *testing.T, url, table string) bool {
	t.Helper()
	return count(t, url, fmt.Sprintf("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = '%s'", table)) == 1
}

func count(t *testing.T, url, sql string) int {
	t.Helper()
	var n int
	if err := connect(t, url).QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func mustExec(t *testing.T, url, sql string) {
	t.Helper()
	if _, err := connect(t, url).Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// connect opens a connection closed when the test ends, before the
// database made by NewDB is dropped.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
