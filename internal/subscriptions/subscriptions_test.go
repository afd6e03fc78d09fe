package subscriptions_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/subscriptions"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var final = []string{"canceled", "incomplete_expired"}

var at = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// op is one event's write: Insert, Apply or End of a state at a second.
type op struct {
	kind   string // "insert", "apply", "end"
	status string
	sec    int
	period bool // the event gives a period end
}

func (o op) queue(q subscriptions.Queue, id string, n int) {
	s := subscriptions.Subscription{Source: "stripe", ExternalID: id, Status: o.status, CustomerID: "cus_1",
		EventID: "evt_" + strconv.Itoa(n), At: at.Add(time.Duration(o.sec) * time.Second)}
	if o.period {
		s.CurrentPeriodEnd = at.Add(30 * 24 * time.Hour)
	}
	switch o.kind {
	case "insert":
		subscriptions.Insert(q, s)
	case "apply":
		subscriptions.Apply(q, s, final)
	case "end":
		subscriptions.End(q, s, final)
	}
}

// claimed is an event's transaction, held open by the test: marked as the
// claim's holder, and failing a statement that waits for a lock instead of
// hanging the test (nothing here waits unless the test says it must).
type claimed struct {
	t  *testing.T
	tx pgx.Tx
}

func begin(t *testing.T, pool *pgxpool.Pool) claimed {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), `SELECT set_config('receiver.claim', 'yes', true), set_config('lock_timeout', '10s', true)`); err != nil {
		t.Fatal(err)
	}
	return claimed{t, tx}
}

func (c claimed) Exec(sql string, args ...any) {
	if _, err := c.tx.Exec(context.Background(), sql, args...); err != nil {
		c.t.Error(err)
	}
}

func (c claimed) commit() {
	if err := c.tx.Commit(c.t.Context()); err != nil {
		c.t.Fatal(err)
	}
}

func row(t *testing.T, pool *pgxpool.Pool, id string) (state, xmin string) {
	t.Helper()
	err := pool.QueryRow(t.Context(), `
SELECT format('%s %s %s %s', status, to_char(event_at AT TIME ZONE 'UTC', 'HH24:MI:SS'), provider_event_id,
              CASE WHEN current_period_end IS NULL THEN 'no-period' ELSE 'period' END), xmin::text
FROM subscriptions WHERE source = 'stripe' AND external_id = $1`, id).Scan(&state, &xmin)
	if err != nil {
		t.Fatalf("subscription %s: %v", id, err)
	}
	return state, xmin
}

// TestConvergence: the rules of the package's doc, event after event.
func TestConvergence(t *testing.T) {
	pool := pgtest.NewPool(t)
	for _, tc := range []struct {
		name string
		ops  []op
		want string
	}{
		{"CreatedThenUpdatedSameSecond", []op{{"insert", "incomplete", 1, true}, {"apply", "active", 1, true}}, "active 10:00:01 evt_1 period"},
		{"UpdatedThenCreatedSameSecond", []op{{"apply", "active", 1, true}, {"insert", "incomplete", 1, true}}, "active 10:00:01 evt_0 period"},
		{"OlderChangesNothing", []op{{"apply", "active", 2, true}, {"apply", "past_due", 1, true}}, "active 10:00:02 evt_0 period"},
		{"SameTimeLaterArrivalWins", []op{{"apply", "active", 1, true}, {"apply", "past_due", 1, true}}, "past_due 10:00:01 evt_1 period"},
		{"SameStateSameTimeWritesNothing", []op{{"apply", "active", 1, true}, {"apply", "active", 1, true}}, "active 10:00:01 evt_0 period"},
		// active at 3 is the newest: past_due at 2, arriving last, must
		// not win.
		{"NewerSameStateRecordsItsTime", []op{{"apply", "active", 1, true}, {"apply", "active", 3, true}, {"apply", "past_due", 2, true}}, "active 10:00:03 evt_1 period"},
		{"NewestStateWhole", []op{{"apply", "active", 1, true}, {"apply", "paused", 2, false}}, "paused 10:00:02 evt_1 no-period"},
		{"FinalNeverLeft", []op{{"end", "canceled", 1, false}, {"apply", "active", 2, true}, {"end", "incomplete_expired", 3, false}}, "canceled 10:00:01 evt_0 no-period"},
		{"EndOverTheSameSecond", []op{{"apply", "active", 2, true}, {"end", "canceled", 1, false}}, "canceled 10:00:02 evt_1 no-period"},
		{"EndCreates", []op{{"end", "canceled", 1, false}}, "canceled 10:00:01 evt_0 no-period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "sub_" + tc.name
			for i, o := range tc.ops {
				q := begin(t, pool)
				o.queue(q, id, i)
				q.commit()
			}
			if got, _ := row(t, pool, id); got != tc.want {
				t.Errorf("subscription: %q, want %q", got, tc.want)
			}
		})
	}
	// A copy's transaction (no claim) writes nothing.
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	op{"apply", "active", 1, true}.queue(claimed{t, tx}, "sub_copy", 0)
	op{"insert", "active", 1, true}.queue(claimed{t, tx}, "sub_copy", 0)
	op{"end", "canceled", 1, true}.queue(claimed{t, tx}, "sub_copy", 0)
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM subscriptions WHERE external_id = 'sub_copy'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a copy's transaction wrote %d rows (%v)", n, err)
	}
}

