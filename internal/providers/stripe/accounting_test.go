package stripe_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The accounting edges' must-show tables (issue 34): each test prints its
// table with t.Log (go test -v -run 'Test<Name>' ./internal/providers/stripe/)
// and fails when a row is not what it must be.

// orderState is the paid checkout's order as a table cell: its status,
// refunded cents and dispute mark.
func orderState(t *testing.T, r *rt.Receiver, externalID string) string {
	t.Helper()
	var status string
	var refunded int64
	var lost bool
	err := r.Pool.QueryRow(context.Background(), `SELECT status, amount_refunded_cents, dispute_lost FROM orders
WHERE external_id = $1`, externalID).Scan(&status, &refunded, &lost)
	if err != nil {
		return "(no order)"
	}
	return fmt.Sprintf("%s refunded=%d dispute_lost=%t", status, refunded, lost)
}

// deliverFiveTimes delivers each named event of order five times in a row:
// the four copies must be duplicates.
func deliverFiveTimes(t *testing.T, r *rt.Receiver, order []string) {
	t.Helper()
	for _, name := range order {
		suite.DeliverOK(t, r, name)
		for range 4 {
			if res := suite.DeliverOK(t, r, name); cf.Outcome(res) != webhooks.OutcomeDuplicate {
				t.Errorf("%s again: %s, want duplicate", name, cf.Outcome(res))
			}
		}
	}
}

// permutationTable delivers every order of seq (each event five times) to
// a receiver of its own and wants the order to end in want; it returns the
// table's rows.
func permutationTable(t *testing.T, seq []string, externalID, want string, short func(string) string) []string {
	t.Helper()
	var rows []string
	for i, order := range cf.Permutations(seq) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			r := rt.New(t, providers.List())
			deliverFiveTimes(t, r, order)
			got := orderState(t, r, externalID)
			if got != want {
				t.Errorf("%v: %s, want %s", order, got, want)
			}
			names := make([]string, len(order))
			for j, n := range order {
				names[j] = short(n)
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%d", strings.Join(names, " → "), got, len(mailsTo(r))))
		})
	}
	return rows
}

func refundName(n string) string {
	return map[string]string{paid: "checkout", refunded: "charge.refunded 30.00", reCreated: "refund.created",
		reFailed: "refund.failed", reUpdated: "charge.refund.updated failed", reSecond: "charge.refunded 10.00 (2nd refund)"}[n]
}

// TestFailedRefundInEveryOrder: a 30.00 order refunded in full, the refund
// failing three days later (refund.failed, or charge.refund.updated as
// older API versions send it): in every order of its events, each
// delivered five times, the order ends paid with nothing refunded; a
// second refund of 10.00 after the failure leaves it partially_refunded
// with 1000, in every order too.
func TestFailedRefundInEveryOrder(t *testing.T) {
	t.Parallel()
	var rows []string
	rows = append(rows, permutationTable(t, []string{paid, refunded, reCreated, reFailed}, "cs_test_paid",
		"paid refunded=0 dispute_lost=false", refundName)...)
	rows = append(rows, permutationTable(t, []string{paid, refunded, reUpdated}, "cs_test_paid",
		"paid refunded=0 dispute_lost=false", refundName)...)
	rows = append(rows, permutationTable(t, []string{paid, refunded, reFailed, reSecond}, "cs_test_paid",
		"partially_refunded refunded=1000 dispute_lost=false", refundName)...)
	t.Log(table("ARRIVAL ORDER (each event five times)\tORDER AT THE END\tEMAILS", rows))
}

func disputeName(n string) string {
	return map[string]string{paidDisputed: "checkout", dpCreated: "created", dpUpdated: "updated",
		dpLost: "closed lost", dpLostEarlier: "closed lost", dpWonLater: "closed won (later)"}[n]
}

// TestDisputeLostThenWonInEveryOrder: a lost dispute marks its order
// dispute_lost, in every order of its events and the order's, each
// delivered five times; the same dispute won later (a withdrawal after the
// loss) clears the mark, in every order too.
func TestDisputeLostThenWonInEveryOrder(t *testing.T) {
	t.Parallel()
	var rows []string
	rows = append(rows, permutationTable(t, []string{paidDisputed, dpCreated, dpUpdated, dpLost}, "cs_test_paid",
		"paid refunded=0 dispute_lost=true", disputeName)...)
	rows = append(rows, permutationTable(t, []string{paidDisputed, dpCreated, dpLostEarlier, dpWonLater}, "cs_test_paid",
		"paid refunded=0 dispute_lost=false", disputeName)...)
	t.Log(table("ARRIVAL ORDER (each event five times)\tORDER AT THE END\tEMAILS", rows))
}

