package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
)

// The checkout return (GET /checkout/return) against the built binary: the
// buyer's return and the session's checkout.session.completed, in either
// order, at once, and with the receiver SIGKILLed between them.

const (
	returnAPIKey  = "sk_test_e2e_checkout_return"
	returnSuccess = "https://shop.example.test/thanks?session={CHECKOUT_SESSION_ID}"
	returnSession = "cs_test_e2e_return"
)

// returnRig is a world, the Stripe fake holding the paid session, and the
// environment of a receiver that mounts the return.
type returnRig struct {
	w   *world
	api *stripetest.Server
	env map[string]string
	ev  delivery // the session's checkout.session.completed
}

func newReturnRig(t *testing.T) *returnRig {
	t.Helper()
	w := newWorld(t)
	api := stripetest.New(t, returnAPIKey)
	session := map[string]any{"id": returnSession, "object": "checkout.session", "mode": "payment", "status": "complete",
		"payment_status": "paid", "amount_total": 4200, "currency": "usd", "payment_intent": "pi_test_e2e_return",
		"customer": "cus_test_e2e_return", "customer_details": map[string]any{"email": "returning@example.test"},
		"customer_email": nil, "livemode": false}
	api.PutObject("/v1/checkout/sessions/"+returnSession, "", session)
	ev := api.Add("checkout.session.completed", time.Now(), session, true)
	env := w.env("STRIPE_API_KEY", returnAPIKey, "STRIPE_API_BASE", api.URL, "CHECKOUT_SUCCESS_URL", returnSuccess,
		"TRUSTED_PROXIES", "127.0.0.1/32")
	return &returnRig{w: w, api: api, env: env, ev: stripeDelivery(ev.ID, ev.Raw)}
}

// back sends the buyer's return to the receiver at base, from client.
func (g *returnRig) back(t *testing.T, base, client string) {
	t.Helper()
	res, err := g.send(base, client)
	if err != nil {
		t.Errorf("return: %v", err)
		return
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	want := strings.ReplaceAll(returnSuccess, "{CHECKOUT_SESSION_ID}", returnSession)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
		t.Errorf("return: %d to %q, want 303 to %s", res.StatusCode, res.Header.Get("Location"), want)
	}
}

// send sends the buyer's return, and answers what came back.
func (g *returnRig) send(base, client string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, base+"/checkout/return?session_id="+returnSession, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Forwarded-For", client)
	cl := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return cl.Do(req)
}

// row is one line of the race table: what one sequence left.
func (g *returnRig) row(t *testing.T, name string) string {
	t.Helper()
	g.w.waitSettled(t, 30*time.Second)
	mails, calls := g.w.mailsByID(), g.w.fulfillmentsByKey()
	emails, requests := 0, 0
	for _, n := range mails {
		emails += n
	}
	for _, n := range calls {
		requests += n
	}
	orders := count(t, g.w.DB, `SELECT count(*) FROM orders WHERE external_id = $1`, returnSession)
	wantID, wantKey := messageID("order:stripe:"+returnSession+"/email.confirmation"), idemKey("order:stripe:"+returnSession+"/fulfillment")
	if orders != 1 || len(mails) != 1 || mails[wantID] == 0 || len(calls) != 1 || calls[wantKey] == 0 {
		t.Errorf("%s: %d orders, emails by Message-ID %v, calls by Idempotency-Key %v; want one order, and the order's one "+
			"Message-ID (%s) and Idempotency-Key (%s)", name, orders, mails, calls, wantID, wantKey)
	}
	if n := count(t, g.w.DB, `SELECT count(*) FROM processed_events WHERE (via = 'checkout_return' OR parent_key LIKE 'checkout_return:%')
  AND event_key NOT LIKE '%`+returnSession+`%'`); n != 0 {
		t.Errorf("%s: %d rows of the return without the session id in their key", name, n)
	}
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%d\t%d", name, orders, emails, len(mails), requests, len(calls),
		count(t, g.w.DB, `SELECT count(*) FROM processed_events WHERE via = 'checkout_return'`))
}

