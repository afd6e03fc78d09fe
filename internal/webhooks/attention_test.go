package webhooks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestAttentionQueriesUseTheIndex: the redriver's scan, the lease and
// parked gauges read the one partial index of what waits (migration 12),
// never the whole table, among many finished events.
func TestAttentionQueriesUseTheIndex(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, body, outcome, via)
SELECT 'evt_' || g, 'stripe', CASE WHEN g % 1000 = 0 THEN 'parked' ELSE 'done' END, 'event', now() - g * interval '1 second',
       now(), 'evt_' || g, 'invoice.created', '{}', 'processed', 'delivery'
FROM generate_series(1, 20000) g;
INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, step_kind, claimed_at)
SELECT 'evt_' || g || '/email', 'stripe', CASE WHEN g % 500 = 0 THEN 'in_progress' ELSE 'done' END, 'step',
       'evt_' || g, 'email', 'email', now() - g * interval '1 second'
FROM generate_series(1, 20000) g;
ANALYZE processed_events`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		name string
		sql  string
		args []any
	}{
		{"due steps", webhooks.DueStepsSQL, []any{60000, 100}},
		{"oldest lease", webhooks.OldestLeaseSQL, nil},
		{"waiting steps", webhooks.WaitingStepsSQL, []any{60000}},
		{"parked counts", webhooks.ParkedCountsSQL, nil},
		{"parked events", webhooks.ParkedEventsSQL, nil},
	} {
		rows, err := pool.Query(ctx, "EXPLAIN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if all := strings.Join(lines, "\n"); strings.Contains(all, "Seq Scan") || !strings.Contains(all, "processed_events_attention_idx") {
			t.Errorf("%s does not read the attention index:\n%s", q.name, all)
		}
	}
}
