package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The attacks of issue 11, each a case of its own, against the built
// binary. Every case logs one EVIDENCE line (what it was answered, what it
// left behind) before it asserts, so that the same tests run against
// another version of the receiver (E2E_SERVER_BIN) say what that version
// did. The receiver before issue 11 (commit 7480b8b) fails each of them.

// ---------------------------------------------------------------------------
// Stripe: a Stripe-Signature whose checked timestamp is not the signed one.

// TestAttackStripeSignatureHeader sends, for a fresh checkout each,
// Stripe-Signature headers that a careless parser reads two ways: two t=
// elements (the one checked against the clock need not be the one the v1
// covers: stripe-go keeps the last), a t= that is not an integer, and no
// v1= at all. Each is refused 400 and writes nothing: the same event,
// properly signed afterwards, is processed as new.
func TestAttackStripeSignatureHeader(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	hexSig := func(body []byte, at string) string {
		return hmacHex(stripeSecret, []byte(at+"."+string(body)))
	}
	for i, tc := range []struct {
		name   string
		header func(body []byte, now, old int64) string
	}{
		{"TwoTimestamps/NowThenOld", func(b []byte, now, old int64) string {
			return fmt.Sprintf("t=%d,t=%d,v1=%s", now, old, hexSig(b, fmt.Sprint(old)))
		}},
		{"TwoTimestamps/OldThenNow", func(b []byte, now, old int64) string {
			return fmt.Sprintf("t=%d,t=%d,v1=%s", old, now, hexSig(b, fmt.Sprint(old)))
		}},
		{"TimestampNotAnInteger", func(b []byte, now, _ int64) string {
			ts := fmt.Sprintf("%d.0", now) // the v1 signs this very text
			return fmt.Sprintf("t=%s,v1=%s", ts, hexSig(b, ts))
		}},
		{"NoV1/OnlyV0", func(b []byte, now, _ int64) string {
			return fmt.Sprintf("t=%d,v0=%s", now, hexSig(b, fmt.Sprint(now)))
		}},
		{"NoV1/OnlyT", func(b []byte, now, _ int64) string { return fmt.Sprintf("t=%d", now) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := checkout(i+1, "sighdr")
			now := time.Now()
			h := stripeHeader(d.Body, stripeSecret, now)
			h.Set("Stripe-Signature", tc.header(d.Body, now.Unix(), now.Add(-10*time.Minute).Unix()))
			before := w.effects(t)
			res, err := postRaw(context.Background(), p.URL+d.Path, h, d.Body)
			if err != nil {
				t.Fatal(err)
			}
			wrote := w.effects(t).since(before)
			evidence(t, "stripe "+tc.name, res.String(), wrote)
			if res.Status != http.StatusBadRequest {
				t.Errorf("answered %s, want 400", res)
			}
			if wrote != "nothing" {
				t.Errorf("wrote %s, want nothing", wrote)
			}
			// Nothing was claimed: the event, signed as Stripe signs it,
			// is new.
			if res := mustPost(t, p.URL, d, 200); !strings.Contains(res.Body, `"processed"`) {
				t.Errorf("the same event properly signed: %s, want processed", res)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// GitHub: signed bodies replayed under a new delivery GUID, and bodies sent
// under another event type. GitHub signs the body alone.

// marketplace is a marketplace_purchase event of action for account
// accountID(n), effective at effective (RFC 3339).
func marketplace(action string, n int, effective string) []byte {
	return mustJSON(map[string]any{
		"action":         action,
		"effective_date": effective,
		"sender":         map[string]any{"login": "admin", "id": 501, "type": "User"},
		"marketplace_purchase": map[string]any{
			"account": map[string]any{
				"type": "Organization", "id": accountID(n), "login": fmt.Sprintf("org%d", n),
				"organization_billing_email": fmt.Sprintf("billing%d@org.example", n),
			},
			"billing_cycle": "monthly",
			"unit_count":    1,
			"on_free_trial": false,
			"plan": map[string]any{
				"id": 7, "name": "Pro", "monthly_price_in_cents": 1500, "yearly_price_in_cents": 15000,
				"price_model": "FLAT_RATE", "has_free_trial": false, "unit_name": nil,
			},
		},
	})
}

// guid is a delivery GUID for the nth delivery of a test.
func guid(prefix string, n int) string {
	return fmt.Sprintf("%s-%08x-0000-4000-8000-%012x", prefix, n, rand.Uint64()&0xffffffffffff)
}

// orderStatus is the status of the marketplace order of account n, or
// "none".
func (w *world) orderStatus(t testing.TB, n int) string {
	t.Helper()
	s, ok := w.pairs(t, `SELECT external_id, status FROM orders WHERE source = 'github_marketplace'`)[fmt.Sprintf("account:%d", accountID(n))]
	if !ok {
		return "none"
	}
	return s
}

// replayUnder sends d's signed body as a new delivery: another GUID (and
// hook id, if hook is not empty), the same body and signature.
func replayUnder(t *testing.T, p *proc, d delivery, newGUID, hook string) response {
	t.Helper()
	h := d.Header()
	h.Set("X-GitHub-Delivery", newGUID)
	if hook != "" {
		h.Set("X-GitHub-Hook-ID", hook)
	}
	res, err := postRaw(context.Background(), p.URL+d.Path, h, d.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAttackGitHubReplayPurchaseAfterCancel: an account buys, then
// cancels; the purchase's signed body is replayed under a new GUID (on the
// same hook, and on another hook id). The order stays cancelled, and no
// welcome email or fulfillment call goes out.
func TestAttackGitHubReplayPurchaseAfterCancel(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	for i, hook := range []string{"", "4343"} {
		name := "SameHook"
		if hook != "" {
			name = "OtherHook"
		}
		t.Run(name, func(t *testing.T) {
			n := 10 + i
			bought := githubDelivery("marketplace_purchase", guid("buy", n), marketplace("purchased", n, "2026-01-05T00:00:00+00:00"))
			mustPost(t, p.URL, bought, 200)
			mustPost(t, p.URL, githubDelivery("marketplace_purchase", guid("cancel", n), marketplace("cancelled", n, "2026-02-01T00:00:00+00:00")), 200)
			if s := w.orderStatus(t, n); s != "cancelled" {
				t.Fatalf("setup: order %s after purchase and cancellation, want cancelled", s)
			}
			before := w.effects(t)
			res := replayUnder(t, p, bought, guid("replay", n), hook)
			after := w.effects(t)
			evidence(t, "github purchase replayed after its cancellation, "+name, res.String(), after.since(before))
			if res.Status != 200 {
				t.Errorf("replay answered %s, want 200 (acknowledged: a copy is not an error)", res)
			}
			if s := w.orderStatus(t, n); s != "cancelled" {
				t.Errorf("order %s after the replay, want cancelled", s)
			}
			if m, c := len(after.mails)-len(before.mails), after.calls-before.calls; m+c != 0 {
				t.Errorf("the replay sent %d emails and made %d fulfillment calls, want none", m, c)
			}
		})
	}
}

// TestAttackGitHubReplayCancelAfterRepurchase: an account buys, cancels and
// buys again; the cancellation's signed body is replayed under a new GUID
// (same hook, another hook id), and an older cancellation arrives late. The
// order stays paid and nothing is sent.
func TestAttackGitHubReplayCancelAfterRepurchase(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	for i, tc := range []struct{ name, hook string }{
		{"SameHook", ""}, {"OtherHook", "4343"}, {"OlderCancellationArrivesLate", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 20 + i
			mustPost(t, p.URL, githubDelivery("marketplace_purchase", guid("buy", n), marketplace("purchased", n, "2026-01-05T00:00:00+00:00")), 200)
			cancel := githubDelivery("marketplace_purchase", guid("cancel", n), marketplace("cancelled", n, "2026-02-01T00:00:00+00:00"))
			mustPost(t, p.URL, cancel, 200)
			mustPost(t, p.URL, githubDelivery("marketplace_purchase", guid("rebuy", n), marketplace("purchased", n, "2026-03-01T00:00:00+00:00")), 200)
			if s := w.orderStatus(t, n); s != "paid" {
				t.Fatalf("setup: order %s after purchase, cancellation and purchase, want paid", s)
			}
			before := w.effects(t)
			var res response
			if tc.name == "OlderCancellationArrivesLate" {
				late := githubDelivery("marketplace_purchase", guid("late", n), marketplace("cancelled", n, "2026-02-15T00:00:00+00:00"))
				r, err := post(context.Background(), p.URL, late)
				if err != nil {
					t.Fatal(err)
				}
				res = r
			} else {
				res = replayUnder(t, p, cancel, guid("replay", n), tc.hook)
			}
			after := w.effects(t)
			evidence(t, "github old cancellation after a newer purchase, "+tc.name, res.String(), after.since(before))
			if res.Status != 200 {
				t.Errorf("answered %s, want 200", res)
			}
			if s := w.orderStatus(t, n); s != "paid" {
				t.Errorf("order %s, want paid", s)
			}
			if m, c := len(after.mails)-len(before.mails), after.calls-before.calls; m+c != 0 {
				t.Errorf("%d emails and %d fulfillment calls, want none", m, c)
			}
		})
	}
}

// TestAttackGitHubEventTypeMismatch: X-GitHub-Event is not signed, so a
// signed body is sent under another event type. Refused 400, nothing
// written.
func TestAttackGitHubEventTypeMismatch(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	sponsorship := mustJSON(map[string]any{
		"action": "created",
		"sponsorship": map[string]any{
			"node_id": "S_mismatch", "created_at": "2026-01-05T00:00:00Z",
			"sponsor": map[string]any{"login": "someone"},
			"tier":    map[string]any{"name": "$5 a month", "monthly_price_in_cents": 500, "is_one_time": false},
		},
	})
	ping := func(hook int) []byte {
		return mustJSON(map[string]any{"zen": "Design for failure.", "hook_id": hook, "hook": map[string]any{"id": hook, "type": "Repository"}})
	}
	for i, tc := range []struct {
		name, event string
		body        []byte
	}{
		{"PurchaseBodyAsSponsorship", "sponsorship", marketplace("purchased", 30, "2026-01-05T00:00:00+00:00")},
		{"SponsorshipBodyAsPurchase", "marketplace_purchase", sponsorship},
		{"PingBodyAsPurchase", "marketplace_purchase", ping(4242)},
		{"PurchaseBodyAsPing", "ping", marketplace("purchased", 31, "2026-01-05T00:00:00+00:00")},
		{"PingOfAnotherHook", "ping", ping(999)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := githubDelivery(tc.event, guid("mismatch", i), tc.body)
			before := w.effects(t)
			res, err := post(context.Background(), p.URL, d)
			if err != nil {
				t.Fatal(err)
			}
			wrote := w.effects(t).since(before)
			evidence(t, "github "+tc.name, res.String(), wrote)
			if res.Status != http.StatusBadRequest {
				t.Errorf("answered %s, want 400", res)
			}
			if wrote != "nothing" {
				t.Errorf("wrote %s, want nothing", wrote)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Label values from the request.

// TestAttackMetricsCardinality sends 300 made-up HTTP methods and 300
// made-up X-GitHub-Event names (signed: verified, stored and acknowledged
// as ignored). After a warm-up round that creates the "other" series, the
// number of series in /metrics does not grow (but for the redriver's, which
// it creates on its own schedule).
func TestAttackMetricsCardinality(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	paths := []string{"/webhooks/stripe", "/webhooks/github", "/healthz", "/no-such-route"}
	methods := func(round string, n int) {
		for i := range n {
			m := fmt.Sprintf("MADEUP%s%03dX%04X", round, i, rand.IntN(1<<16))
			res, _ := request(t, m, p.URL+paths[i%len(paths)], nil, nil)
			if res.Status < 400 {
				t.Errorf("%s %s answered %d", m, paths[i%len(paths)], res.Status)
			}
		}
	}
	events := func(round string, n int) {
		for i := range n {
			typ := fmt.Sprintf("made_up_%s_%03d_%04x", round, i, rand.IntN(1<<16))
			d := githubDelivery(typ, guid("madeup"+round, i), mustJSON(map[string]any{"action": "made_up", "n": i, "round": round}))
			mustPost(t, p.URL, d, 200)
		}
	}
	for _, tc := range []struct {
		name string
		send func(round string, n int)
	}{{"HTTPMethods", methods}, {"GitHubEventNames", events}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.send("warmup", 2*len(paths))
			metricsOf(t, p.URL+"/metrics") // the scrape's own series
			m0 := metricsOf(t, p.URL+"/metrics")
			tc.send("attack", 300)
			m1 := metricsOf(t, p.URL+"/metrics")
			// Series a background task creates in its own time (the
			// redriver's first idle run) are not the attack's.
			var added []string
			for _, a := range m1.added(m0) {
				if !strings.HasPrefix(a, "webhook_redriver_runs_total") {
					added = append(added, a)
				}
			}
			example := ""
			if len(added) > 0 {
				example = "; new series such as " + added[0]
			}
			evidence(t, "300 made-up "+tc.name, "/metrics",
				fmt.Sprintf("series %d → %d (%d new), bytes %d → %d (%+d)%s", len(m0.Series), len(m1.Series), len(added),
					len(m0.Text), len(m1.Text), len(m1.Text)-len(m0.Text), example))
			if len(added) > 0 {
				t.Errorf("%d series in /metrics after 300 made-up %s that were not there before: %s",
					len(added), tc.name, strings.Join(added[:min(len(added), 5)], ", "))
			}
		})
	}
}

// ---------------------------------------------------------------------------
// A client's X-Request-ID.

// TestAttackHugeRequestID sends a 32 KiB X-Request-ID with a delivery, a
// rejected delivery and a request to no route: the receiver answers with
// its own id, and no log line carries the client's. A short, safe client id
// is kept beside the receiver's own, as client_request_id.
func TestAttackHugeRequestID(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 32<<10)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	huge := string(b)

	d := checkout(1, "reqid")
	signed := d.Header()
	unsigned := d.Header()
	unsigned.Del("Stripe-Signature")
	var logBytes, echoed, lines int
	var answers []string
	for _, r := range []struct {
		name, method, path string
		header             http.Header
		body               []byte
	}{
		{"delivery", http.MethodPost, d.Path, signed, d.Body},
		{"unsigned", http.MethodPost, d.Path, unsigned, d.Body},
		{"no route", http.MethodGet, "/no-such-route", http.Header{}, nil},
	} {
		r.header.Set("X-Request-ID", huge)
		res, h := request(t, r.method, p.URL+r.path, r.header, r.body)
		id := h.Get("X-Request-ID")
		answers = append(answers, fmt.Sprintf("%s: %d with an X-Request-ID of %d bytes", r.name, res.Status, len(id)))
		if id == huge {
			echoed++
		}
		if id == "" {
			t.Errorf("%s: no X-Request-ID in the answer", r.name)
			continue
		}
		p.waitLog(t, id, 10*time.Second) // the line of this request
		for _, l := range p.logLines() {
			if strings.Contains(l, id) {
				logBytes += len(l)
				lines++
			}
		}
	}
	carrying := 0
	for _, l := range p.logLines() {
		if strings.Contains(l, huge[:64]) {
			carrying++
		}
	}
	evidence(t, "32 KiB X-Request-ID", strings.Join(answers, "; "),
		fmt.Sprintf("%d log lines, %d bytes, for the 3 requests; %d lines carry the client's id; echoed %d times", lines, logBytes, carrying, echoed))
	if echoed > 0 {
		t.Errorf("the client's 32 KiB X-Request-ID was echoed in %d answers", echoed)
	}
	if carrying > 0 {
		t.Errorf("%d log lines carry the client's 32 KiB X-Request-ID", carrying)
	}

	// A short, safe id is kept beside the receiver's own. (A POST: a
	// second GET of a missing path within the minute would be counted,
	// not logged whole, as refusals are.)
	const clientID = "e2e-client_42.a"
	res, h := request(t, http.MethodPost, p.URL+"/no-such-route", http.Header{"X-Request-Id": {clientID}}, nil)
	own := h.Get("X-Request-ID")
	if res.Status != 404 || own == "" || own == clientID {
		t.Errorf("short client id: %s with X-Request-ID %q, want 404 with the receiver's own id", res, own)
	}
	p.waitLog(t, `"client_request_id":"`+clientID+`"`, 10*time.Second)
	if !p.out.contains(`"request_id":"` + own + `"`) {
		t.Errorf("no log line carries the receiver's own request_id %q", own)
	}
}

// logLines is the process's output so far.
func (p *proc) logLines() []string {
	lines, _ := p.out.snapshot()
	return lines
}

// ---------------------------------------------------------------------------
// Unsigned bodies, and more deliveries than MAX_INFLIGHT.

// TestAttackUnsignedHugeBody declares a 2 MiB body with no signature
// header, sends 1 KiB of it on a raw connection, and reads the answer: 400,
// before the rest of the body was even sent.
func TestAttackUnsignedHugeBody(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	for _, path := range []string{"/webhooks/stripe", "/webhooks/github"} {
		t.Run(strings.TrimPrefix(path, "/webhooks/"), func(t *testing.T) {
			before := w.effects(t)
			conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\n"+
				"X-GitHub-Event: ping\r\nX-GitHub-Delivery: unsigned-huge\r\nContent-Length: %d\r\n\r\n", path, 2<<20)
			start := time.Now()
			if _, err := conn.Write(append([]byte(head), []byte(`{"padding":"`+strings.Repeat("x", 1000))...)); err != nil {
				t.Fatal(err)
			}
			const wait = 10 * time.Second
			_ = conn.SetReadDeadline(start.Add(wait))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			answered := ""
			var status int
			switch {
			case err == nil:
				body := make([]byte, 512)
				n, _ := res.Body.Read(body)
				res.Body.Close()
				status = res.StatusCode
				answered = fmt.Sprintf("%d after %v (1 KiB of 2 MiB sent) %s", status, time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(body[:n])))
			case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
				answered = fmt.Sprintf("no answer within %v (1 KiB of 2 MiB sent): the server waits for the body", wait)
			default:
				answered = fmt.Sprintf("connection ended without an answer after %v: %v", time.Since(start).Round(time.Millisecond), err)
			}
			wrote := w.effects(t).since(before)
			evidence(t, "unsigned 2 MiB POST "+path, answered, wrote)
			if status != http.StatusBadRequest {
				t.Errorf("want 400 before the body is read; got: %s", answered)
			}
			if wrote != "nothing" {
				t.Errorf("wrote %s", wrote)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestAttackMoreThanMaxInflight starts the receiver with MAX_INFLIGHT=4 and
// holds four deliveries in the fulfillment API: the next ones are answered
// 503 with Retry-After at once, and nothing is written for them. Once the
// API lets go, the four finish, and the others, sent again, are processed.
func TestAttackMoreThanMaxInflight(t *testing.T) {
	const limit, extra = 4, 4
	w := newWorld(t)
	// The step timeout (a quarter of the lease) outlasts the hold.
	p := startReceiver(t, "receiver", w.env("MAX_INFLIGHT", fmt.Sprint(limit), "LEASE_DURATION", "60s"))
	release := w.API.Hold()
	defer release()
	type result struct {
		res response
		err error
	}
	held := make([]chan result, limit)
	for i := range limit {
		held[i] = make(chan result, 1)
		d := checkout(i, "inflight")
		go func() {
			res, err := post(context.Background(), p.URL, d)
			held[i] <- result{res, err}
		}()
	}
	w.API.WaitHeld(t, limit, 30*time.Second)
	// The held deliveries' emails run beside their calls: wait until each is
	// recorded, so that the snapshot changes only by what the refused
	// deliveries write (once, on a loaded machine, an email was recorded
	// between the two).
	waitFor(t, 30*time.Second, "the held deliveries' emails to be recorded", func() bool {
		return count(t, w.DB, `SELECT count(*) FROM processed_events
WHERE event_key LIKE 'evt_inflight_checkout_%/email.confirmation' AND status = 'done'`) == limit
	})

	before := w.effects(t)
	answers := make([]string, extra)
	var extras []delivery
	var refused atomic.Int32
	var wg sync.WaitGroup
	for i := range extra {
		d := checkout(limit+i, "inflight")
		extras = append(extras, d)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			res, err := post(ctx, p.URL, d)
			switch {
			case err != nil:
				answers[i] = fmt.Sprintf("no answer within 5s (%v)", errors.Unwrap(err))
			default:
				answers[i] = fmt.Sprintf("%s in %v", res, time.Since(start).Round(time.Millisecond))
				if res.Status == 503 && res.RetryAfter != "" {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	wrote := w.effects(t).since(before)
	evidence(t, fmt.Sprintf("%d deliveries beyond MAX_INFLIGHT=%d", extra, limit), strings.Join(answers, "; "), wrote)
	if n := int(refused.Load()); n != extra {
		t.Errorf("%d of %d deliveries beyond the limit answered 503 with Retry-After: %s", n, extra, strings.Join(answers, "; "))
	}
	if wrote != "nothing" {
		t.Errorf("the refused deliveries wrote %s", wrote)
	}

	release()
	for i := range limit {
		select {
		case r := <-held[i]:
			if r.err != nil || r.res.Status != 200 {
				t.Errorf("held delivery %d: %v %s, want 200", i, r.err, r.res)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("held delivery %d not answered within 30s of the release", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, d := range extras {
		if _, err := deliverUntilOK(ctx, d, func() string { return p.URL }, stormRetry); err != nil {
			t.Fatal(err)
		}
	}
	w.waitSettled(t, 30*time.Second)
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != limit+extra {
		t.Errorf("paid orders = %d, want %d", n, limit+extra)
	}
	calls := w.fulfillmentsByKey()
	for i := range limit + extra {
		if n := calls[idemKey(checkout(i, "inflight").Ref(stepFulfillment))]; n != 1 {
			t.Errorf("checkout %d: %d fulfillment calls, want 1", i, n)
		}
	}
}

// TestManyCheckoutsFewConnections: 64 checkouts at once, all held in the
// fulfillment API together, on DB_MAX_CONNS=8 and the default MAX_INFLIGHT:
// none is refused, and each is answered 200 once the API lets go.
func TestManyCheckoutsFewConnections(t *testing.T) {
	const n = 64
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env("DB_MAX_CONNS", "8", "LEASE_DURATION", "60s"))
	release := w.API.Hold()
	defer release()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		d := checkout(i, "fewconns")
		wg.Go(func() {
			res, err := post(context.Background(), p.URL, d)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				statuses[0]++
				return
			}
			statuses[res.Status]++
		})
	}
	answered := func() int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, c := range statuses {
			k += c
		}
		return k
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("%d fulfillment calls held at once (or answers)", n), func() bool {
		return len(w.API.Requests())+answered() >= n
	})
	heldAtOnce := len(w.API.Requests())
	release()
	wg.Wait()
	evidence(t, fmt.Sprintf("%d concurrent checkouts, DB_MAX_CONNS=8", n), fmt.Sprintf("statuses %v", statuses),
		fmt.Sprintf("%d fulfillment calls in flight at once", heldAtOnce))
	if statuses[200] != n {
		t.Errorf("answers by status %v, want %d × 200", statuses, n)
	}
	if heldAtOnce != n {
		t.Errorf("%d deliveries in flight at once, want %d", heldAtOnce, n)
	}
}

// ---------------------------------------------------------------------------
// Operator commands.

// TestAttackReplayWithoutSMTP: `server events replay KEY` run from a shell
// without SMTP_ADDR would write the replayed email to a MAIL_DIR nobody
// reads and mark the step done. The receiver, killed a moment ago, still
// counts as running (its record is fresh), and sends mail to its relay: the
// replay is refused (exit 2) with a message that names SMTP_ADDR, and
// nothing changes; --allow-unconfigured (--allow-mismatch's former name)
// proceeds.
func TestAttackReplayWithoutSMTP(t *testing.T) {
	w := newWorld(t)
	env := w.env("MAX_STEP_ATTEMPTS", "1")
	p := startReceiver(t, "receiver", env)
	if !externalBin { // a binary from before the record of receivers never logs it
		p.waitLog(t, "receiver recorded", 30*time.Second)
	}
	w.SMTP.SetFailure(errors.New("mailbox unavailable"))
	d := checkout(1, "replaycli")
	step := d.StepKey(stepConfirmation)
	res, err := post(context.Background(), p.URL, d)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the confirmation email step to be parked", func() bool {
		s, _ := w.stepState(t, step)
		return s == "parked"
	})
	t.Logf("delivery with the SMTP relay refusing: %s", res)
	p.Kill()
	w.SMTP.SetFailure(nil)

	mailDir := t.TempDir()
	shell := w.env("SMTP_ADDR", "", "MAIL_DIR", mailDir)
	before := w.effects(t)
	r := runServerCmd(t, shell, "events", "replay", d.Key)
	wrote := w.effects(t).since(before)
	if files := filesIn(t, mailDir); len(files) > 0 {
		wrote += fmt.Sprintf("; %d files in MAIL_DIR", len(files))
	}
	evidence(t, "events replay KEY without SMTP_ADDR", fmt.Sprintf("exit %d: %s %s", r.Code, r.Stdout, r.Stderr), wrote)
	if r.Code != 2 || !strings.Contains(r.Stderr, "SMTP_ADDR: this shell: unset / receivers: "+w.SMTP.Addr()) {
		t.Errorf("replay without SMTP_ADDR: exit %d, stderr %q; want a refusal that names SMTP_ADDR", r.Code, r.Stderr)
	}
	if wrote != "nothing" {
		t.Errorf("the refused replay changed %s", wrote)
	}

	before = w.effects(t)
	r = runServerCmd(t, shell, "events", "replay", d.Key, "--allow-unconfigured")
	wrote = w.effects(t).since(before)
	files := filesIn(t, mailDir)
	evidence(t, "events replay KEY --allow-unconfigured", fmt.Sprintf("exit %d: %s %s", r.Code, r.Stdout, r.Stderr),
		fmt.Sprintf("%s; %d files in MAIL_DIR", wrote, len(files)))
	if r.Code != 0 {
		t.Errorf("replay --allow-unconfigured: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if s, _ := w.stepState(t, step); s != "done" || len(files) != 1 {
		t.Errorf("after replay --allow-unconfigured: step %s, %d files in MAIL_DIR; want done and 1", s, len(files))
	}
}

// TestAttackPruneWindows: `server events prune` with a negative window, or
// one below a provider's retention floor, would delete keys whose deletion
// makes the next retry or replay look new. Refused (exit 2), nothing
// deleted; --dry-run deletes nothing. A sound window then prunes.
func TestAttackPruneWindows(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	for _, d := range []delivery{checkout(1, "prune"), checkout(2, "prune"), purchase(1, "prune"), invoiceEvent(1, "prune", "invoice.created")} {
		mustPost(t, p.URL, d, 200)
	}
	w.waitSettled(t, 30*time.Second)
	p.Kill()
	// Every event was received 100 days ago.
	ctx := context.Background()
	if _, err := w.DB.Exec(ctx, `UPDATE processed_events SET claimed_at = claimed_at - interval '100 days',
        completed_at = completed_at - interval '100 days' WHERE claimed_at > '-infinity'`); err != nil {
		t.Fatal(err)
	}
	if count(t, w.DB, `SELECT count(*) FROM pg_class WHERE oid = to_regclass('webhook_events')`) == 1 {
		if _, err := w.DB.Exec(ctx, `UPDATE webhook_events SET received_at = received_at - interval '100 days'`); err != nil {
			t.Fatal(err)
		}
	}
	// Each case starts from the same rows: a version that prunes what it
	// should refuse would otherwise leave the next case nothing to delete.
	tables := []string{"processed_events"}
	if count(t, w.DB, `SELECT count(*) FROM pg_class WHERE oid = to_regclass('webhook_events')`) == 1 {
		tables = append(tables, "webhook_events")
	}
	for _, tb := range tables {
		if _, err := w.DB.Exec(ctx, `CREATE TABLE e2e_saved_`+tb+` AS SELECT * FROM `+tb); err != nil {
			t.Fatal(err)
		}
	}
	restore := func() {
		for _, tb := range tables {
			if _, err := w.DB.Exec(ctx, `DELETE FROM `+tb+`; INSERT INTO `+tb+` SELECT * FROM e2e_saved_`+tb); err != nil {
				t.Fatal(err)
			}
		}
	}
	shell := w.env()
	all := count(t, w.DB, `SELECT count(*) FROM processed_events`)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--older-than", "-1h"}, 2},
		{[]string{"--older-than", "4000h", "--github-older-than", "-1h"}, 2},
		{[]string{"--older-than", "1s"}, 2},
		{[]string{"--older-than", "720h", "--dry-run"}, 0},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			defer restore()
			before := w.effects(t)
			r := runServerCmd(t, shell, append([]string{"events", "prune"}, tc.args...)...)
			wrote := w.effects(t).since(before)
			deleted := all - count(t, w.DB, `SELECT count(*) FROM processed_events`)
			evidence(t, "events prune "+strings.Join(tc.args, " "), fmt.Sprintf("exit %d: %s %s", r.Code, r.Stdout, r.Stderr),
				fmt.Sprintf("%d of %d claim rows deleted", deleted, all))
			if r.Code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", r.Code, tc.code, r.Stdout, r.Stderr)
			}
			if wrote != "nothing" {
				t.Errorf("changed %s, want nothing deleted", wrote)
			}
		})
	}
	// The control: a window past every floor prunes every event.
	r := runServerCmd(t, shell, "events", "prune", "--older-than", "720h")
	left := count(t, w.DB, `SELECT count(*) FROM processed_events`)
	t.Logf("events prune --older-than 720h: exit %d, %d of %d claim rows left\n%s", r.Code, left, all, r.Stdout)
	if r.Code != 0 || left != 0 {
		t.Errorf("events prune --older-than 720h: exit %d, %d claim rows left; want 0 and none\n%s%s", r.Code, left, r.Stdout, r.Stderr)
	}
}

// ---------------------------------------------------------------------------
// Configuration: TRUSTED_PROXIES, METRICS_ADDR.

// TestAttackForwardedFor: without TRUSTED_PROXIES, a client's
// X-Forwarded-For is ignored in the request log's remote; with the test's
// loopback as a trusted proxy, the forwarded client is logged.
func TestAttackForwardedFor(t *testing.T) {
	const forged = "203.0.113.7"
	for _, tc := range []struct {
		name, trusted, want string
	}{{"Untrusted", "", "127.0.0.1"}, {"TrustedProxy", "127.0.0.1/32", forged}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			p := startReceiver(t, "receiver", w.env("TRUSTED_PROXIES", tc.trusted))
			res, h := request(t, http.MethodGet, p.URL+"/no-such-route", http.Header{"X-Forwarded-For": {forged}}, nil)
			id := h.Get("X-Request-ID")
			p.waitLog(t, id, 10*time.Second)
			remote := ""
			for _, l := range p.logLines() {
				var line struct{ Remote string }
				if strings.Contains(l, id) && json.Unmarshal([]byte(l), &line) == nil && line.Remote != "" {
					remote = line.Remote
				}
			}
			evidence(t, "X-Forwarded-For "+forged+", TRUSTED_PROXIES="+tc.trusted, res.String(), "logged remote "+remote)
			if remote != tc.want {
				t.Errorf("logged remote %q, want %q", remote, tc.want)
			}
		})
	}
}

// TestAttackMetricsAddr: with METRICS_ADDR set, /metrics is served there
// and answered 404 on HTTP_ADDR.
func TestAttackMetricsAddr(t *testing.T) {
	w := newWorld(t)
	// localhost:0 rather than 127.0.0.1:0: the configuration refuses a
	// METRICS_ADDR spelled like HTTP_ADDR, port 0 included.
	p := startReceiver(t, "receiver", w.env("METRICS_ADDR", "localhost:0"))
	addr := ""
	for _, l := range p.logLines() {
		var line struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "metrics listening" {
			addr = line.Addr
		}
	}
	public, _ := request(t, http.MethodGet, p.URL+"/metrics", nil, nil)
	side := "no metrics listener logged"
	if addr != "" {
		res, _ := request(t, http.MethodGet, "http://"+addr+"/metrics", nil, nil)
		side = fmt.Sprintf("METRICS_ADDR %s/metrics: %d (%d bytes)", addr, res.Status, len(res.Body))
		if res.Status != 200 || !strings.Contains(res.Body, "webhook_") {
			t.Errorf("GET %s/metrics: %d, want 200 with the receiver's metrics", addr, res.Status)
		}
	} else {
		t.Errorf("the receiver logged no \"metrics listening\" line")
	}
	evidence(t, "METRICS_ADDR set", fmt.Sprintf("HTTP_ADDR/metrics: %d; %s", public.Status, side), "-")
	if public.Status != http.StatusNotFound {
		t.Errorf("GET HTTP_ADDR/metrics: %d, want 404", public.Status)
	}
}

// ---------------------------------------------------------------------------
// Steps.

// TestAttackMessageIDAcrossMailFrom: an email step planned by a process
// whose SMTP relay refuses it is finished by another process started with
// another MAIL_FROM. The message carries the Message-ID (and the sender)
// stamped when the step was planned, so a recipient that saw the first
// attempt recognises the second.
func TestAttackMessageIDAcrossMailFrom(t *testing.T) {
	w := newWorld(t)
	w.SMTP.SetFailure(errors.New("try again later"))
	first := startReceiver(t, "first", w.env())
	d := checkout(1, "msgid")
	step := d.StepKey(stepConfirmation)
	res, err := post(context.Background(), first.URL, d)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the email step's first attempt to fail", func() bool {
		return count(t, w.DB, `SELECT count(*) FROM processed_events WHERE event_key = $1 AND status = 'in_progress' AND last_error IS NOT NULL`, step) == 1
	})
	first.Kill()
	w.SMTP.SetFailure(nil)
	t.Logf("first process (MAIL_FROM %q): %s", mailFrom, res)

	const otherFrom = "Other Shop <noreply@other.test>"
	startReceiver(t, "second", w.env("MAIL_FROM", otherFrom))
	waitFor(t, 30*time.Second, "the second process to finish the email step", func() bool {
		s, _ := w.stepState(t, step)
		return s == "done"
	})
	msgs := w.SMTP.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d emails, want 1", len(msgs))
	}
	m := msgs[0]
	evidence(t, "email step planned under MAIL_FROM "+mailFrom+", sent by a process with "+otherFrom,
		"Message-ID "+m.MessageID, "envelope sender "+m.From)
	if want := messageID(d.Ref(stepConfirmation)); m.MessageID != want {
		t.Errorf("Message-ID %s, want %s (stamped when the step was planned)", m.MessageID, want)
	}
	if m.From != "shop@example.test" {
		t.Errorf("envelope sender %s, want shop@example.test", m.From)
	}
}

// invoiceFailed is invoice.payment_failed for invoice n.
func invoiceFailed(n int, prefix string) delivery {
	id := fmt.Sprintf("evt_%s_invoice_%04d_failed", prefix, n)
	return stripeDelivery(id, stripeEvent(id, "invoice.payment_failed", map[string]any{
		"id":             invoiceID(n, prefix),
		"object":         "invoice",
		"status":         "open",
		"amount_due":     2000 + n,
		"amount_paid":    0,
		"currency":       "usd",
		"customer_email": fmt.Sprintf("payer%d@example.com", n),
		"attempt_count":  1,
		"billing_reason": "subscription_cycle",
	}))
}

// TestAttackDunningAfterPaid: invoice.payment_failed arriving after
// invoice.paid (Stripe does not order events) asks nothing of a customer
// who has paid: no dunning email, and the invoice stays paid.
func TestAttackDunningAfterPaid(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env())
	mustPost(t, p.URL, invoiceEvent(1, "dun", "invoice.paid"), 200)
	before := w.effects(t)
	res := mustPost(t, p.URL, invoiceFailed(1, "dun"), 200)
	after := w.effects(t)
	evidence(t, "invoice.payment_failed after invoice.paid", res.String(), after.since(before))
	if n := len(after.mails) - len(before.mails); n != 0 {
		t.Errorf("%d emails after the late failure, want none", n)
	}
	if s := after.invoices[invoiceID(1, "dun")]; s != "paid" {
		t.Errorf("invoice %s, want paid", s)
	}
}

// TestAttackFulfillmentUnset: with FULFILLMENT_URL unset, a paid checkout's
// fulfillment step is recorded skipped (in `server events show` and in
// webhook_step_outcomes_total), never silently dropped.
func TestAttackFulfillmentUnset(t *testing.T) {
	w := newWorld(t)
	env := w.env("FULFILLMENT_URL", "")
	p := startReceiver(t, "receiver", env)
	d := checkout(1, "nofulfil")
	res := mustPost(t, p.URL, d, 200)
	status, _ := w.stepState(t, d.StepKey(stepFulfillment))
	show := runServerCmd(t, env, "events", "show", d.Key)
	shown := ""
	for _, l := range strings.Split(show.Stdout, "\n") {
		if strings.Contains(l, "/"+stepFulfillment) {
			shown = strings.Join(strings.Fields(l), " ")
		}
	}
	counted := sample(metricsOf(t, p.URL+"/metrics").Text, "webhook_step_outcomes_total", `outcome="skipped"`, `step="fulfillment"`)
	evidence(t, "checkout with FULFILLMENT_URL unset", res.String(),
		fmt.Sprintf("fulfillment claim %s; events show: %q; skipped count %q", status, shown, counted))
	if status != "skipped" {
		t.Errorf("fulfillment step claim %s, want skipped", status)
	}
	if !strings.Contains(shown, "skipped") {
		t.Errorf("events show %s lists no skipped fulfillment step:\n%s%s", d.Key, show.Stdout, show.Stderr)
	}
	if counted != "1" {
		t.Errorf(`webhook_step_outcomes_total{outcome="skipped",step="fulfillment"} = %q, want 1`, counted)
	}
	if n := w.mailsByID()[messageID(d.Ref(stepConfirmation))]; n != 1 {
		t.Errorf("confirmation emails = %d, want 1", n)
	}
}
