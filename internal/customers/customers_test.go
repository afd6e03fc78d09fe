package customers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/customers"
	"github.com/paywebhooks/receiver/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// exec runs a queued write at once, in its own transaction marked as the
// claim's holder (as an event's transaction is once its claim inserted).
type exec struct {
	t    *testing.T
	pool interface {
		Begin(context.Context) (pgx.Tx, error)
	}
}

func (e exec) Exec(sql string, args ...any) {
	ctx := e.t.Context()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT set_config('receiver.claim', 'yes', true)`); err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		e.t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// TestAddressByCustomerID: the newest event's address wins whatever the
// order of arrival; the address is looked up by the primary key among many
// customers, and the table has no other index (migration 13 dropped
// customers_email_idx, which no query read: every invoice and Checkout
// Session paid for its tuple).
func TestAddressByCustomerID(t *testing.T) {
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	q := exec{t, pool}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	customers.Remember(q, customers.Customer{Source: "stripe", ID: "cus_A", Email: "new@example.com", EventID: "evt_2", At: at.Add(time.Hour)})
	customers.Remember(q, customers.Customer{Source: "stripe", ID: "cus_A", Email: "old@example.com", EventID: "evt_1", At: at})
	customers.Remember(q, customers.Customer{Source: "stripe", ID: "cus_B", Email: "", EventID: "evt_3", At: at})
	if _, err := pool.Exec(ctx, `
INSERT INTO customers (source, customer_id, email, event_at, provider_event_id)
SELECT 'stripe', 'cus_' || g, 'c' || g || '@example.com', now(), 'evt_c' || g FROM generate_series(1, 20000) g;
ANALYZE customers`); err != nil {
		t.Fatal(err)
	}

	sql, args := customers.WithAddress(`SELECT NULL::jsonb`, nil, "stripe", "cus_A")
	var patch string
	if err := pool.QueryRow(ctx, sql, args...).Scan(&patch); err != nil {
		t.Fatal(err)
	}
	if patch != `{"to": "new@example.com"}` {
		t.Errorf("address of cus_A: %s, want the newer event's", patch)
	}
	if err := pool.QueryRow(ctx, sql, "stripe", "cus_B").Scan(&patch); err != nil {
		t.Fatal(err)
	}
	if patch != `{}` {
		t.Errorf("address of cus_B, which no event gave one: %s", patch)
	}

	rows, err := pool.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(plan, "\n"); !strings.Contains(all, "customers_pkey") || strings.Contains(all, "Seq Scan on customers") {
		t.Errorf("the address is not looked up by the primary key:\n%s", all)
	}
	rows, err = pool.Query(ctx, `SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'customers'::regclass ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(indexes, ",") != "customers_pkey" {
		t.Errorf("indexes of customers: %v, want only customers_pkey (an index no query reads costs every upsert)", indexes)
	}
}