// killDuring runs first against a receiver while the fulfillment API holds
// every call, waits until the sale's call is held and its email is done,
// SIGKILLs the receiver, releases the API, restarts the receiver and
// returns it.
func (g *returnRig) killDuring(t *testing.T, first func(base string)) *proc {
	t.Helper()
	p := startReceiver(t, "first", g.env)
	release := g.w.API.Hold()
	done := make(chan struct{})
	go func() { defer close(done); first(p.URL) }()
	g.w.API.WaitHeld(t, 1, 30*time.Second)
	waitFor(t, 30*time.Second, "the confirmation email's step to be done", func() bool {
		return count(t, g.w.DB, `SELECT count(*) FROM processed_events WHERE step = 'email.confirmation' AND status = 'done'`) == 1
	})
	p.Kill()
	release()
	<-done
	return startReceiver(t, "restarted", g.env)
}

// TestCheckoutReturnRace: whichever of the buyer's return and the session's
// event comes first, both at once from 20 goroutines, and with the
// receiver killed between them (during the first's fulfillment call, or
// after the first finished): one order, one confirmation (one Message-ID),
// one fulfillment call's Idempotency-Key; a call cut off by the kill is
// made again under the same key.
func TestCheckoutReturnRace(t *testing.T) {
	if externalBin {
		t.Skip("a binary from " + serverBinEnv + " may predate the checkout return")
	}
	ctx := context.Background()
	var rows []string
	for _, c := range []struct {
		name string
		run  func(t *testing.T, g *returnRig)
	}{
		{"return, then event", func(t *testing.T, g *returnRig) {
			p := startReceiver(t, "receiver", g.env)
			g.back(t, p.URL, "198.51.100.1")
			mustPost(t, p.URL, g.ev, http.StatusOK)
		}},
		{"event, then return", func(t *testing.T, g *returnRig) {
			p := startReceiver(t, "receiver", g.env)
			mustPost(t, p.URL, g.ev, http.StatusOK)
			g.back(t, p.URL, "198.51.100.1")
		}},
		{"10 returns and 10 events at once", func(t *testing.T, g *returnRig) {
			p := startReceiver(t, "receiver", g.env)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					<-start
					if i%2 == 0 {
						g.back(t, p.URL, fmt.Sprintf("198.51.100.%d", i+1))
						return
					}
					if res, err := post(ctx, p.URL, g.ev); err != nil || (res.Status != 200 && res.Status != 503) {
						t.Errorf("event: %d %v", res.Status, err)
					}
				})
			}
			close(start)
			wg.Wait()
		}},
		{"return, kill during its call, restart, event", func(t *testing.T, g *returnRig) {
			// The buyer's browser sees its connection drop with the kill.
			p := g.killDuring(t, func(base string) {
				if res, err := g.send(base, "198.51.100.1"); err == nil {
					res.Body.Close()
				}
			})
			mustPost(t, p.URL, g.ev, http.StatusOK)
		}},
		{"event, kill during its call, restart, return", func(t *testing.T, g *returnRig) {
			p := g.killDuring(t, func(base string) { _, _ = post(ctx, base, g.ev) })
			g.back(t, p.URL, "198.51.100.1")
			// Stripe retries the event it got no answer to; the redriver
			// finishes its call once the dead worker's lease has run out.
			g.w.waitSettled(t, 30*time.Second)
			mustPost(t, p.URL, g.ev, http.StatusOK)
		}},
		{"return done, kill, restart, event", func(t *testing.T, g *returnRig) {
			p := startReceiver(t, "first", g.env)
			g.back(t, p.URL, "198.51.100.1")
			g.w.waitSettled(t, 30*time.Second)
			p.Kill()
			p = startReceiver(t, "restarted", g.env)
			mustPost(t, p.URL, g.ev, http.StatusOK)
			g.back(t, p.URL, "198.51.100.2")
		}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			g := newReturnRig(t)
			c.run(t, g)
			rows = append(rows, g.row(t, c.name))
		})
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER OF ARRIVAL × KILLS\tORDERS\tEMAILS\tMESSAGE-IDS\tCALLS\tIDEMPOTENCY-KEYS\tRETURN CLAIMS")
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	_ = tw.Flush()
	t.Log("\n" + b.String())
}
