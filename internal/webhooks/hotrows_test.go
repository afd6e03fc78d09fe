package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestCustomerBurstWaitsOnNothing holds the rule of doc.go, "What a
// delivery's transaction may lock": an event's transaction locks no row
// that events of other objects also write. It delivers the events of one
// customer's Checkout (with a subscription) two at a time, each pair of
// two different checkouts of that customer, the first held open after all
// its statements and before its commit (a deferred trigger waits there on
// a lock the test holds), and fails if the second waits for a lock
// meanwhile: were any statement on the path to lock a row both events
// write (the customer's address, a counter, a subject's entitlements), the
// second would wait for the first's commit, as every event of one customer
// would wait for the one before it in a burst.
//
// The customer's row is there before the pairs, with the address and the
// time they carry: the case of a burst, whose events change nothing of it.
func TestCustomerBurstWaitsOnNothing(t *testing.T) {
	ctx := t.Context()
	r := receivertest.New(t, providers.List())
	spec := specOf(t, "stripe")
	if _, err := r.Pool.Exec(ctx, `
CREATE FUNCTION hold_before_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(36);
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER hold_before_commit AFTER INSERT ON processed_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.event_key LIKE 'evt\_hold\_%')
    EXECUTE FUNCTION hold_before_commit()`); err != nil {
		t.Fatal(err)
	}
	// The test's lock is a session's: on a direct connection, not through
	// a transaction-mode pooler (TEST_DATABASE_POOLER).
	holder, err := pgx.Connect(ctx, pgtest.SessionURL(t, r.Config.DatabaseURL))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())

	at := time.Now().Unix()
	b := burst{customer: "cus_burst", email: "burst@example.com", at: at}
	if res := deliver(r, spec, b.event("evt_base", "customer.created", 0)); res.status != http.StatusOK {
		t.Fatalf("customer.created: %d %s", res.status, res.body)
	}
	checkout := 0
	for _, first := range burstTypes {
		for _, second := range burstTypes {
			checkout += 2
			held := b.event(fmt.Sprintf("evt_hold_%d", checkout), first, checkout)
			other := b.event(fmt.Sprintf("evt_other_%d", checkout), second, checkout+1)
			t.Run(first+"/"+second, func(t *testing.T) {
				if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(36)`); err != nil {
					t.Fatal(err)
				}
				unlocked := false
				unlock := func() {
					if !unlocked {
						unlocked = true
						if _, err := holder.Exec(context.Background(), `SELECT pg_advisory_unlock(36)`); err != nil {
							t.Fatal(err)
						}
					}
				}
				defer unlock()
				heldDone := deliverAsync(r, spec, held)
				waitFor(t, r, `wait_event_type = 'Lock' AND wait_event = 'advisory'`, "the first event to reach its commit")

				otherDone := deliverAsync(r, spec, other)
				deadline := time.Now().Add(60 * time.Second)
			wait:
				for {
					select {
					case res := <-otherDone:
						if res.status != http.StatusOK {
							t.Errorf("%s: %d %s", second, res.status, res.body)
						}
						break wait
					default:
					}
					if q := waiting(t, r, `wait_event_type = 'Lock' AND wait_event <> 'advisory'`); q != "" {
						t.Errorf("%s of another checkout of the customer waited for %s held by the open %s", second, q, first)
						break wait
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s not answered after a minute", second)
					}
					time.Sleep(2 * time.Millisecond)
				}
				unlock()
				if res := <-heldDone; res.status != http.StatusOK {
					t.Errorf("%s: %d %s", first, res.status, res.body)
				}
				if t.Failed() {
					<-otherDone
				}
			})
		}
	}
	// Both checkouts of each pair were processed, the customer's address
	// kept, and no pair's event wrote the customer's row.
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND outcome IN ('processed', 'ignored')`); n != 1+2*len(burstTypes)*len(burstTypes) {
		t.Errorf("%d events processed, want %d", n, 1+2*len(burstTypes)*len(burstTypes))
	}
	if n := r.Count(t, `SELECT count(*) FROM customers WHERE customer_id = 'cus_burst' AND email = 'burst@example.com' AND provider_event_id = 'evt_base'`); n != 1 {
		t.Errorf("the customer's row was rewritten by the burst (%d rows as the first event left it)", n)
	}
}

// burstTypes are the events of a Checkout with a subscription, which Stripe
// sends within a second, each naming the customer.
var burstTypes = []string{
	"checkout.session.completed", "customer.updated", "customer.subscription.created", "invoice.created",
	"invoice.finalized", "invoice.paid", "payment_intent.succeeded",
}

// burst makes the events of one customer's checkouts, minimal Stripe events
// of the fields the receiver reads, each of checkout n's own objects.
type burst struct {
	customer, email string
	at              int64
}

func (b burst) event(id, typ string, n int) []byte {
	var obj map[string]any
	switch typ {
	case "checkout.session.completed":
		obj = map[string]any{"id": fmt.Sprintf("cs_burst_%d", n), "object": "checkout.session", "mode": "subscription",
			"customer": b.customer, "customer_details": map[string]any{"email": b.email}, "payment_status": "paid",
			"amount_total": 2000, "currency": "usd", "subscription": fmt.Sprintf("sub_burst_%d", n)}
	case "customer.created", "customer.updated":
		obj = map[string]any{"id": b.customer, "object": "customer", "email": b.email}
	case "customer.subscription.created":
		obj = map[string]any{"id": fmt.Sprintf("sub_burst_%d", n), "object": "subscription", "customer": b.customer,
			"status": "active", "current_period_end": b.at + 30*86400}
	case "invoice.created", "invoice.finalized", "invoice.paid":
		paid := typ == "invoice.paid"
		obj = map[string]any{"id": fmt.Sprintf("in_burst_%d", n), "object": "invoice", "customer": b.customer,
			"customer_email": b.email, "amount_due": 2000, "amount_paid": map[bool]int{true: 2000}[paid],
			"currency": "usd", "subscription": fmt.Sprintf("sub_burst_%d", n), "paid": paid}
	case "payment_intent.succeeded":
		obj = map[string]any{"id": fmt.Sprintf("pi_burst_%d", n), "object": "payment_intent", "customer": b.customer,
			"amount": 2000, "currency": "usd", "status": "succeeded"}
	default:
		panic(typ)
	}
	body, err := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": "2023-10-16", "created": b.at,
		"livemode": false, "type": typ, "data": map[string]any{"object": obj}})
	if err != nil {
		panic(err)
	}
	return body
}

