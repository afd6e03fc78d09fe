package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The attacks of issue 21, against the built binary: what makes a signed
// body one event. GitHub signs the body alone, so neither a new hook id and
// GUID on a captured body, nor a captured body sent first under another
// delivery's hook id and GUID, may change what the receiver does; and a
// signed body whose JSON repeats a member name is kept and parked, never
// acted on. Each logs its EVIDENCE line before it asserts (see
// evidence_test.go), so that E2E_SERVER_BIN=<an older server> shows what
// that version did.

// rowsAndOrders describes the stored events and orders, for the evidence.
func (w *world) rowsAndOrders(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("%d stored events, %d orders (%d paid), %d emails, %d fulfillment calls",
		count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'event'`),
		count(t, w.DB, `SELECT count(*) FROM orders`),
		count(t, w.DB, `SELECT count(*) FROM orders WHERE status = 'paid'`),
		len(w.SMTP.Messages()), len(w.API.Requests()))
}

// outcome is the outcome a delivery's answer names.
func outcome(res response) string {
	for _, o := range []string{"processed", "duplicate", "ignored", "parked"} {
		if strings.Contains(res.Body, `"outcome":"`+o+`"`) {
			return o
		}
	}
	return res.String()
}

// TestAttackGitHubHookIDReplay: two signed purchases, each delivered once,
// then each sent again under three other hook ids, each with a new GUID.
// Every copy is answered 200 duplicate and stores nothing: two events, two
// orders, two welcome emails and two fulfillment calls in all. (Before
// issue 21 the hook id was part of the body hash, so each new hook id made
// a new event: 8 stored events from 2 signed bodies.) Operators still find
// the event by its GUID, from the shell and in the console.
func TestAttackGitHubHookIDReplay(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken))
	var bought []delivery
	for n := range 2 {
		d := githubDelivery("marketplace_purchase", guid("hookid", n), marketplace("purchased", 210+n, "2026-01-05T00:00:00+00:00"))
		if res := mustPost(t, p.URL, d, 200); outcome(res) != "processed" {
			t.Fatalf("setup: purchase %d answered %s", n, res)
		}
		bought = append(bought, d)
	}
	before := w.effects(t)
	beforeRows := w.rowsAndOrders(t)
	var answers []string
	for n, d := range bought {
		for i, hook := range []string{"4343", "90210", hookID} {
			res := replayUnder(t, p, d, guid(fmt.Sprintf("hookid-replay-%d", n), i), hook)
			answers = append(answers, fmt.Sprintf("%d %s", res.Status, outcome(res)))
		}
	}
	after := w.effects(t)
	evidence(t, "github signed bodies under new hook ids and GUIDs", strings.Join(answers, ", "),
		fmt.Sprintf("before: %s; after: %s; %s", beforeRows, w.rowsAndOrders(t), after.since(before)))
	for i, a := range answers {
		if a != "200 duplicate" {
			t.Errorf("copy %d answered %s, want 200 duplicate", i, a)
		}
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'event'`); n != 2 {
		t.Errorf("%d stored events, want 2 (one per signed body)", n)
	}
	if diff := after.since(before); diff != "nothing" {
		t.Errorf("the copies changed %s", diff)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != 2 || len(after.mails) != 2 || after.calls != 2 {
		t.Errorf("%d paid orders, %d emails, %d calls; want 2 of each", n, len(after.mails), after.calls)
	}

	// Found by its GUID: `events show` and the console's search.
	d := bought[0]
	env := w.env()
	show := runServerCmd(t, env, "events", "show", d.ID)
	if show.Code != 0 || !strings.Contains(show.Stdout, d.Key) {
		t.Errorf("events show %s: exit %d, want the event %s:\n%s%s", d.ID, show.Code, d.Key, show.Stdout, show.Stderr)
	}
	if page := consoleSearch(t, p, d.ID); !strings.Contains(page, ">"+d.Key+"</a>") {
		t.Errorf("the console's search for %s does not list %s", d.ID, d.Key)
	}
}

// consoleSearch returns the console's events page for the query q.
func consoleSearch(t *testing.T, p *proc, q string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, consoleAdminURL(t, p)+"/events?q="+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	res, err := shortClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("console search: %d %s", res.StatusCode, b)
	}
	return string(b)
}

