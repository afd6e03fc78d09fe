package stripe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The money states' must-show tables: each test prints its table with
// t.Log (go test -v -run 'Test<Name>' ./internal/providers/stripe/) and
// fails when a row is not what the contract says.

// table renders rows of tab-separated cells as aligned text.
func table(header string, rows []string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	_ = tw.Flush()
	return "\n" + b.String()
}

// deliverTwice delivers each named event of order, then the same events
// again in another order: every second delivery must be a duplicate.
func deliverTwice(t *testing.T, r *rt.Receiver, order []string, seed uint64) {
	t.Helper()
	for _, name := range order {
		suite.DeliverOK(t, r, name)
	}
	again := slices.Clone(order)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(again), func(i, j int) { again[i], again[j] = again[j], again[i] })
	for _, name := range again {
		if res := suite.DeliverOK(t, r, name); cf.Outcome(res) != webhooks.OutcomeDuplicate {
			t.Errorf("%s delivered again: %s, want duplicate", name, cf.Outcome(res))
		}
	}
}

// mailsTo lists the emails r sent as "<to>: <subject>".
func mailsTo(r *rt.Receiver) []string {
	var out []string
	for _, m := range r.SMTP.Messages() {
		subject := ""
		for _, line := range strings.Split(string(m.Data), "\r\n") {
			if s, ok := strings.CutPrefix(line, "Subject: "); ok {
				subject = s
				break
			}
		}
		out = append(out, strings.Join(m.To, ",")+": "+subject)
	}
	slices.Sort(out)
	return out
}

