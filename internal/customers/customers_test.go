package customers_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// txQueue runs each queued write at once in tx, an event's transaction the
// test holds open, marked as the claim's holder.
type txQueue struct {
	t  *testing.T
	tx pgx.Tx
}

func begin(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}) txQueue {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	// A statement that waits for a row lock fails instead of hanging the
	// test: nothing in these tests waits unless the test says it must.
	if _, err := tx.Exec(t.Context(), `SELECT set_config('receiver.claim', 'yes', true), set_config('lock_timeout', '10s', true)`); err != nil {
		t.Fatal(err)
	}
	return txQueue{t, tx}
}

func (q txQueue) Exec(sql string, args ...any) {
	if _, err := q.tx.Exec(q.t.Context(), sql, args...); err != nil {
		q.t.Fatal(err)
	}
}

func (q txQueue) commit() {
	if err := q.tx.Commit(q.t.Context()); err != nil {
		q.t.Fatal(err)
	}
}

func (q txQueue) xid() string {
	var x string
	if err := q.tx.QueryRow(q.t.Context(), `SELECT pg_current_xact_id()::xid::text`).Scan(&x); err != nil {
		q.t.Fatal(err)
	}
	return x
}

// row is the customer's row as text, and the transaction that wrote its
// version (xmin).
func row(t *testing.T, pool *pgxpool.Pool, id string) (state, xmin string) {
	t.Helper()
	err := pool.QueryRow(t.Context(), `
SELECT format('%s %s %s %s', email, coalesce(account_id, '-'), to_char(event_at AT TIME ZONE 'UTC', 'HH24:MI:SS'), provider_event_id), xmin::text
FROM customers WHERE source = 'stripe' AND customer_id = $1`, id).Scan(&state, &xmin)
	if err != nil {
		t.Fatalf("customer %s: %v", id, err)
	}
	return state, xmin
}

