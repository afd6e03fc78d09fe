package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func tables(t *testing.T, url string) map[string]bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// TestMigrationsUpDownUp: the schema goes up, all the way down, and up
// again, and the version follows.
func TestMigrationsUpDownUp(t *testing.T) {
	url := pgtest.NewDB(t) // cloned from a migrated template
	latest, err := db.LatestVersion()
	if err != nil || latest < 2 {
		t.Fatalf("latest version %d, %v", latest, err)
	}
	check := func(wantVersion uint, wantTables ...string) {
		t.Helper()
		v, dirty, err := db.Version(url)
		if err != nil || dirty || v != wantVersion {
			t.Fatalf("version %d dirty %v err %v, want %d", v, dirty, err, wantVersion)
		}
		have := tables(t, url)
		for _, name := range wantTables {
			if !have[name] {
				t.Errorf("table %s missing at version %d (have %v)", name, wantVersion, have)
			}
		}
	}
	check(latest, "processed_events", "webhook_events", "orders", "invoices")
	if err := db.MigrateDown(url, int(latest)-1); err != nil {
		t.Fatal(err)
	}
	check(1, "processed_events")
	if have := tables(t, url); have["orders"] {
		t.Errorf("orders survived migrating down to 1")
	}
	if err := db.MigrateDown(url, 1); err != nil {
		t.Fatal(err)
	}
	if have := tables(t, url); have["processed_events"] {
		t.Errorf("processed_events survived migrating all the way down")
	}
	if err := db.Migrate(url); err != nil {
		t.Fatal(err)
	}
	check(latest, "processed_events", "webhook_events", "orders", "invoices")
	if err := db.Migrate(url); err != nil {
		t.Fatalf("migrating an up-to-date schema: %v", err)
	}
	if err := db.MigrateDown(url, 0); err == nil {
		t.Error("migrate down 0 was accepted")
	}
}

// TestProcessedEventsAsContracted: the first migration creates
// processed_events exactly as the contract gives it.
func TestProcessedEventsAsContracted(t *testing.T) {
	url := pgtest.NewDB(t)
	if err := db.MigrateDown(url, 1); err != nil { // down to version 1
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `
SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
FROM information_schema.columns WHERE table_name = 'processed_events' ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"event_key text NO ",
		"source text NO ",
		"status text NO ",
		"claimed_at timestamp with time zone NO now()",
		"completed_at timestamp with time zone YES ",
	}
	if len(cols) != len(want) {
		t.Fatalf("columns = %q, want %q", cols, want)
	}
	for i := range want {
		if cols[i] != want[i] {
			t.Errorf("column %d = %q, want %q", i, cols[i], want[i])
		}
	}
}