// TestAttackGitHubKeySquat: a signed body captured elsewhere (a ping of the
// same hook, a push, a purchase of another account) is sent first under the
// hook id and GUID of a purchase; then the purchase arrives, as GitHub
// sends it. The purchase is processed: its order paid, its welcome email
// and fulfillment call made. (Before issue 21 the squatter took the key,
// and the purchase was answered duplicate: no order.) The squatter is an
// event of its own, and the console finds both under the GUID.
func TestAttackGitHubKeySquat(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken))
	hook := 0
	fmt.Sscan(hookID, &hook)
	for i, tc := range []struct {
		name, event string
		body        func(n int) []byte
		orders      int // orders the squatter itself makes
	}{
		{"Ping", "ping", func(int) []byte {
			return mustJSON(map[string]any{"zen": "Keep it logically awesome.", "hook_id": hook,
				"hook": map[string]any{"id": hook, "type": "Marketplace::Listing"}})
		}, 0},
		{"Push", "push", func(n int) []byte {
			return mustJSON(map[string]any{"ref": "refs/heads/main", "after": fmt.Sprintf("%040d", n)})
		}, 0},
		{"PurchaseOfAnotherAccount", "marketplace_purchase", func(n int) []byte {
			return marketplace("purchased", n+100, "2026-01-04T00:00:00+00:00")
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 230 + i
			genuine := githubDelivery("marketplace_purchase", guid("genuine", n), marketplace("purchased", n, "2026-01-05T00:00:00+00:00"))
			squat := githubDelivery(tc.event, genuine.ID, tc.body(n)) // the purchase's hook id and GUID
			before := w.effects(t)
			beforeRows := w.rowsAndOrders(t)
			sq := mustPost(t, p.URL, squat, 200)
			res, err := post(context.Background(), p.URL, genuine)
			if err != nil {
				t.Fatal(err)
			}
			after := w.effects(t)
			welcome := 0
			for _, m := range after.mails[len(before.mails):] {
				if len(m.To) == 1 && m.To[0] == fmt.Sprintf("billing%d@org.example", n) {
					welcome++
				}
			}
			evidence(t, "github "+tc.name+" squatting a purchase's hook id and GUID",
				fmt.Sprintf("squatter %d %s, purchase %d %s", sq.Status, outcome(sq), res.Status, outcome(res)),
				fmt.Sprintf("before: %s; after: %s; order of the purchase %s, %d welcome emails to its account",
					beforeRows, w.rowsAndOrders(t), w.orderStatus(t, n), welcome))
			if res.Status != 200 || outcome(res) != "processed" {
				t.Errorf("the purchase answered %s, want 200 processed", res)
			}
			if s := w.orderStatus(t, n); s != "paid" {
				t.Errorf("the purchase's order is %s, want paid", s)
			}
			if welcome != 1 {
				t.Errorf("%d welcome emails to the account, want 1", welcome)
			}
			if c := after.calls - before.calls; c != 1+tc.orders {
				t.Errorf("%d fulfillment calls, want %d", c, 1+tc.orders)
			}
			if o := len(after.orders) - len(before.orders); o != 1+tc.orders {
				t.Errorf("%d new orders, want %d", o, 1+tc.orders)
			}
			if page := consoleSearch(t, p, genuine.ID); !strings.Contains(page, ">"+genuine.Key+"</a>") ||
				!strings.Contains(page, ">"+squat.Key+"</a>") {
				t.Errorf("the console's search for %s does not list both %s and %s", genuine.ID, genuine.Key, squat.Key)
			}
			if tc.orders > 0 {
				// The squatter's own delivery, when it comes, is a copy.
				own := githubDelivery(tc.event, guid("own", n), tc.body(n))
				if res := mustPost(t, p.URL, own, 200); outcome(res) != "duplicate" {
					t.Errorf("the squatter's own delivery answered %s, want duplicate", res)
				}
			}
		})
	}
}