// TestNewestAddressWins: whatever the order of arrival, the newest event's
// address is kept; of events of the same time, the later arrival's. An
// event that gives the address already kept, at a later time, records its
// time, so that an older event with another address does not win over it
// afterwards.
func TestNewestAddressWins(t *testing.T) {
	pool := pgtest.NewPool(t)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	type ev struct {
		email, account string
		sec            int
	}
	for _, tc := range []struct {
		name   string
		events []ev
		want   string
	}{
		{"NewerLater", []ev{{"a@x", "", 1}, {"b@x", "", 2}}, "b@x - 10:00:02 evt_1"},
		{"OlderLater", []ev{{"b@x", "", 2}, {"a@x", "", 1}}, "b@x - 10:00:02 evt_0"},
		{"SameTimeLaterArrivalWins", []ev{{"a@x", "", 1}, {"b@x", "", 1}}, "b@x - 10:00:01 evt_1"},
		{"SameTimeLaterArrivalWinsBack", []ev{{"a@x", "", 1}, {"b@x", "", 1}, {"a@x", "", 1}}, "a@x - 10:00:01 evt_2"},
		{"SameAddressSameTimeKeepsFirst", []ev{{"a@x", "", 1}, {"a@x", "", 1}}, "a@x - 10:00:01 evt_0"},
		// a@x at 3 is the newest: b@x at 2, arriving last, must not win.
		{"NewerSameAddressRecordsItsTime", []ev{{"a@x", "", 1}, {"a@x", "", 3}, {"b@x", "", 2}}, "a@x - 10:00:03 evt_1"},
		{"AccountKeptFromTheFirstNotOlder", []ev{{"a@x", "", 2}, {"a@x", "acct_1", 1}, {"a@x", "acct_2", 2}, {"a@x", "acct_3", 2}}, "a@x acct_2 10:00:02 evt_2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "cus_" + tc.name
			for i, e := range tc.events {
				q := begin(t, pool)
				customers.Remember(q, customers.Customer{Source: "stripe", ID: id, Email: e.email, AccountID: e.account,
					EventID: "evt_" + strconv.Itoa(i), At: at.Add(time.Duration(e.sec) * time.Second)})
				q.commit()
			}
			if got, _ := row(t, pool, id); got != tc.want {
				t.Errorf("customer: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestUnchangedAddressLocksNothing: an event that gives the address and time
// already recorded neither writes the customer's row nor locks it, so that
// another event of the same customer goes on while the first is still
// uncommitted. Where an event does change the row (here, the first of a
// later second), another one that would make the same change waits for its
// commit only, and then writes nothing.
func TestUnchangedAddressLocksNothing(t *testing.T) {
	pool := pgtest.NewPool(t)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := customers.Customer{Source: "stripe", ID: "cus_A", Email: "a@example.com", EventID: "evt_0", At: at}
	q := begin(t, pool)
	customers.Remember(q, c)
	q.commit()
	_, created := row(t, pool, "cus_A")

	// Two events of the same second, both open: neither waits (lock_timeout
	// would fail the second), neither writes.
	q1, q2 := begin(t, pool), begin(t, pool)
	c.EventID = "evt_1"
	customers.Remember(q1, c)
	c.EventID = "evt_2"
	customers.Remember(q2, c)
	q2.commit()
	q1.commit()
	if state, xmin := row(t, pool, "cus_A"); xmin != created || state != "a@example.com - 10:00:00 evt_0" {
		t.Errorf("after two events that change nothing: %s written by %s, want the row of %s untouched", state, xmin, created)
	}

	// The first event of the next second records its time: it locks the
	// row until its commit. Another of that second waits for that commit,
	// finds the time recorded, and writes nothing.
	q1, q2 = begin(t, pool), begin(t, pool)
	c.At, c.EventID = at.Add(time.Second), "evt_3"
	customers.Remember(q1, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.EventID = "evt_4"
		rememberOn(t, q2.tx, c)
	}()
	pgtest.WaitForLockWaits(t, pool, 1)
	writer := q1.xid()
	q1.commit()
	<-done
	q2.commit()
	if state, xmin := row(t, pool, "cus_A"); xmin != writer || state != "a@example.com - 10:00:01 evt_3" {
		t.Errorf("after the next second's two events: %s written by %s, want the first's (%s) only", state, xmin, writer)
	}
}

// TestFirstEventsAtOnce: two first events of a new customer in transactions
// open at once: the second meets the first's row, waits for its commit and
// applies the same rule to it, so that the newer address wins whichever
// commits first. A third, of the first's address and time, waits for the
// same commit, not for the second's.
func TestFirstEventsAtOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	older := customers.Customer{Source: "stripe", Email: "old@example.com", EventID: "evt_old", At: at}
	newer := customers.Customer{Source: "stripe", Email: "new@example.com", EventID: "evt_new", At: at.Add(time.Second)}
	for _, tc := range []struct {
		name          string
		first, second customers.Customer
	}{{"NewerFirst", newer, older}, {"OlderFirst", older, newer}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.first.ID, tc.second.ID = "cus_"+tc.name, "cus_"+tc.name
			q1, q2 := begin(t, pool), begin(t, pool)
			customers.Remember(q1, tc.first)
			done := make(chan struct{})
			go func() {
				defer close(done)
				rememberOn(t, q2.tx, tc.second)
			}()
			pgtest.WaitForLockWaits(t, pool, 1)
			q1.commit()
			<-done
			q2.commit()
			if got, _ := row(t, pool, tc.first.ID); got != "new@example.com - 10:00:01 evt_new" {
				t.Errorf("customer: %q, want the newer event's address", got)
			}
		})
	}
}

// recorder keeps the writes Remember queues, for a test that runs them on
// a goroutine of its own.
type recorder []struct {
	sql  string
	args []any
}

func (r *recorder) Exec(sql string, args ...any) {
	*r = append(*r, struct {
		sql  string
		args []any
	}{sql, args})
}

// rememberOn runs Remember's writes of c in tx, as the event's pipeline
// would, from a goroutine of the test's.
func rememberOn(t *testing.T, tx pgx.Tx, c customers.Customer) {
	var r recorder
	customers.Remember(&r, c)
	for _, w := range r {
		if _, err := tx.Exec(context.Background(), w.sql, w.args...); err != nil {
			t.Error(err)
			return
		}
	}
}

// TestFirstEventsWaitForOneCommit: the events of a new customer arrive
// together (a checkout's session, customer and invoices): while the first
// one's insert is uncommitted, the others wait for its commit, and once it
// commits they go on without waiting for each other, and write nothing.
func TestFirstEventsWaitForOneCommit(t *testing.T) {
	pool := pgtest.NewPool(t)
	c := customers.Customer{Source: "stripe", ID: "cus_new", Email: "new@example.com", EventID: "evt_0",
		At: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	q1 := begin(t, pool)
	customers.Remember(q1, c)
	others := []txQueue{begin(t, pool), begin(t, pool), begin(t, pool)}
	done := make(chan struct{}, len(others))
	for i, q := range others {
		go func() {
			defer func() { done <- struct{}{} }()
			c := c
			c.EventID = "evt_" + strconv.Itoa(i+1)
			rememberOn(t, q.tx, c)
		}()
	}
	pgtest.WaitForLockWaits(t, pool, len(others))
	writer := q1.xid()
	q1.commit()
	for range others {
		<-done // none waits for another's commit: lock_timeout would fail it
	}
	for _, q := range others {
		q.commit()
	}
	if state, xmin := row(t, pool, "cus_new"); xmin != writer || state != "new@example.com - 10:00:00 evt_0" {
		t.Errorf("customer: %s written by %s, want the first event's row (%s) only", state, xmin, writer)
	}
}

// TestStatementsPlannedOnce: Remember's statement is planned once per
// connection and then reused (a generic plan per execution), as every
// statement of an event's transaction is (see internal/webhooks); the
// function's own statements are kept by PostgreSQL for the connection.
func TestStatementsPlannedOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(t.Context(), `
INSERT INTO customers (source, customer_id, email, event_at, provider_event_id)
SELECT 'stripe', 'cus_' || g, 'c' || g || '@example.com', now(), 'evt_c' || g FROM generate_series(1, 20000) g;
ANALYZE customers`); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 20 {
		tx, err := conn.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		q := txQueue{t, tx}
		if _, err := tx.Exec(t.Context(), `SELECT set_config('receiver.claim', 'yes', true)`); err != nil {
			t.Fatal(err)
		}
		// New customers, known ones with the same address, and known ones
		// with a new one.
		customers.Remember(q, customers.Customer{Source: "stripe", ID: "cus_" + strconv.Itoa(30000+i), Email: "n@example.com", EventID: "evt_n", At: at})
		customers.Remember(q, customers.Customer{Source: "stripe", ID: "cus_" + strconv.Itoa(100+i), Email: "c" + strconv.Itoa(100+i) + "@example.com", EventID: "evt_s", At: at})
		customers.Remember(q, customers.Customer{Source: "stripe", ID: "cus_" + strconv.Itoa(200+i), Email: "x@example.com", EventID: "evt_x", At: time.Now()})
		q.commit()
	}
	rows, err := conn.Query(t.Context(), `
SELECT left(regexp_replace(statement, '\s+', ' ', 'g'), 60), generic_plans, custom_plans
FROM pg_prepared_statements WHERE statement ~ 'customers' AND statement !~ 'pg_prepared_statements'`)
	if err != nil {
		t.Fatal(err)
	}
	type plans struct {
		Stmt            string
		Generic, Custom int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[plans])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("prepared statements of customers: %+v, want Remember's one", got)
	}
	for _, p := range got {
		if p.Custom > 5 { // PostgreSQL tries 5 custom plans before it compares
			t.Errorf("%s: planned anew %d times in 60 executions (generic %d)", p.Stmt, p.Custom, p.Generic)
		}
	}
}
