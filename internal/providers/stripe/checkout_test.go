package stripe_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// The checkout return (GET /checkout/return) against the receiver's own
// processor, a fake of Stripe's API, a real SMTP server and a real
// fulfillment API.

const returnSuccess = "https://shop.example.com/thanks?session={CHECKOUT_SESSION_ID}"

// returnRig is a receiver with the return mounted, and the Stripe fake
// holding the paid session cs_test_ret.
type returnRig struct {
	r   *rt.Receiver
	api *stripetest.Server
}

func newReturnRig(t *testing.T, env ...rt.Option) *returnRig {
	t.Helper()
	api := stripetest.New(t, thinKey)
	opts := append([]rt.Option{rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", api.URL),
		rt.Env("CHECKOUT_SUCCESS_URL", returnSuccess), rt.Env("TRUSTED_PROXIES", "127.0.0.1/32")}, env...)
	g := &returnRig{r: rt.New(t, providers.List(), opts...), api: api}
	api.PutObject("/v1/checkout/sessions/cs_test_ret", "", returnSession("cs_test_ret", "paid"))
	return g
}

func returnSession(id, paymentStatus string) map[string]any {
	s := session(id, "buyer@example.com", 4200)
	s["payment_status"] = paymentStatus
	s["customer"] = "cus_test_ret"
	s["livemode"] = false
	return s
}

// returned is the receiver's answer to a return, and how long it took.
type returned struct {
	rt.Response
	Location string
	Took     time.Duration
}

// back sends GET /checkout/return?<query> from the client address client
// (X-Forwarded-For, which TRUSTED_PROXIES makes the client).
func (g *returnRig) back(t *testing.T, query, client string) returned {
	t.Helper()
	start := time.Now()
	res := g.r.Get(t, "/checkout/return?"+query, http.Header{"X-Forwarded-For": {client}})
	return returned{Response: res, Location: res.Header.Get("Location"), Took: time.Since(start)}
}

// completed is the checkout.session.completed event of cs_test_ret.
func (g *returnRig) completed() stripetest.Event {
	return g.api.Add("checkout.session.completed", time.Now(), returnSession("cs_test_ret", "paid"), true)
}

// sale is what one sale left: orders, emails and calls, and the distinct
// Message-IDs and Idempotency-Keys among them.
type sale struct{ Orders, Emails, Calls, MessageIDs, Keys int }

func (g *returnRig) sale(t *testing.T) sale {
	t.Helper()
	stepsSettled(t, g.r)
	s := sale{Orders: g.r.Count(t, `SELECT count(*) FROM orders WHERE external_id = 'cs_test_ret'`)}
	ids, keys := map[string]bool{}, map[string]bool{}
	for _, m := range g.r.SMTP.Messages() {
		s.Emails++
		ids[m.MessageID] = true
	}
	for _, c := range g.r.API.Requests() {
		s.Calls++
		keys[c.IdempotencyKey] = true
	}
	s.MessageIDs, s.Keys = len(ids), len(keys)
	return s
}

// TestCheckoutReturnAndEventMakeOneSale: the buyer's return and the
// session's checkout.session.completed, in either order, twice, or twenty
// at once, make one order, one confirmation and one fulfillment call, with
// the order's Message-ID and Idempotency-Key; every row of the return
// contains the session id; the buyer is sent to the success page.
func TestCheckoutReturnAndEventMakeOneSale(t *testing.T) {
	wantKey := fulfillment.IdempotencyKey("order:stripe:cs_test_ret/fulfillment")
	wantID := mail.MessageID("order:stripe:cs_test_ret/email.confirmation", "example.test")
	one := sale{Orders: 1, Emails: 1, Calls: 1, MessageIDs: 1, Keys: 1}
	cases := []struct {
		name string
		run  func(t *testing.T, g *returnRig)
	}{
		{"ReturnThenEvent", func(t *testing.T, g *returnRig) {
			g.mustRedirect(t, g.back(t, "session_id=cs_test_ret", "198.51.100.1"))
			g.deliver(t, g.completed())
		}},
		{"EventThenReturn", func(t *testing.T, g *returnRig) {
			g.deliver(t, g.completed())
			g.mustRedirect(t, g.back(t, "session_id=cs_test_ret", "198.51.100.1"))
		}},
		{"EachTwice", func(t *testing.T, g *returnRig) {
			ev := g.completed()
			g.mustRedirect(t, g.back(t, "session_id=cs_test_ret", "198.51.100.1"))
			g.deliver(t, ev)
			g.mustRedirect(t, g.back(t, "session_id=cs_test_ret", "198.51.100.2"))
			g.deliver(t, ev)
		}},
		{"TwentyAtOnce", func(t *testing.T, g *returnRig) {
			ev := g.completed()
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					<-start
					if i%2 == 0 {
						g.mustRedirect(t, g.back(t, "session_id=cs_test_ret", fmt.Sprintf("198.51.100.%d", i+1)))
						return
					}
					if res := g.r.Deliver(t, stripe.Spec, ev.Raw, nil); res.Status != 200 && res.Status != 503 {
						t.Errorf("delivery: %d %s", res.Status, res.Body)
					}
				})
			}
			close(start)
			wg.Wait()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newReturnRig(t)
			c.run(t, g)
			if got := g.sale(t); got != one {
				t.Errorf("%+v, want %+v", got, one)
			}
			if reqs := g.r.API.Requests(); len(reqs) > 0 && reqs[0].IdempotencyKey != wantKey {
				t.Errorf("Idempotency-Key %s, want the order's %s", reqs[0].IdempotencyKey, wantKey)
			}
			if msgs := g.r.SMTP.Messages(); len(msgs) > 0 && (msgs[0].MessageID != wantID || !strings.Contains(string(msgs[0].Data), "is confirmed")) {
				t.Errorf("email %s, want the order's confirmation %s", msgs[0].MessageID, wantID)
			}
			if n := g.r.Count(t, `SELECT count(*) FROM processed_events WHERE via = 'checkout_return' AND event_key NOT LIKE '%cs_test_ret%'`); n != 0 {
				t.Errorf("%d return rows without the session id in their key", n)
			}
			if n := g.r.Count(t, `SELECT count(*) FROM processed_events WHERE parent_key LIKE 'checkout_return:%' AND event_key NOT LIKE '%cs_test_ret%'`); n != 0 {
				t.Errorf("%d return step rows without the session id in their key", n)
			}
		})
	}
}