// TestUnchangedStateLocksNothing: events that leave a subscription's row as
// it is (Apply of the same state and time, Insert of a row that exists, End
// of a subscription already ended), in transactions open at once, neither
// write the row nor wait for each other; Insert spends no id.
func TestUnchangedStateLocksNothing(t *testing.T) {
	pool := pgtest.NewPool(t)
	for _, tc := range []struct {
		name  string
		first op
		again op
	}{
		{"Apply", op{"apply", "active", 1, true}, op{"apply", "active", 1, true}},
		{"Insert", op{"apply", "active", 1, true}, op{"insert", "incomplete", 1, true}},
		{"End", op{"end", "canceled", 1, false}, op{"end", "canceled", 2, false}},
		{"ApplyAfterEnd", op{"end", "canceled", 1, false}, op{"apply", "active", 2, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "sub_" + tc.name
			q := begin(t, pool)
			tc.first.queue(q, id, 0)
			q.commit()
			before, xmin := row(t, pool, id)
			var seq int64
			if err := pool.QueryRow(t.Context(), `SELECT last_value FROM subscriptions_id_seq`).Scan(&seq); err != nil {
				t.Fatal(err)
			}
			q1, q2 := begin(t, pool), begin(t, pool)
			tc.again.queue(q1, id, 1)
			tc.again.queue(q2, id, 2)
			q2.commit()
			q1.commit()
			if after, x := row(t, pool, id); x != xmin || after != before {
				t.Errorf("row %q (xmin %s) became %q (xmin %s): written", before, xmin, after, x)
			}
			var seq2 int64
			if err := pool.QueryRow(t.Context(), `SELECT last_value FROM subscriptions_id_seq`).Scan(&seq2); err != nil {
				t.Fatal(err)
			}
			if seq2 != seq {
				t.Errorf("the id sequence moved from %d to %d", seq, seq2)
			}
		})
	}
}

// TestFirstEventsAtOnce: two first events of a subscription in transactions
// open at once: the second meets the first's row, waits for its commit and
// applies the same rules to it, so that the newer state wins whichever
// commits first.
func TestFirstEventsAtOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	older, newer := op{"apply", "past_due", 1, true}, op{"apply", "active", 2, true}
	for _, tc := range []struct {
		name          string
		first, second op
		want          string
	}{
		{"NewerFirst", newer, older, "active 10:00:02 evt_0 period"},
		{"OlderFirst", older, newer, "active 10:00:02 evt_1 period"},
		{"EndSecond", newer, op{"end", "canceled", 1, false}, "canceled 10:00:02 evt_1 no-period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "sub_" + tc.name
			q1, q2 := begin(t, pool), begin(t, pool)
			tc.first.queue(q1, id, 0)
			done := make(chan struct{})
			go func() {
				defer close(done)
				tc.second.queue(q2, id, 1)
			}()
			pgtest.WaitForLockWaits(t, pool, 1)
			q1.commit()
			<-done
			q2.commit()
			if got, _ := row(t, pool, id); got != tc.want {
				t.Errorf("subscription: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFirstEventsWaitForOneCommit: events of a new subscription that
// arrive together wait for the commit of the one that inserted its row,
// and then go on without waiting for each other (and, of the same state,
// write nothing).
func TestFirstEventsWaitForOneCommit(t *testing.T) {
	pool := pgtest.NewPool(t)
	o := op{"apply", "active", 1, true}
	q1 := begin(t, pool)
	o.queue(q1, "sub_new", 0)
	others := []claimed{begin(t, pool), begin(t, pool), begin(t, pool)}
	done := make(chan struct{}, len(others))
	for i, q := range others {
		go func() {
			defer func() { done <- struct{}{} }()
			o.queue(q, "sub_new", i+1)
		}()
	}
	pgtest.WaitForLockWaits(t, pool, len(others))
	q1.commit()
	for range others {
		<-done // none waits for another's commit: lock_timeout would fail it
	}
	for _, q := range others {
		q.commit()
	}
	if got, _ := row(t, pool, "sub_new"); got != "active 10:00:01 evt_0 period" {
		t.Errorf("subscription: %q, want the first event's row", got)
	}
}
