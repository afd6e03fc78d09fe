package paddle_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/providers/paddle"
	"github.com/paywebhooks/receiver/internal/providers/paddle/paddletest"
	"github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
)

// transaction is a completed transaction's data, as Paddle sends it (the
// fields the receiver reads, and a few it does not).
func transaction(id, email, total string) map[string]any {
	return map[string]any{
		"id": id, "status": "completed", "customer_id": "ctm_01jpm5q1nxw1rnj47e65gh2bh8", "currency_code": "USD",
		"origin": "web", "custom_data": map[string]any{"email": email},
		"details": map[string]any{"totals": map[string]any{"subtotal": total, "tax": "0", "total": total, "grand_total": total,
			"currency_code": "USD"}},
		"payments": []any{map[string]any{"status": "captured", "error_code": nil}},
	}
}

// TestPaddleWithTheRealProcessor: what a catch-up run writes and sends is
// what deliveries of the same events write and send, once: an event
// delivered as a notification (with its notification_id) is known by its
// event_id, the missed ones are processed through the Paddle provider.
func TestPaddleWithTheRealProcessor(t *testing.T) {
	r := receivertest.New(t, providers.List())
	api := paddletest.New(t, paddleKey)
	now := time.Now().Truncate(time.Second)
	delivered := api.Add("transaction.completed", now.Add(-50*time.Minute), transaction("txn_delivered", "a@example.com", "1000"))
	missed := api.Add("transaction.completed", now.Add(-40*time.Minute), transaction("txn_missed", "b@example.com", "2000"))
	ignored := api.Add("customer.updated", now.Add(-30*time.Minute), map[string]any{"id": "ctm_1", "email": "c@example.com"})

	// The delivery of the first: the notification is the event and its
	// notification_id.
	var notification map[string]json.RawMessage
	if err := json.Unmarshal(delivered.Raw, &notification); err != nil {
		t.Fatal(err)
	}
	notification["notification_id"] = json.RawMessage(`"ntf_01hv8x4fjm3n2d7zbcvf0nkvyn"`)
	body, _ := json.Marshal(notification)
	if res := r.Deliver(t, paddle.Spec, body, nil); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	store := reconcile.NewStore(r.Pool)
	rec := &reconcile.Events{Source: paddle.Source,
		Lister: newPaddleAPI(t, api, 200), Provider: paddle.New([]string{receivertest.Secret(paddle.Spec)}, paddle.DefaultTolerance),
		Decode: paddle.DecodeListed, Processor: r.Server.Processor(), Claims: store, Store: store, Log: reconciletest.Log(t),
	}

	sum, err := rec.Run(context.Background(), reconcile.Options{Since: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 3 || sum.Known != 1 || sum.Processed != 1 || sum.Ignored != 1 || sum.Missed() != 1 {
		t.Errorf("summary %+v", sum)
	}
	type claim struct{ Key, Via, Outcome string }
	var claims []claim
	rows, _ := r.Pool.Query(context.Background(), `SELECT event_key, via, outcome FROM processed_events WHERE kind = 'event' ORDER BY claimed_at, event_key`)
	for rows.Next() {
		var c claim
		if err := rows.Scan(&c.Key, &c.Via, &c.Outcome); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, c)
	}
	want := []claim{{delivered.ID, "delivery", "processed"}, {missed.ID, "reconcile", "processed"}, {ignored.ID, "reconcile", "ignored"}}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	var stored []byte
	if err := r.Pool.QueryRow(context.Background(), `SELECT body FROM processed_events WHERE event_key = $1`, missed.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if string(stored) != string(missed.Raw) {
		t.Errorf("stored body differs from the API's event:\n%s\n%s", stored, missed.Raw)
	}
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE source = 'paddle' AND status = 'paid'`); n != 2 {
		t.Errorf("%d paid orders, want 2", n)
	}
	r.SMTP.WaitFor(t, 2, 10*time.Second)
	stepsDone := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND status = 'in_progress'`) > 0 {
			if time.Now().After(deadline) {
				t.Fatal("steps still in progress after 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stepsDone()
	if n := len(r.API.Requests()); n != 2 {
		t.Errorf("%d fulfillment calls, want 2 (one per order)", n)
	}

	t.Run("SecondRunChangesNothing", func(t *testing.T) {
		before := r.Snapshot(t)
		sum, err := rec.Run(context.Background(), reconcile.Options{Since: time.Hour})
		if err != nil || sum.Known != 3 || sum.Processed != 0 {
			t.Errorf("%+v %v", sum, err)
		}
		if diff := cmp.Diff(before, r.Snapshot(t)); diff != "" {
			t.Errorf("state changed (-before +after):\n%s", diff)
		}
		if n := len(r.SMTP.Messages()); n != 2 {
			t.Errorf("%d emails, want 2", n)
		}
	})
}
