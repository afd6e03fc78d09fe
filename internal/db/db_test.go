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
	check(latest, "processed_events", "orders", "invoices", "reconcile_runs")
	if have := tables(t, url); have["webhook_events"] {
		t.Errorf("webhook_events survived migration 3, which moves the bodies into the claims")
	}
	versions, err := db.Versions() // numbers may skip: down by steps
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MigrateDown(url, len(versions)-1); err != nil {
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
	check(latest, "processed_events", "orders", "invoices", "reconcile_runs")
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
	versions, err := db.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MigrateDown(url, len(versions)-1); err != nil { // down to version 1
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

// TestMigration3MovesBodiesIntoClaims: an event stored by the earlier
// schema (its claim in processed_events, its body in webhook_events, its
// steps' payloads in the old shape) keeps its body, its outcome and runnable
// steps across migration 3, and gets them back going down.
func TestMigration3MovesBodiesIntoClaims(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	versions, err := db.Versions() // numbers may skip: down by steps
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MigrateDown(url, len(versions)-2); err != nil { // down to version 2
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`
INSERT INTO processed_events (event_key, source, status, kind, completed_at) VALUES ('evt_old', 'stripe', 'done', 'event', now());
INSERT INTO webhook_events (event_key, source, event_id, event_type, api_version, body, outcome)
VALUES ('evt_old', 'stripe', 'evt_old', 'checkout.session.completed', '2023-10-16', '{"id":"evt_old"}', 'processed');
INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, payload, claim_token, attempts, last_error, claimed_at)
VALUES ('evt_old/email.confirmation', 'stripe', 'parked', 'step', 'evt_old', 'email.confirmation',
        '{"name":"email.confirmation","email":{"template":"order_confirmation","to":"a@example.com","data":{"OrderID":7}}}', 3, 10, 'smtp down', '-infinity'),
       ('evt_old/fulfillment', 'stripe', 'in_progress', 'step', 'evt_old', 'fulfillment',
        '{"name":"fulfillment","fulfillment":{"order_id":7,"source":"stripe","external_id":"cs_old","amount_cents":500,"currency":"usd","customer_email":"a@example.com"}}', 1, 1, NULL, now())`)
	if err := db.Migrate(url); err != nil {
		t.Fatal(err)
	}
	var body, outcome, typ, version string
	if err := conn.QueryRow(ctx, `SELECT convert_from(body, 'UTF8'), outcome, event_type, api_version FROM processed_events WHERE event_key = 'evt_old'`).
		Scan(&body, &outcome, &typ, &version); err != nil {
		t.Fatal(err)
	}
	if body != `{"id":"evt_old"}` || outcome != "processed" || typ != "checkout.session.completed" || version != "2023-10-16" {
		t.Errorf("event row after migration 3: %q %q %q %q", body, outcome, typ, version)
	}
	steps := map[string]string{}
	rows, _ := conn.Query(ctx, `SELECT step, step_kind || ' ' || payload::text FROM processed_events WHERE kind = 'step'`)
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		steps[name] = v
	}
	rows.Close()
	if got := steps["email.confirmation"]; got != `email {"to": "a@example.com", "data": {"OrderID": 7}, "template": "order_confirmation"}` {
		t.Errorf("email step after migration 3: %s", got)
	}
	if got := steps["fulfillment"]; got != `fulfillment {"order": {"id": 7, "source": "stripe", "currency": "usd", "external_id": "cs_old", "amount_cents": 500, "customer_email": "a@example.com"}}` {
		t.Errorf("fulfillment step after migration 3: %s", got)
	}
	if err := db.MigrateDown(url, len(versions)-2); err != nil {
		t.Fatal(err)
	}
	var back string
	if err := conn.QueryRow(ctx, `SELECT convert_from(body, 'UTF8') || ' ' || outcome FROM webhook_events WHERE event_key = 'evt_old'`).Scan(&back); err != nil ||
		back != `{"id":"evt_old"} processed` {
		t.Errorf("webhook_events after going down: %q, %v", back, err)
	}
	var payload string
	if err := conn.QueryRow(ctx, `SELECT payload::text FROM processed_events WHERE event_key = 'evt_old/fulfillment'`).Scan(&payload); err != nil ||
		payload != `{"name": "fulfillment", "fulfillment": {"source": "stripe", "currency": "usd", "order_id": 7, "external_id": "cs_old", "amount_cents": 500, "customer_email": "a@example.com"}}` {
		t.Errorf("fulfillment payload after going down: %s, %v", payload, err)
	}
}
