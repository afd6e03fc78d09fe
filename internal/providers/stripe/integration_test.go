package stripe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
)

// These tests run the reconcilers with the receiver's own processor and
// providers (receivertest): what a run writes and sends is what deliveries
// of the same events write and send.

func session(id, email string, amount int) map[string]any {
	return map[string]any{
		"id": id, "object": "checkout.session", "mode": "payment", "payment_status": "paid", "status": "complete",
		"amount_total": amount, "currency": "usd", "payment_intent": "pi_" + id,
		"customer_details": map[string]any{"email": email},
	}
}

func TestStripeWithTheRealProcessor(t *testing.T) {
	r := receivertest.New(t, providers.List())
	api := stripetest.New(t, stripeKey)
	now := time.Now().Truncate(time.Second)
	delivered := api.Add("checkout.session.completed", now.Add(-50*time.Minute), session("cs_delivered", "a@example.com", 1000), true)
	missed := api.Add("checkout.session.completed", now.Add(-40*time.Minute), session("cs_missed", "b@example.com", 2000), false)
	invoice := api.Add("invoice.created", now.Add(-30*time.Minute), map[string]any{"id": "in_missed", "object": "invoice",
		"status": "open", "amount_due": 500, "amount_paid": 0, "currency": "usd", "customer_email": "c@example.com"}, false)
	if res := r.Deliver(t, stripe.Spec, delivered.Raw, nil); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	store := reconcile.NewStore(r.Pool)
	rec := &reconcile.Events{Source: stripe.Source, MaxTypes: stripe.MaxListTypes,
		Lister: newStripeAPI(t, api, 100), Provider: stripe.New([]string{receivertest.Secret(stripe.Spec)}),
		Decode: stripe.DecodeListed, Processor: r.Server.Processor(), Claims: store, Store: store, Log: reconciletest.Log(t),
	}

	sum, err := rec.Run(context.Background(), reconcile.Options{Since: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 3 || sum.Known != 1 || sum.Processed != 2 || sum.Missed() != 2 {
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
	want := []claim{{delivered.ID, "delivery", "processed"}, {missed.ID, "reconcile", "processed"}, {invoice.ID, "reconcile", "processed"}}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	var body []byte
	if err := r.Pool.QueryRow(context.Background(), `SELECT body FROM processed_events WHERE event_key = $1`, missed.ID).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if string(body) != string(missed.Raw) {
		t.Errorf("stored body differs from the API's event:\n%s\n%s", body, missed.Raw)
	}
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE source = 'stripe' AND status = 'paid'`); n != 2 {
		t.Errorf("%d paid orders, want 2", n)
	}
	if n := r.Count(t, `SELECT count(*) FROM invoices WHERE stripe_invoice_id = 'in_missed'`); n != 1 {
		t.Errorf("%d invoices, want 1", n)
	}
	r.SMTP.WaitFor(t, 2, 5*time.Second)
	if n := len(r.API.Requests()); n != 2 {
		t.Errorf("%d fulfillment calls, want 2", n)
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
	t.Run("RaceWithALiveDelivery", func(t *testing.T) {
		ev := api.Add("checkout.session.completed", now.Add(-10*time.Minute), session("cs_race", "race@example.com", 3000), false)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := rec.Run(context.Background(), reconcile.Options{Resume: true}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if res := r.Deliver(t, stripe.Spec, ev.Raw, nil); res.Status != 200 && res.Status != 503 {
				t.Errorf("delivery: %d %s", res.Status, res.Body)
			}
		}()
		wg.Wait()
		stepsSettled(t, r) // a step left to the redriver (a delivery answered 503) is sent by now
		if n := len(r.SMTP.Messages()); n != 3 {
			t.Errorf("%d emails, want 3 (one per order)", n)
		}
		if n := r.API.CountByKey(r.API.Requests()[len(r.API.Requests())-1].IdempotencyKey); n != 1 {
			t.Errorf("the raced order's fulfillment called %d times", n)
		}
		if n := r.Count(t, `SELECT count(*) FROM orders WHERE external_id = 'cs_race'`); n != 1 {
			t.Errorf("%d orders for the raced session", n)
		}
	})
}

func stepsSettled(t *testing.T, r *receivertest.Receiver) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND status = 'in_progress'`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("steps still in progress after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