func (g *returnRig) deliver(t *testing.T, ev stripetest.Event) {
	t.Helper()
	if res := g.r.Deliver(t, stripe.Spec, ev.Raw, nil); res.Status != 200 {
		t.Fatalf("delivery of %s: %d %s", ev.ID, res.Status, res.Body)
	}
}

func (g *returnRig) mustRedirect(t *testing.T, res returned) {
	t.Helper()
	if want := strings.ReplaceAll(returnSuccess, "{CHECKOUT_SESSION_ID}", "cs_test_ret"); res.Status != http.StatusSeeOther || res.Location != want {
		t.Errorf("return answered %d to %q, want 303 to %s (%s)", res.Status, res.Location, want, res.Body)
	}
}

// sessionReads counts the fake's reads of Checkout Sessions.
func (g *returnRig) sessionReads() int {
	n := 0
	for _, r := range g.api.Requests() {
		if strings.HasPrefix(r.Path, "/v1/checkout/sessions/") {
			n++
		}
	}
	return n
}

// metric reads one series of the receiver's /metrics.
func (g *returnRig) metric(t *testing.T, series string) string {
	t.Helper()
	for line := range strings.Lines(g.r.Get(t, "/metrics", nil).Body) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestCheckoutReturnRefusals: what the return does with what it should not
// act on. A malformed id is 400 with no call; a session that is unpaid,
// unknown, of the other mode, or of a connected account not listed (no
// call) redirects and writes nothing; a client over its rate is 429; a
// reload after the sale makes no call.
func TestCheckoutReturnRefusals(t *testing.T) {
	g := newReturnRig(t)
	g.api.PutObject("/v1/checkout/sessions/cs_test_unpaid", "", returnSession("cs_test_unpaid", "unpaid"))
	live := returnSession("cs_test_live", "paid")
	live["livemode"] = true
	g.api.PutObject("/v1/checkout/sessions/cs_test_live", "", live)
	client := 0
	next := func() string { client++; return fmt.Sprintf("203.0.113.%d", client) }

	for _, q := range []string{"", "session_id=", "session_id=pi_123", "session_id=cs_test_../x", "session_id=cs_%00",
		"session_id=cs_a&session_id=cs_b", "session_id=cs_test_ret&account=nope", "session_id=" + strings.Repeat("a", 300)} {
		if res := g.back(t, q, next()); res.Status != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, res.Status)
		}
	}
	if n := g.sessionReads(); n != 0 {
		t.Errorf("malformed returns read %d sessions, want none", n)
	}
	for _, c := range []struct{ query, outcome string }{
		{"session_id=cs_test_unpaid", "unpaid"},
		{"session_id=cs_test_nosuch", "unknown"},
		{"session_id=cs_test_live", "ignored"},
		{"session_id=cs_test_ret&account=acct_notlisted", "ignored"},
	} {
		series := `checkout_returns_total{outcome="` + c.outcome + `"}`
		before := g.metric(t, series)
		res := g.back(t, c.query, next())
		id, _, _ := strings.Cut(strings.TrimPrefix(c.query, "session_id="), "&")
		if want := strings.ReplaceAll(returnSuccess, "{CHECKOUT_SESSION_ID}", id); res.Status != http.StatusSeeOther || res.Location != want {
			t.Errorf("?%s: %d to %q, want 303 to %s", c.query, res.Status, res.Location, want)
		}
		if after := g.metric(t, series); after == before {
			t.Errorf("?%s: %s = %s, not counted", c.query, series, after)
		}
	}
	if n := g.sessionReads(); n != 3 {
		t.Errorf("%d session reads, want 3 (none for an account not listed)", n)
	}
	if n := g.r.Count(t, `SELECT count(*) FROM processed_events`) + g.r.Count(t, `SELECT count(*) FROM orders`); n != 0 {
		t.Errorf("%d rows written for sessions not acted on", n)
	}

	t.Run("Throttled", func(t *testing.T) {
		var codes []int
		for range 8 {
			codes = append(codes, g.back(t, "session_id=cs_test_unpaid", "192.0.2.7").Status)
		}
		res := g.back(t, "session_id=cs_test_unpaid", "192.0.2.7")
		if res.Status != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Errorf("after %v: %d (Retry-After %q), want 429 with Retry-After", codes, res.Status, res.Header.Get("Retry-After"))
		}
		if res := g.back(t, "session_id=cs_test_unpaid", "192.0.2.8"); res.Status != http.StatusSeeOther {
			t.Errorf("another client: %d, want 303", res.Status)
		}
	})
	t.Run("ReloadAfterTheSaleMakesNoCall", func(t *testing.T) {
		g.mustRedirect(t, g.back(t, "session_id=cs_test_ret", "192.0.2.20"))
		before := g.sessionReads()
		for i := range 3 {
			g.mustRedirect(t, g.back(t, "session_id=cs_test_ret", fmt.Sprintf("192.0.2.%d", 21+i)))
		}
		if n := g.sessionReads() - before; n != 0 {
			t.Errorf("reloads read the session %d times, want 0", n)
		}
		if got := g.metric(t, `checkout_returns_total{outcome="known"}`); got != "3" {
			t.Errorf(`checkout_returns_total{outcome="known"} = %s, want 3`, got)
		}
	})
}