// TestAttackRepeatedMemberName: a signed body whose JSON repeats a member
// name: a Stripe checkout with two "data" objects (the first with the
// customer's email, the second saying the amount is one cent), and a GitHub
// purchase with two "plan" objects (the second at one cent). Each is answered 200
// parked and kept with its body and the reason; no order, no email, no
// call. (Before issue 21 the decoder merged the two: an order with the
// first email and the second amount.) An operator's replay parks it again.
func TestAttackRepeatedMemberName(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	// second appends member to the JSON object body, as its last.
	second := func(body []byte, member string) []byte {
		s := strings.TrimRight(string(body), " \n")
		return []byte(s[:len(s)-1] + "," + member + "}")
	}
	checkoutRepeated := checkout(1, "repeated")
	// The purchase's plan twice, the second at one cent.
	gh := githubDelivery("marketplace_purchase", guid("repeated", 1), []byte(strings.Replace(
		string(marketplace("purchased", 240, "2026-01-05T00:00:00+00:00")),
		`"unit_count":1`, `"unit_count":1,"plan":{"monthly_price_in_cents":1}`, 1)))
	for _, tc := range []struct {
		name, member string
		d            delivery
	}{
		{"StripeTwoData", "data", stripeDelivery(checkoutRepeated.ID,
			second(checkoutRepeated.Body, `"data":{"object":{"amount_total":1}}`))},
		{"GitHubTwoPlans", "plan", gh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := w.effects(t)
			res, err := post(context.Background(), p.URL, tc.d)
			if err != nil {
				t.Fatal(err)
			}
			after := w.effects(t)
			var status, lastError string
			var stored int
			_ = w.DB.QueryRow(context.Background(), `
SELECT status, coalesce(last_error, ''), coalesce(length(body), 0) FROM processed_events
WHERE kind = 'event' AND (event_key = $1 OR event_id = $1)`, tc.d.ID).Scan(&status, &lastError, &stored)
			orders := w.pairs(t, `SELECT source || ':' || external_id, status || ' ' || amount_cents || ' ' || coalesce(customer_email, '-') FROM orders`)
			evidence(t, "signed body repeating "+tc.member, res.String(),
				fmt.Sprintf("claim %q %q (body %d bytes); orders %v; %s", status, lastError, stored, orders, after.since(before)))
			if res.Status != 200 || outcome(res) != "parked" {
				t.Errorf("answered %s, want 200 parked", res)
			}
			if status != "parked" || stored != len(tc.d.Body) ||
				!strings.HasPrefix(lastError, fmt.Sprintf(`repeated member name %q`, tc.member)) {
				t.Errorf("claim %q, %q, body of %d bytes; want parked for the repeated %q with the body kept",
					status, lastError, stored, tc.member)
			}
			if len(orders) != 0 || len(after.mails) != len(before.mails) || after.calls != before.calls {
				t.Errorf("orders %v, %d emails, %d calls; want none", orders, len(after.mails)-len(before.mails), after.calls-before.calls)
			}

			r := runServerCmd(t, w.env(), "events", "replay", tc.d.ID)
			replayed := w.effects(t)
			evidence(t, "events replay of a body repeating "+tc.member, fmt.Sprintf("exit %d: %s", r.Code, r.Stdout),
				replayed.since(after))
			if !strings.Contains(r.Stdout, ": parked") {
				t.Errorf("replay: exit %d %s%s; want it parked again", r.Code, r.Stdout, r.Stderr)
			}
			if n := count(t, w.DB, `SELECT count(*) FROM orders`); n != 0 || len(replayed.mails) != len(before.mails) {
				t.Errorf("after the replay: %d orders, %d emails; want none", n, len(replayed.mails)-len(before.mails))
			}
		})
	}
}