// viewRows runs a query of one text column.
func viewRows(t *testing.T, r *rt.Receiver, sql string) []string {
	t.Helper()
	rows, err := r.Pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func short(name string) string {
	name = strings.TrimSuffix(strings.TrimPrefix(name, "customer.subscription."), ".json")
	return strings.TrimSuffix(strings.TrimPrefix(name, "charge.dispute."), ".json")
}

// TestSubscriptionLifecycleInThreeOrders: a subscription's five events
// (created, trial_will_end, updated to active, updated to cancel at the
// period's end, deleted), after the customer's address, delivered in three
// orders and each twice, end in the same row; the subscription-ended email
// is sent once, the trial-ending email once when it comes before the
// deletion and never after it.
func TestSubscriptionLifecycleInThreeOrders(t *testing.T) {
	t.Parallel()
	lifecycle := []string{subCreated, trialWillEnd, subActive, subCancel, subDeleted}
	orders := map[string][]string{
		"in order": lifecycle,
		"reversed": {subDeleted, subCancel, subActive, trialWillEnd, subCreated},
		"shuffled": {subActive, subDeleted, subCreated, subCancel, trialWillEnd},
	}
	ended := "subscriber@example.com: Your subscription has ended"
	trial := "subscriber@example.com: Your trial ends on 14 December 2025"
	// The trial-ending email is not sent when its event comes after the
	// subscription was deleted.
	wantMails := map[string][]string{"in order": {ended, trial}, "reversed": {ended}, "shuffled": {ended}}
	var rows []string
	for i, name := range []string{"in order", "reversed", "shuffled"} {
		r := rt.New(t, providers.List())
		order := append([]string{customerCreated}, orders[name]...)
		deliverTwice(t, r, order, uint64(i))
		got := viewRows(t, r, subscriptionsView)
		if diff := cmp.Diff([]string{sub1Canceled}, got); diff != "" {
			t.Errorf("%s: subscription (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantMails[name], mailsTo(r)); diff != "" {
			t.Errorf("%s: emails (-want +got):\n%s", name, diff)
		}
		names := make([]string, len(orders[name]))
		for j, n := range orders[name] {
			names[j] = short(n)
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%d", name, strings.Join(names, ", "), strings.Join(got, "; "), len(mailsTo(r))))
	}
	t.Log(table("ORDER\tEVENTS (each delivered twice)\tFINAL ROW\tEMAILS", rows))
}

// TestCheckoutPairSameSecond: the subscription's created (incomplete) and
// updated (active) that a checkout makes in one second end active in
// either order, each delivered twice.
func TestCheckoutPairSameSecond(t *testing.T) {
	t.Parallel()
	var rows []string
	for i, order := range [][]string{{subIncomplete, subSameSecond}, {subSameSecond, subIncomplete}} {
		r := rt.New(t, providers.List())
		deliverTwice(t, r, order, uint64(i))
		got := viewRows(t, r, subscriptionsView)
		if diff := cmp.Diff([]string{sub2Active}, got); diff != "" {
			t.Errorf("%v (-want +got):\n%s", order, diff)
		}
		rows = append(rows, fmt.Sprintf("%s, %s\t%s", short(order[0]), short(order[1]), strings.Join(got, "; ")))
	}
	t.Log(table("ORDER (same second)\tFINAL ROW", rows))
}

// Events of a 100.00 order refunded 1.00, then the rest.
var (
	bigOrder = cf.Event{Fixture: paid, Replace: []string{`"amount_total": 3000`, `"amount_total": 10000`}}
	bigOne   = cf.Event{Fixture: refunded, Replace: []string{"evt_test_charge_refunded", "evt_test_refund_one",
		`"amount": 3000`, `"amount": 10000`, `"amount_refunded": 3000`, `"amount_refunded": 100`, `"refunded": true`, `"refunded": false`}}
	bigRest = cf.Event{Fixture: refunded, Replace: []string{"evt_test_charge_refunded", "evt_test_refund_rest",
		`"amount": 3000`, `"amount": 10000`, `"amount_refunded": 3000`, `"amount_refunded": 10000`, `"amount_refunded": 0`, `"amount_refunded": 100`}}
)

// TestRefundSequences: a 1.00 refund of a 100.00 order leaves it
// partially_refunded with 100 cents refunded, never refunded; the rest
// makes it refunded with 10000; in any order, each event delivered twice,
// with one refund email per refund.
func TestRefundSequences(t *testing.T) {
	t.Parallel()
	s := suite
	s.Events = map[string]cf.Event{"order 100.00": bigOrder, "refund 1.00": bigOne, "refund rest (100.00 in all)": bigRest}
	var rows []string
	for _, order := range [][]string{
		{"order 100.00", "refund 1.00", "refund rest (100.00 in all)"},
		{"order 100.00", "refund rest (100.00 in all)", "refund 1.00"},
		{"refund 1.00", "order 100.00", "refund rest (100.00 in all)"},
		{"refund rest (100.00 in all)", "refund 1.00", "order 100.00"},
	} {
		r := rt.New(t, providers.List())
		for i, name := range order {
			s.DeliverOK(t, r, name)
			if res := s.DeliverOK(t, r, name); cf.Outcome(res) != webhooks.OutcomeDuplicate {
				t.Errorf("%s again: %s", name, cf.Outcome(res))
			}
			var status string
			var refunded int64
			err := r.Pool.QueryRow(context.Background(),
				`SELECT status, amount_refunded_cents FROM orders WHERE external_id = 'cs_test_paid'`).Scan(&status, &refunded)
			state := "(no order yet)"
			if err == nil {
				state = fmt.Sprintf("%s\t%d", status, refunded)
				if slices.Contains(order[:i+1], "refund 1.00") && !slices.Contains(order[:i+1], "refund rest (100.00 in all)") &&
					(status != "partially_refunded" || refunded != 100) {
					t.Errorf("%v, after %s: %s %d, want partially_refunded 100", order, name, status, refunded)
				}
			} else {
				state += "\t-"
			}
			prefix := ""
			if i == 0 {
				prefix = strings.Join(order, " → ")
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%d", prefix, name, state, len(r.SMTP.Messages())))
		}
		var status string
		var refunded int64
		if err := r.Pool.QueryRow(context.Background(),
			`SELECT status, amount_refunded_cents FROM orders WHERE external_id = 'cs_test_paid'`).Scan(&status, &refunded); err != nil {
			t.Fatal(err)
		}
		if status != "refunded" || refunded != 10000 {
			t.Errorf("%v: ends %s %d, want refunded 10000", order, status, refunded)
		}
		refundMails := 0
		for _, m := range mailsTo(r) {
			if strings.Contains(m, "Your refund") {
				refundMails++
			}
		}
		if refundMails != 2 {
			t.Errorf("%v: %d refund emails, want 2 (one per refund)", order, refundMails)
		}
	}
	t.Log(table("SEQUENCE (each event twice)\tAFTER\tSTATUS\tREFUNDED CENTS\tEMAILS SO FAR", rows))
}

// TestDisputeSequence: a dispute's events (created and funds_withdrawn of
// one second, updated, closed won, funds_reinstated of the closing second)
// in three orders, each twice: the row ends won, and NOTIFY_EMAIL is told
// once.
func TestDisputeSequence(t *testing.T) {
	t.Parallel()
	seq := []string{dpCreated, dpWithdrawn, dpUpdated, dpClosed, dpReinstated}
	var rows []string
	for i, order := range [][]string{seq, {dpReinstated, dpClosed, dpUpdated, dpWithdrawn, dpCreated},
		{dpUpdated, dpCreated, dpReinstated, dpWithdrawn, dpClosed}} {
		r := rt.New(t, providers.List())
		for j, name := range order {
			suite.DeliverOK(t, r, name)
			prefix := ""
			if j == 0 {
				prefix = fmt.Sprintf("order %d", i+1)
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%d", prefix, short(name),
				strings.TrimPrefix(strings.Join(viewRows(t, r, disputesView), "; "), "dispute "), len(r.SMTP.Messages())))
		}
		for _, name := range order {
			if res := suite.DeliverOK(t, r, name); cf.Outcome(res) != webhooks.OutcomeDuplicate {
				t.Errorf("%s again: %s", name, cf.Outcome(res))
			}
		}
		if diff := cmp.Diff([]string{dpWon}, viewRows(t, r, disputesView)); diff != "" {
			t.Errorf("order %d (-want +got):\n%s", i+1, diff)
		}
		if diff := cmp.Diff([]string{rt.NotifyEmail + ": Dispute dp_test_1 of 42.00 USD: respond by 8 December 2025 23:59 UTC"},
			mailsTo(r)); diff != "" {
			t.Errorf("order %d: emails (-want +got):\n%s", i+1, diff)
		}
	}
	t.Log(table("ORDER\tAFTER\tDISPUTE ROW\tEMAILS SO FAR", rows))
}

// modeSetting is one configuration of the mode and account matrix.
type modeSetting struct {
	name string
	env  map[string]string
}

var modeSettings = []modeSetting{
	{"nothing set", nil},
	{"STRIPE_LIVEMODE=false", map[string]string{"STRIPE_LIVEMODE": "false"}},
	{"STRIPE_LIVEMODE=true, ACCOUNTS=acct_A", map[string]string{"STRIPE_LIVEMODE": "true", "STRIPE_CONNECT_ACCOUNTS": "acct_A"}},
	{"API_KEY=sk_live_…, ACCOUNTS=*", map[string]string{"STRIPE_API_KEY": "sk_live_matrix", "STRIPE_CONNECT_ACCOUNTS": "*"}},
	{"API_KEY=rk_test_…, ACCOUNTS=acct_A,acct_C", map[string]string{"STRIPE_API_KEY": "rk_test_matrix", "STRIPE_CONNECT_ACCOUNTS": "acct_A,acct_C"}},
}

// modeEvent is one event of the matrix: a paid checkout of its own.
type modeEvent struct {
	live    bool
	account string
}

func (e modeEvent) name() string {
	a := e.account
	if a == "" {
		a = "platform"
	}
	return fmt.Sprintf("%s/%s", modeName(e.live), a)
}

func modeName(live bool) string {
	if live {
		return "live"
	}
	return "test"
}

func (e modeEvent) key() string {
	return "evt_matrix_" + modeName(e.live) + "_" + strings.TrimPrefix(e.account, "acct_")
}

func (e modeEvent) body(t testing.TB) []byte {
	sfx := modeName(e.live) + "_" + strings.TrimPrefix(e.account, "acct_")
	repl := []string{"evt_test_checkout_paid", e.key(), "cs_test_paid", "cs_matrix_" + sfx, "pi_test_paid", "pi_matrix_" + sfx,
		`"created": 1764460800`, fmt.Sprintf(`"created": %d`, time.Now().Add(-time.Hour).Unix()),
		`"livemode": false`, fmt.Sprintf(`"livemode": %t`, e.live)}
	if e.account != "" {
		repl[len(repl)-1] += fmt.Sprintf(`, "account": %q`, e.account)
	}
	return rt.Fixture(t, paid, repl...)
}

var modeEvents = func() []modeEvent {
	var out []modeEvent
	for _, live := range []bool{false, true} {
		for _, a := range []string{"", "acct_A", "acct_B"} {
			out = append(out, modeEvent{live, a})
		}
	}
	return out
}()

// actedOn is what the contract says of e under s.
func (s modeSetting) actedOn(e modeEvent) bool {
	mode := s.env["STRIPE_LIVEMODE"]
	switch {
	case mode == "" && strings.HasPrefix(s.env["STRIPE_API_KEY"], "sk_live_"):
		mode = "true"
	case mode == "" && strings.HasPrefix(s.env["STRIPE_API_KEY"], "rk_test_"):
		mode = "false"
	}
	if mode != "" && (mode == "true") != e.live {
		return false
	}
	accounts := s.env["STRIPE_CONNECT_ACCOUNTS"]
	return e.account == "" || accounts == "*" || slices.Contains(strings.Split(accounts, ","), e.account)
}

// outcomes reads what became of each matrix event in r: "acted on" with
// its order's account, or "ignored" with the reason's gist, and whether it
// wrote anything or planned a step.
func outcomes(t *testing.T, r *rt.Receiver) map[string]string {
	t.Helper()
	rows, err := r.Pool.Query(context.Background(), `
SELECT e.event_key, e.outcome, coalesce(e.last_error, ''), coalesce(e.via, ''),
       (SELECT count(*) FROM orders o WHERE o.provider_event_id = e.event_key),
       (SELECT coalesce(max(o.account_id), '-') FROM orders o WHERE o.provider_event_id = e.event_key),
       (SELECT count(*) FROM processed_events s WHERE s.kind = 'step' AND starts_with(s.event_key, e.event_key || '/'))
FROM processed_events e WHERE e.kind = 'event'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var key, outcome, reason, via, account string
		var orders, steps int
		if err := rows.Scan(&key, &outcome, &reason, &via, &orders, &account, &steps); err != nil {
			t.Fatal(err)
		}
		switch {
		case outcome == "processed" && orders == 1:
			out[key] = fmt.Sprintf("acted on (order, account %s, %d steps)", account, steps)
		case outcome == "ignored" && orders == 0 && steps == 0 && strings.Contains(reason, "(other mode"):
			out[key] = "ignored: other mode"
		case outcome == "ignored" && orders == 0 && steps == 0 && strings.Contains(reason, "(account not configured)"):
			out[key] = "ignored: account not configured"
		default:
			out[key] = fmt.Sprintf("?? %s %q orders=%d steps=%d", outcome, reason, orders, steps)
		}
	}
	return out
}

// TestModeAccountMatrix: every event (livemode × account) under every
// setting (STRIPE_LIVEMODE, STRIPE_API_KEY's prefix,
// STRIPE_CONNECT_ACCOUNTS) is acted on or ignored as the contract says,
// delivered and reconciled alike: an ignored event is stored and answered
// 200, writes no row and plans no step, and its reason is on its claim.
func TestModeAccountMatrix(t *testing.T) {
	t.Parallel()
	var rows []string
	for _, s := range modeSettings {
		opts := []rt.Option{}
		for k, v := range s.env {
			opts = append(opts, rt.Env(k, v))
		}
		delivered, reconciled := rt.New(t, providers.List(), opts...), rt.New(t, providers.List(), opts...)
		api := stripetest.New(t, stripeKey)
		for _, e := range modeEvents {
			body := e.body(t)
			res := delivered.Deliver(t, stripe.Spec, body, nil)
			if res.Status != 200 {
				t.Fatalf("%s under %s: %d %s", e.name(), s.name, res.Status, res.Body)
			}
			if _, err := api.AddRaw(body, false); err != nil {
				t.Fatal(err)
			}
		}
		reconcileAll(t, reconciled, api)
		got, gotRec := outcomes(t, delivered), outcomes(t, reconciled)
		for _, e := range modeEvents {
			d, c := got[e.key()], gotRec[e.key()]
			want := s.actedOn(e)
			if strings.HasPrefix(d, "acted on") != want || strings.HasPrefix(d, "??") {
				t.Errorf("%s, %s delivered: %s; acted on should be %t", s.name, e.name(), d, want)
			}
			if strings.HasPrefix(c, "acted on") != want || strings.HasPrefix(c, "??") {
				t.Errorf("%s, %s reconciled: %s; acted on should be %t", s.name, e.name(), c, want)
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s", s.name, e.name(), d, c))
		}
	}
	t.Log(table("SETTING\tEVENT (mode/account)\tDELIVERED\tRECONCILED", rows))
}

// reconcileAll reconciles every event of api into r, with the provider built as
// the server builds it from r's configuration.
func reconcileAll(t *testing.T, r *rt.Receiver, api *stripetest.Server) {
	t.Helper()
	prov, err := stripe.Spec.New(r.Config.Settings(stripe.Source))
	if err != nil {
		t.Fatal(err)
	}
	store := reconcile.NewStore(r.Pool)
	// Every account's events are listed (with Stripe-Account), the
	// configured ones and the others alike, so that the provider, not the
	// listing, is what decides: reconciled as delivered.
	rec := &reconcile.Events{Source: stripe.Source, MaxTypes: stripe.MaxListTypes, Lister: newStripeAPI(t, api, 100), Provider: prov, Decode: stripe.DecodeListed,
		Processor: r.Server.Processor(), Claims: store, Store: store, Log: reconciletest.Log(t),
		Accounts: []string{"acct_A", "acct_B"}}
	sum, err := rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour})
	if err != nil {
		t.Fatalf("catch-up: %v (%+v)", err, sum)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND via = 'reconcile'`); n != len(modeEvents) {
		t.Fatalf("%d events reconciled, want %d", n, len(modeEvents))
	}
}

// TestSamplesOneReceiverEach sends each shared sample of
// ../shared/samples/stripe/one-receiver-each (they reuse the event ids of
// the top-level samples) to a receiver of its own: each is acknowledged
// with its effect. The legacy dispute.closed, which has no dispute id, is
// parked for an operator.
func TestSamplesOneReceiverEach(t *testing.T) {
	dir := filepath.Join(rt.SharedSamples(t, "stripe"), "one-receiver-each")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skipf("no samples in %s", dir)
	}
	type want struct {
		outcome webhooks.Outcome
		rows    []string
		steps   []string
		mails   []string
	}
	expect := map[string]want{
		"charge.dispute.closed.stripe-ruby-mock.json": {outcome: webhooks.OutcomeParked},
		"charge.dispute.created.stripe-ruby-mock.json": {
			rows:  []string{"dispute dp_000000000000000000000000 warning_needs_response 100 usd fraudulent due=2022-04-04T23:59:59Z pi=- account=-"},
			steps: []string{"email.dispute=done"},
			mails: []string{rt.NotifyEmail + ": Dispute dp_000000000000000000000000 of 1.00 USD: respond by 4 April 2022 23:59 UTC"}},
		"charge.dispute.created.supabase-stripe-sync-engine.json": {
			rows:  []string{"dispute dp_1MLuxQJDPojXS6LNrukJCBBG warning_needs_response 1000 usd general due=2023-01-21T23:59:59Z pi=pi_1IqtG9JDPojXS6LNOGnYrIqq account=-"},
			steps: []string{"email.dispute=done"},
			mails: []string{rt.NotifyEmail + ": Dispute dp_1MLuxQJDPojXS6LNrukJCBBG of 10.00 USD: respond by 21 January 2023 23:59 UTC"}},
		"customer.subscription.created.stripe-ruby-mock.json": {
			rows: []string{"subscription sub_000000000000000000000000 active customer=cus_00000000000000 period_end=2022-04-26 cancel_at_period_end=false account=-"}},
		"customer.subscription.updated.stripe-ruby-mock.json": {
			rows: []string{"subscription sub_000000000000000000000000 active customer=cus_00000000000000 period_end=2022-04-26 cancel_at_period_end=false account=-"}},
		"customer.subscription.deleted.stripe-ruby-mock.json": {
			rows:  []string{"subscription sub_000000000000000000000000 canceled customer=cus_00000000000000 period_end=2022-04-26 cancel_at_period_end=false account=-"},
			steps: []string{"email.subscription_ended=skipped"}},
		"customer.subscription.trial_will_end.stripe-ruby-mock.json": {steps: []string{"email.trial_ending=skipped"}},
	}
	var out []string
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := rt.New(t, providers.List())
			res := r.Deliver(t, stripe.Spec, body, nil)
			if res.Status != 200 {
				t.Fatalf("status %d %s", res.Status, res.Body)
			}
			var key string
			if err := r.Pool.QueryRow(context.Background(), `SELECT event_key FROM processed_events WHERE kind = 'event'`).Scan(&key); err != nil {
				t.Fatal(err)
			}
			got := want{outcome: cf.Outcome(res), steps: r.Steps(t, key), mails: mailsTo(r),
				rows: append(viewRows(t, r, subscriptionsView), viewRows(t, r, disputesView)...)}
			w, ok := expect[name]
			if !ok {
				t.Fatalf("no expectation for %s: %+v", name, got)
			}
			if w.outcome == "" {
				w.outcome = webhooks.OutcomeProcessed
			}
			if diff := cmp.Diff(w, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			out = append(out, fmt.Sprintf("%s\t%s\t%s\t%s", name, got.outcome, strings.Join(got.rows, "; "), strings.Join(got.steps, " ")))
		})
	}
	t.Log(table("SAMPLE\tOUTCOME\tROW\tSTEPS", out))
}
