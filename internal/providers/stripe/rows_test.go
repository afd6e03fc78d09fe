package stripe_test

import (
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestEventRowsStayWhole: a real-sized event (invoice.created with its
// line items, about 5 KB) is stored in one row of processed_events, its body
// compressed in the row, and nothing of it in the table's TOAST table
// (migration 11): before, PostgreSQL moved the event's key and id out of
// line, two TOAST rows per new event, before it compressed the body. A
// column added to processed_events without STORAGE MAIN brings that back,
// so every variable-length column is checked too.
func TestEventRowsStayWhole(t *testing.T) {
	r := rt.New(t, providers.List())
	now := time.Now().Unix()
	var size int
	for n := range int64(3) {
		body := invoiceEvent(n, now)
		size = len(body)
		if res := r.Deliver(t, stripe.Spec, body, nil); res.Status != 200 {
			t.Fatalf("delivery %d: %d %s", n, res.Status, res.Body)
		}
	}
	if size < 4000 {
		t.Fatalf("the test's body is %d bytes: too small to need compressing", size)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events
WHERE kind = 'event' AND octet_length(body) > 4000 AND pg_column_size(body) < octet_length(body) / 2`); n != 3 {
		t.Errorf("%d events stored with their body compressed, want 3", n)
	}
	var toast string
	if err := r.Pool.QueryRow(t.Context(), `SELECT reltoastrelid::regclass::text FROM pg_class
WHERE oid = 'processed_events'::regclass`).Scan(&toast); err != nil {
		t.Fatal(err)
	}
	if n := r.Count(t, `SELECT count(*) FROM `+toast); n != 0 {
		t.Errorf("%d rows in processed_events' TOAST table (%s) after 3 new events, want 0", n, toast)
	}
	var notMain []string
	rows, err := r.Pool.Query(t.Context(), `
SELECT a.attname FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
WHERE a.attrelid = 'processed_events'::regclass AND a.attnum > 0 AND NOT a.attisdropped
  AND ty.typstorage <> 'p' AND a.attstorage <> 'm' ORDER BY a.attnum`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		notMain = append(notMain, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(notMain) > 0 {
		t.Errorf("columns of processed_events that PostgreSQL may move out of line before it compresses the body: %v (give them STORAGE MAIN)", notMain)
	}
}