// TestCheckoutReturnWhenStripeFails: a Stripe API that answers 500, or
// hangs, does not keep the buyer: redirected within a few seconds, nothing
// written, counted as api_failed; the webhook makes the sale later.
func TestCheckoutReturnWhenStripeFails(t *testing.T) {
	for _, c := range []struct {
		name   string
		break_ func(*stripetest.Server)
	}{
		{"500", func(s *stripetest.Server) { s.FailNext(http.StatusInternalServerError, 10) }},
		{"Hangs", func(s *stripetest.Server) { s.HangNext(10) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newReturnRig(t)
			c.break_(g.api)
			res := g.back(t, "session_id=cs_test_ret", "198.51.100.9")
			g.mustRedirect(t, res)
			t.Logf("redirected after %v (the read's bound: %v)", res.Took.Round(time.Millisecond), stripe.ReturnReadTimeout)
			if limit := 3 * stripe.ReturnReadTimeout; res.Took > limit {
				t.Errorf("redirected after %v, want within %v", res.Took, limit)
			}
			if got := g.metric(t, `checkout_returns_total{outcome="api_failed"}`); got != "1" {
				t.Errorf(`checkout_returns_total{outcome="api_failed"} = %s, want 1`, got)
			}
			if n := g.r.Count(t, `SELECT count(*) FROM processed_events`) + g.r.Count(t, `SELECT count(*) FROM orders`); n != 0 {
				t.Errorf("%d rows written", n)
			}
			g.deliver(t, g.completed())
			if got, want := g.sale(t), (sale{Orders: 1, Emails: 1, Calls: 1, MessageIDs: 1, Keys: 1}); got != want {
				t.Errorf("after the webhook: %+v, want %+v", got, want)
			}
		})
	}
}

// TestCheckoutSuccessURLChecked: CHECKOUT_SUCCESS_URL is an absolute
// https:// URL (http:// to a loopback host), with the placeholder anywhere.
func TestCheckoutSuccessURLChecked(t *testing.T) {
	var check func(string) error
	for _, v := range stripe.Spec.Vars {
		if v.Name == "CHECKOUT_SUCCESS_URL" {
			check = v.Check
		}
	}
	if check == nil {
		t.Fatal("the Stripe Spec has no CHECKOUT_SUCCESS_URL")
	}
	for v, ok := range map[string]bool{
		returnSuccess: true, "https://shop.example.com/thanks/{CHECKOUT_SESSION_ID}": true, "http://127.0.0.1:3000/thanks": true,
		"http://shop.example.com/thanks": false, "/thanks": false, "shop.example.com": false, "javascript:alert(1)": false,
	} {
		if err := check(v); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", v, err, ok)
		}
	}
}