// TestFulfillmentCallSaysWhoseSaleAndMode: the fulfillment call of a
// Stripe order carries the connected account whose sale it is (null for
// the platform's own) and the event's livemode, so that with
// STRIPE_CONNECT_ACCOUNTS=* a connected account's sale is not fulfilled
// like the platform's.
func TestFulfillmentCallSaysWhoseSaleAndMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		event string
		env   []rt.Option
		want  string
	}{
		{paid, nil, `"account_id":null,"livemode":false`},
		{"paid.live", []rt.Option{rt.Env("STRIPE_LIVEMODE", "true")}, `"account_id":null,"livemode":true`},
		{"paid.account", []rt.Option{rt.Env("STRIPE_CONNECT_ACCOUNTS", "*")}, `"account_id":"acct_test_1","livemode":false`},
	} {
		r := rt.New(t, providers.List(), c.env...)
		suite.DeliverOK(t, r, c.event)
		reqs := r.API.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%s: %d fulfillment calls, want 1", c.event, len(reqs))
		}
		if body := string(reqs[0].Raw); !strings.HasSuffix(body, ","+c.want+"}") {
			t.Errorf("%s: fulfillment body %s, want it to end with %s", c.event, body, c.want)
		} else {
			t.Logf("%s: %s", c.event, body)
		}
	}
}

