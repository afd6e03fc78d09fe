package db_test

import (
	"testing"

	"github.com/paywebhooks/receiver/internal/db"
)

// TestQueryName: statements are named "<operation> <table>", whatever
// wraps them.
func TestQueryName(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{`
WITH claim AS (
    INSERT INTO processed_events (event_key, source) VALUES ($1, $2)
    ON CONFLICT DO NOTHING RETURNING event_key
)
SELECT set_config('receiver.claim', event_key, true) FROM claim`, "INSERT processed_events"},
		{`SELECT event_key, kind FROM processed_events WHERE event_key >= $1`, "SELECT processed_events"},
		{`-- name: take
WITH took AS (UPDATE processed_events SET claim_token = claim_token + 1 WHERE event_key = $1 RETURNING *)
SELECT true, * FROM took UNION ALL SELECT false FROM processed_events`, "UPDATE processed_events"},
		{`UPDATE "public"."orders" SET status = 'paid' WHERE id = $1`, "UPDATE orders"},
		{`INSERT INTO orders (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = excluded.a`, "INSERT orders"},
		{`DELETE FROM processed_events WHERE event_key = ANY($1)`, "DELETE processed_events"},
		{`SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k ORDER BY k`, "SELECT"},
		{`SELECT 1 FROM (SELECT * FROM orders) q`, "SELECT orders"},
		{`SELECT 'UPDATE orders', now()`, "SELECT"},
		{`SELECT * FROM orders FOR UPDATE`, "SELECT orders"},
		{`SELECT receiver_claim($1, $2, NULLIF($3, ''), $4)`, "SELECT receiver_claim"},
		{`SELECT customers_remember($1) FROM orders`, "SELECT orders"},
		{`SELECT now(), 1`, "SELECT"},
		{`begin`, "BEGIN"},
		{``, "UNKNOWN"},
	} {
		if got := db.QueryName(tc.sql); got != tc.want {
			t.Errorf("QueryName(%.40q…) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}