func specOf(t *testing.T, source string) webhooks.Spec {
	t.Helper()
	all := providers.All()
	i := slices.IndexFunc(all, func(s webhooks.Spec) bool { return s.Source == source })
	if i < 0 {
		t.Fatalf("no provider %s", source)
	}
	return all[i]
}

type reply struct {
	status int
	body   string
}

func deliver(r *receivertest.Receiver, spec webhooks.Spec, body []byte) reply {
	req, err := http.NewRequest(http.MethodPost, r.URL+spec.Route(), bytes.NewReader(body))
	if err != nil {
		return reply{body: err.Error()}
	}
	req.Header = receivertest.Signed(spec, body, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{body: err.Error()}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{res.StatusCode, string(b)}
}

func deliverAsync(r *receivertest.Receiver, spec webhooks.Spec, body []byte) <-chan reply {
	done := make(chan reply, 1)
	go func() { done <- deliver(r, spec, body) }()
	return done
}

// waiting returns the statement and wait of a backend of the receiver's
// database that matches cond, or "".
func waiting(t *testing.T, r *receivertest.Receiver, cond string) string {
	t.Helper()
	var q string
	err := r.Pool.QueryRow(t.Context(), `
SELECT coalesce(string_agg(format('a %s lock (%s…)', wait_event, left(regexp_replace(query, '\s+', ' ', 'g'), 160)), '; '), '')
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND `+cond).Scan(&q)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// waitFor waits until a backend of the receiver's database matches cond.
func waitFor(t *testing.T, r *receivertest.Receiver, cond, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for waiting(t, r, cond) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