// TestMigration14KeepsWhatWasRefunded: rows written before migration 14
// keep their meaning after it, and the events that come after them follow
// the new rules: a Stripe figure takes its event's created from the stored
// body (so that its refund's failure, delivered after the upgrade, takes
// back what it added), a Paddle approved adjustment becomes a counted
// refund object, a Polar figure stays untimed (the larger counts), an order
// whose dispute was lost is marked, and an order that stood as a sale is
// taken as sold (its refund's failure fulfils nothing again). Down, the
// rows the new rules wrote go and the figures stay.
func TestMigration14KeepsWhatWasRefunded(t *testing.T) {
	ctx := context.Background()
	r := rt.New(t, providers.List())
	url := r.Config.DatabaseURL
	// Down to the schema before migration 14, one step at a time (later
	// migrations need not be numbered one after another).
	toVersion13 := func() {
		t.Helper()
		for {
			v, _, err := db.Version(url)
			switch {
			case err != nil:
				t.Fatal(err)
			case v == 13:
				return
			case v < 13:
				t.Fatalf("version %d, below 13", v)
			}
			if err := db.MigrateDown(url, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	toVersion13()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := r.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	stored := func(key, source, typ string, body []byte) {
		t.Helper()
		exec(`INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type, body, outcome, via)
VALUES ($1, $2, 'done', 'event', now(), $1, $3, $4, 'processed', 'delivery')`, key, source, typ, body)
	}
	// Stripe: the paid checkout, refunded in full (its figure, from the
	// body of charge.refunded); and an order whose dispute was lost.
	stored("evt_test_checkout_paid", "stripe", "checkout.session.completed", rt.Fixture(t, paid))
	exec(`INSERT INTO orders (source, provider_event_id, external_id, payment_intent_id, status, amount_cents, currency,
                    customer_email, amount_refunded_cents, created_at)
VALUES ('stripe', 'evt_test_checkout_paid', 'cs_test_paid', 'pi_test_paid', 'refunded', 3000, 'usd', 'buyer@example.com', 3000,
        now() - interval '10 days')`)
	stored("evt_test_charge_refunded", "stripe", "charge.refunded", rt.Fixture(t, refunded))
	exec(`INSERT INTO refunds (provider_event_id, payment_intent_id, charge_id, amount_refunded, currency)
VALUES ('evt_test_charge_refunded', 'pi_test_paid', 'ch_test_1', 3000, 'usd')`)
	exec(`INSERT INTO orders (source, provider_event_id, external_id, payment_intent_id, status, amount_cents, currency)
VALUES ('stripe', 'evt_old_disputed', 'cs_old_disputed', 'pi_test_dispute', 'paid', 4200, 'usd')`)
	exec(`INSERT INTO disputes (source, external_id, payment_intent_id, amount_cents, currency, status, event_at, provider_event_id)
VALUES ('stripe', 'dp_test_1', 'pi_test_dispute', 4200, 'usd', 'lost', now(), 'evt_test_dispute_closed')`)
	// Paddle: an approved adjustment, its event stored; Polar: a figure
	// whose event was pruned.
	stored("evt_old_paddle_adj", "paddle", "adjustment.updated",
		[]byte(`{"event_id":"evt_old_paddle_adj","event_type":"adjustment.updated","occurred_at":"2026-01-09T16:12:40.118730Z","data":{}}`))
	exec(`INSERT INTO refunds (provider_event_id, payment_intent_id, charge_id, amount_refunded, currency)
VALUES ('evt_old_paddle_adj', 'txn_old', 'adj_old', 1000, 'usd'),
       ('5b1d1c6e-0000-4000-8000-000000000001', '0c6f8b8e-3f1a-4d52-9b7e-6c1d2a9f4e01', '0c6f8b8e-3f1a-4d52-9b7e-6c1d2a9f4e01', 2500, 'usd')`)

	if err := db.Migrate(url); err != nil {
		t.Fatal(err)
	}
	got := viewRows(t, r, `SELECT format('%s %s %s %s %s %s', charge_id, amount_refunded, coalesce(refund_id, '-'), coalesce(status, '-'),
    coalesce(effect, '-'), coalesce(to_char(event_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '-')) FROM refunds ORDER BY 1`)
	want := []string{
		"0c6f8b8e-3f1a-4d52-9b7e-6c1d2a9f4e01 2500 - - - -",
		"adj_old 1000 adj_old approved counts 2026-01-09T16:12:40.118730",
		"ch_test_1 3000 - - - 2025-11-30T00:00:00.000000",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refunds after migration 14 (-want +got):\n%s", diff)
	}
	orders := viewRows(t, r, `SELECT format('%s %s %s dispute_lost=%s sold=%s', external_id, status, amount_refunded_cents, dispute_lost::text,
    (sold_at IS NOT NULL)::text) FROM orders ORDER BY 1`)
	if diff := cmp.Diff([]string{"cs_old_disputed paid 0 dispute_lost=true sold=true", "cs_test_paid refunded 3000 dispute_lost=false sold=true"},
		orders); diff != "" {
		t.Errorf("orders after migration 14 (-want +got):\n%s", diff)
	}

	// The refund fails after the upgrade: the order is paid again, and
	// nothing is confirmed or fulfilled twice.
	suite.DeliverOK(t, r, reFailed)
	if got := orderState(t, r, "cs_test_paid"); got != "paid refunded=0 dispute_lost=false" {
		t.Errorf("the stored refund's failure: %s, want paid refunded=0", got)
	}
	if steps := r.Steps(t, "evt_test_refund_failed"); len(steps) != 0 {
		t.Errorf("the failure of a refund of an order sold before planned %v", steps)
	}

	toVersion13()
	got = viewRows(t, r, `SELECT format('%s %s', charge_id, amount_refunded) FROM refunds ORDER BY 1`)
	want = []string{"0c6f8b8e-3f1a-4d52-9b7e-6c1d2a9f4e01 2500", "adj_old 1000", "ch_test_1 3000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refunds after migration 14 down (-want +got):\n%s", diff)
	}
	if err := db.Migrate(url); err != nil {
		t.Fatal(err)
	}
}

// TestPeriodicTypes: the periodic catch-up filters on at most the 20
// types Stripe's Events API takes, and lists what brings a charge's refund
// and its failure back: charge.refunded and charge.refund.updated.
func TestPeriodicTypes(t *testing.T) {
	if n := len(stripe.PeriodicTypes); n > stripe.MaxListTypes {
		t.Errorf("the periodic reconciliation lists %d types, Stripe takes %d", n, stripe.MaxListTypes)
	}
	for _, typ := range []string{"charge.refunded", "charge.refund.updated", "charge.dispute.closed", "invoice.created"} {
		if !slices.Contains(stripe.PeriodicTypes, typ) {
			t.Errorf("the periodic catch-up does not list %s", typ)
		}
	}
	for _, typ := range stripe.PeriodicTypes {
		if !slices.Contains(stripe.Spec.Types, typ) {
			t.Errorf("the periodic reconciliation lists %s, which the provider does not act on", typ)
		}
	}
}
