package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/entitlements/entitlementstest"
)

// The entitlements of every provider through the built binary: the
// catalogue below, a fake app that verifies each call's signature and keeps
// the highest version it accepted, and Stripe's API faked for a Checkout
// Session's line items.

const (
	entAdminToken = "e2e-entitlements-admin-token-0123456789"
	entAPIToken   = "e2e-entitlements-api-token-0123456789ab"
	entCatalogue  = `# e2e catalogue
grace: 72h
entitlements:
  pro:
    stripe: [price_pro, prod_pro_once]
    paddle: [pri_pro, pro_once]
    polar: [prod-pro-sub, prod-pro-once]
    github_marketplace: ["4242"]
`
)

// entWorld is a receiver with entitlements on, and what it talks to.
type entWorld struct {
	*world
	app   *entitlementstest.App
	p     *proc
	env   map[string]string
	admin string // the console's base URL (the read API)
}

func newEntWorld(t *testing.T, extra ...string) *entWorld {
	t.Helper()
	w := newWorld(t)
	app := entitlementstest.New(t, fulfillmentSecret)
	dir := t.TempDir()
	file := filepath.Join(dir, "entitlements.yaml")
	if err := os.WriteFile(file, []byte(entCatalogue), 0o600); err != nil {
		t.Fatal(err)
	}
	// Stripe's API: a Checkout Session's line items, a one-off pro.
	stripeAPI := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/checkout/sessions/") || !strings.HasSuffix(r.URL.Path, "/line_items") {
			http.Error(rw, `{"error":{"type":"invalid_request_error","message":"no such path"}}`, http.StatusNotFound)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, `{"object":"list","data":[{"id":"li_1","object":"item","price":{"id":"price_once","product":"prod_pro_once"},"quantity":1}],"has_more":false}`)
	}))
	t.Cleanup(stripeAPI.Close)
	env := w.env(append([]string{
		"ENTITLEMENTS_FILE", file, "FULFILLMENT_URL", app.URL(),
		"PADDLE_WEBHOOK_SECRET", paddleSecret, "PADDLE_SIGNATURE_TOLERANCE", "1m", "POLAR_WEBHOOK_SECRET", polarSecret,
		"STRIPE_API_KEY", "sk_test_e2eentitlements0123456789", "STRIPE_API_BASE", stripeAPI.URL,
		"ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", entAdminToken, "API_TOKEN", entAPIToken,
		"LEASE_DURATION", "5s", "REDRIVE_INTERVAL", "200ms",
	}, extra...)...)
	p := startReceiver(t, "entitlements", env)
	return &entWorld{world: w, app: app, p: p, env: env, admin: consoleAdminURL(t, p)}
}

// ask is GET /api/entitlements/<subject> with token.
func (e *entWorld) ask(t *testing.T, subject, token string) (int, entitlements.Body, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.admin+"/api/entitlements/"+subject, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := shortClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(res.Body).Decode(&raw)
	var b entitlements.Body
	_ = json.Unmarshal(raw, &b)
	return res.StatusCode, b, string(raw)
}

// settle waits until every step is finished and the app accepted each
// subject's latest version (or the subject has none).
func (e *entWorld) settle(t *testing.T, subjects ...string) {
	t.Helper()
	e.waitSettled(t, 60*time.Second)
	for _, s := range subjects {
		waitFor(t, 60*time.Second, "the app to accept "+s+"'s latest version", func() bool {
			_, b, _ := e.ask(t, s, entAPIToken)
			return e.app.Accepted(s).Version == b.Version
		})
	}
}

// deliverAll posts each delivery once; every answer must be 200.
func (e *entWorld) deliverAll(t *testing.T, ds []delivery) {
	t.Helper()
	for _, d := range ds {
		mustPost(t, e.p.URL, d, 200)
	}
}

// setText is an entitlements set as a short text: "pro:active", "pro:grace<until>", "[]".
func setText(es []entitlements.Entitlement) string {
	if len(es) == 0 {
		return "[]"
	}
	var parts []string
	for _, x := range es {
		s := x.Key + ":" + x.State
		if x.Until != nil {
			s += " until " + x.Until.UTC().Format("01-02 15:04")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// ---------------------------------------------------------------------------
// The lifecycles, each provider's events of one subscription (or purchase).

// stage is how far a subscription's life has gone.
type stage struct {
	name string
	// want is the final set, as setText writes it (with now: the run's time).
	want func(now time.Time) string
}

var stages = []stage{
	{"trial", func(time.Time) string { return "pro:active" }},
	{"active", func(time.Time) string { return "pro:active" }},
	{"past_due_in_grace", func(now time.Time) string {
		return "pro:grace until " + now.Add(-time.Hour).Add(72*time.Hour).UTC().Format("01-02 15:04")
	}},
	{"past_due_after_grace", func(time.Time) string { return "[]" }},
	{"cancel_at_period_end", func(now time.Time) string {
		return "pro:active until " + now.Add(10*24*time.Hour).UTC().Format("01-02 15:04")
	}},
	{"deleted", func(time.Time) string { return "[]" }},
	{"purchase", func(time.Time) string { return "pro:active" }},
}

// life is a subscription's states in time: status, when, and flags.
type state struct {
	status string
	at     time.Time
	cancel bool // cancel at period end
	ended  bool // the event that ends it (Stripe deleted, Paddle canceled, Polar revoked)
}

// statesOf are the states of a stage's history; now is the run's time.
func statesOf(st string, now time.Time) []state {
	h := func(d time.Duration) time.Time { return now.Add(-d).Truncate(time.Second) }
	base := []state{{"trialing", h(100 * time.Hour), false, false}}
	if st == "trial" {
		return base
	}
	base = append(base, state{"active", h(95 * time.Hour), false, false})
	switch st {
	case "active":
		return base
	case "past_due_in_grace":
		return append(base, state{"past_due", h(time.Hour), false, false})
	case "past_due_after_grace":
		return append(base, state{"past_due", h(80 * time.Hour), false, false})
	case "cancel_at_period_end":
		return append(base, state{"active", h(time.Hour), true, false})
	case "deleted":
		return append(base, state{"active", h(2 * time.Hour), true, false}, state{"canceled", h(time.Hour), false, true})
	}
	panic(st)
}

// lifecycle makes the deliveries of provider's stage for the subject's
// ids (tag), and returns the subject the app knows it by.
func lifecycle(provider, st, tag string, now time.Time) ([]delivery, string) {
	user := "u-" + tag
	periodEnd := now.Add(10 * 24 * time.Hour).Truncate(time.Second)
	var out []delivery
	if st == "purchase" {
		switch provider {
		case "stripe":
			out = append(out, stripeDelivery("evt_"+tag+"_cs", mustJSON(stripeEventBody("evt_"+tag+"_cs", "checkout.session.completed", now.Add(-time.Minute),
				map[string]any{"id": "cs_" + tag, "object": "checkout.session", "mode": "payment", "payment_status": "paid",
					"customer": nil, "client_reference_id": user, "amount_total": 4900, "currency": "usd",
					"payment_intent": "pi_" + tag, "customer_details": map[string]any{"email": "buyer@example.com"}}))))
		case "paddle":
			out = append(out, paddleDelivery("evt_"+tag+"_tx", "transaction.completed", now.Add(-time.Minute).Format(time.RFC3339),
				map[string]any{"id": "txn_" + tag, "status": "completed", "customer_id": "ctm_" + tag, "currency_code": "USD",
					"subscription_id": nil, "custom_data": map[string]any{"app_user_id": user},
					"items":   []any{map[string]any{"price": map[string]any{"id": "pri_once", "product_id": "pro_once"}, "quantity": 1}},
					"details": map[string]any{"totals": map[string]any{"grand_total": "4900"}}}))
		case "polar":
			body := mustJSON(map[string]any{"type": "order.paid", "timestamp": now.Add(-time.Minute).UTC().Format(time.RFC3339Nano),
				"data": map[string]any{"id": "ord-" + tag, "status": "paid", "total_amount": 4900, "refunded_amount": 0,
					"refunded_tax_amount": 0, "currency": "usd", "customer_id": "cust-" + tag, "subscription_id": nil,
					"product_id": "prod-pro-once", "customer": map[string]any{"id": "cust-" + tag, "email": "b@example.com", "external_id": user}}})
			out = append(out, polarDelivery("wh-"+tag+"-ord", body, polarSecret))
		case "github":
			account := int64(len(tag))*1000 + int64(rand.IntN(1000))
			body := mustJSON(map[string]any{"action": "purchased", "effective_date": now.Add(-time.Minute).UTC().Format(time.RFC3339),
				"sender": map[string]any{"login": "octo"},
				"marketplace_purchase": map[string]any{"account": map[string]any{"id": account, "login": "acme-" + tag, "type": "Organization",
					"organization_billing_email": "billing@example.com"}, "billing_cycle": "monthly", "unit_count": 1,
					"plan": map[string]any{"id": 4242, "name": "Pro", "monthly_price_in_cents": 1000, "yearly_price_in_cents": 10000,
						"price_model": "flat-rate"}}})
			out = append(out, githubDelivery("marketplace_purchase", "guid-"+tag, body))
			return out, fmt.Sprintf("github:%d", account)
		}
		return out, user
	}
	for i, s := range statesOf(st, now) {
		id := fmt.Sprintf("%s_%d", tag, i)
		switch provider {
		case "stripe":
			typ := "customer.subscription.updated"
			if i == 0 {
				typ = "customer.subscription.created"
			}
			if s.ended {
				typ = "customer.subscription.deleted"
			}
			out = append(out, stripeDelivery("evt_"+id, mustJSON(stripeEventBody("evt_"+id, typ, s.at, map[string]any{
				"id": "sub_" + tag, "object": "subscription", "customer": "cus_" + tag, "status": s.status,
				"cancel_at_period_end": s.cancel, "current_period_end": periodEnd.Unix(),
				"metadata": map[string]any{"app_user_id": user},
				"items": map[string]any{"object": "list", "data": []any{map[string]any{"id": "si_" + tag, "quantity": 1,
					"price": map[string]any{"id": "price_pro", "product": "prod_pro"}}}}}))))
		case "paddle":
			typ := map[string]string{"trialing": "subscription.trialing", "active": "subscription.updated", "past_due": "subscription.past_due",
				"canceled": "subscription.canceled"}[s.status]
			var change any
			if s.cancel {
				change = map[string]any{"action": "cancel", "effective_at": periodEnd.Format(time.RFC3339)}
			}
			out = append(out, paddleDelivery("evt_"+id, typ, s.at.Format(time.RFC3339), map[string]any{
				"id": "sub_" + tag, "status": s.status, "customer_id": "ctm_" + tag, "scheduled_change": change,
				"custom_data":            map[string]any{"app_user_id": user},
				"current_billing_period": map[string]any{"starts_at": now.Add(-20 * 24 * time.Hour).Format(time.RFC3339), "ends_at": periodEnd.Format(time.RFC3339)},
				"items":                  []any{map[string]any{"price": map[string]any{"id": "pri_pro", "product_id": "pro_pro"}, "quantity": 1}}}))
		case "polar":
			typ := map[string]string{"trialing": "subscription.created", "active": "subscription.active", "past_due": "subscription.past_due",
				"canceled": "subscription.revoked"}[s.status]
			if s.cancel {
				typ = "subscription.canceled"
			}
			data := map[string]any{"id": "psub-" + tag, "status": s.status, "customer_id": "cust-" + tag, "product_id": "prod-pro-sub",
				"created_at": now.Add(-101 * time.Hour).UTC().Format(time.RFC3339Nano), "modified_at": s.at.UTC().Format(time.RFC3339Nano),
				"current_period_end": periodEnd.UTC().Format(time.RFC3339Nano), "cancel_at_period_end": s.cancel,
				"customer": map[string]any{"id": "cust-" + tag, "email": "p@example.com", "external_id": user}}
			if s.ended {
				data["ended_at"] = s.at.UTC().Format(time.RFC3339Nano)
			}
			body := mustJSON(map[string]any{"type": typ, "timestamp": s.at.UTC().Format(time.RFC3339Nano), "data": data})
			out = append(out, polarDelivery("wh-"+id, body, polarSecret))
		}
	}
	return out, user
}

func stripeEventBody(id, typ string, at time.Time, obj map[string]any) map[string]any {
	return map[string]any{"id": id, "object": "event", "api_version": "2023-10-16", "created": at.Unix(), "livemode": false,
		"type": typ, "data": map[string]any{"object": obj}}
}

// TestEntitlementsLifecycles delivers, for every provider, a purchase and
// a subscription's life (trial, active, past_due within and after the
// grace, canceled at period end, deleted) in three orders (as they
// happened, and two shuffles), each twice: every order ends with the same
// set, the second pass changes no version, and the app, which verifies
// every call, accepted the receiver's latest version, never an older one
// after a newer.
func TestEntitlementsLifecycles(t *testing.T) {
	e := newEntWorld(t)
	now := time.Now()
	type row struct {
		provider, stage, order, subject, set string
		v1, v2, accepted                     int64
	}
	var rows []row
	for _, provider := range []string{"stripe", "paddle", "polar", "github"} {
		for _, st := range stages {
			if provider == "github" && st.name != "purchase" {
				continue // a Marketplace plan is a purchase, paid or cancelled
			}
			for oi, order := range []string{"as-happened", "shuffled-1", "shuffled-2"} {
				tag := fmt.Sprintf("%s-%s-%d", provider[:2], strings.ReplaceAll(st.name, "_", ""), oi)
				ds, subject := lifecycle(provider, st.name, tag, now)
				if oi > 0 {
					r := rand.New(rand.NewPCG(uint64(oi), 37))
					r.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
				}
				e.deliverAll(t, ds)
				e.settle(t, subject)
				_, b1, _ := e.ask(t, subject, entAPIToken)
				// Twice: another order of the same deliveries.
				slices.Reverse(ds)
				e.deliverAll(t, ds)
				e.settle(t, subject)
				_, b2, _ := e.ask(t, subject, entAPIToken)
				rows = append(rows, row{provider, st.name, order, subject, setText(b2.Entitlements), b1.Version, b2.Version,
					e.app.Accepted(subject).Version})
				if got, want := setText(b2.Entitlements), st.want(now); got != want {
					t.Errorf("%s %s %s: %s, want %s", provider, st.name, order, got, want)
				}
				if b1.Version != b2.Version || b1.Version != e.app.Accepted(subject).Version {
					t.Errorf("%s %s %s: version %d after the first pass, %d after the second, %d accepted by the app",
						provider, st.name, order, b1.Version, b2.Version, e.app.Accepted(subject).Version)
				}
				if got := setText(e.app.Accepted(subject).Entitlements); got != setText(b2.Entitlements) {
					t.Errorf("%s %s %s: the app holds %s, the API answers %s", provider, st.name, order, got, setText(b2.Entitlements))
				}
				checkNoOlderAfterAccepted(t, e.app, subject)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| provider | lifecycle | order | subject | final entitlements | version after 1st pass | after 2nd | last accepted by the app |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %d | %d |\n", r.provider, r.stage, r.order, r.subject, r.set, r.v1, r.v2, r.accepted)
	}
	t.Log(b.String())
	for _, c := range e.app.Calls() {
		if c.SignatureError != "" {
			t.Errorf("a call for %s v%d failed the app's signature check: %s", c.Body.Subject, c.Body.Version, c.SignatureError)
		}
	}
}

// checkNoOlderAfterAccepted fails when the app was sent a version of
// subject lower than one it had answered 2xx before.
func checkNoOlderAfterAccepted(t *testing.T, app *entitlementstest.App, subject string) {
	t.Helper()
	var high int64
	for _, c := range app.CallsOf(subject) {
		if c.Body.Version < high {
			t.Errorf("%s: version %d sent after version %d was accepted", subject, c.Body.Version, high)
		}
		if c.Status/100 == 2 {
			high = max(high, c.Body.Version)
		}
	}
}

// TestEntitlementsMoves: a link after the subscription's events moves the
// entitlements (the provider-keyed subject is told an empty set); a
// partial refund keeps a purchase's, a full refund and a lost dispute end
// them; a grace ends without any event; the app answering 500 then 200
// accepts one version and is never sent an older one after it; and the
// API answers with API_TOKEN only.
func TestEntitlementsMoves(t *testing.T) {
	e := newEntWorld(t)
	now := time.Now()
	ask := func(subject string) string {
		t.Helper()
		_, b, _ := e.ask(t, subject, entAPIToken)
		return setText(b.Entitlements)
	}

	t.Run("LinkAfterSubscription", func(t *testing.T) {
		ds, _ := lifecycle("stripe", "active", "link", now)
		// The subscription carries no app user: its customer's subject.
		for i := range ds {
			var ev map[string]any
			_ = json.Unmarshal(ds[i].Body, &ev)
			delete(ev["data"].(map[string]any)["object"].(map[string]any), "metadata")
			ds[i] = stripeDelivery(ds[i].ID, mustJSON(ev))
		}
		e.deliverAll(t, ds)
		e.settle(t, "stripe:cus_link")
		if got := ask("stripe:cus_link"); got != "pro:active" {
			t.Fatalf("stripe:cus_link before the link: %s", got)
		}
		link := stripeDelivery("evt_link_cs", mustJSON(stripeEventBody("evt_link_cs", "checkout.session.completed", now.Add(-94*time.Hour),
			map[string]any{"id": "cs_link", "object": "checkout.session", "mode": "subscription", "payment_status": "paid",
				"customer": "cus_link", "subscription": "sub_link", "client_reference_id": "user-link", "amount_total": 2000,
				"currency": "usd", "customer_details": map[string]any{"email": "link@example.com"}})))
		mustPost(t, e.p.URL, link, 200)
		e.settle(t, "stripe:cus_link", "user-link")
		if got := ask("user-link"); got != "pro:active" {
			t.Errorf("user-link after the link: %s, want pro:active", got)
		}
		if got, v := ask("stripe:cus_link"), e.app.Accepted("stripe:cus_link"); got != "[]" || len(v.Entitlements) != 0 || v.Version < 2 {
			t.Errorf("stripe:cus_link after the link: %s (the app holds v%d %s), want [] announced", got, v.Version, setText(v.Entitlements))
		}
	})

	t.Run("Refunds", func(t *testing.T) {
		buy := func(tag string) {
			ds, _ := lifecycle("stripe", "purchase", tag, now)
			e.deliverAll(t, ds)
			e.settle(t, "u-"+tag)
			if got := ask("u-" + tag); got != "pro:active" {
				t.Fatalf("u-%s after the purchase: %s", tag, got)
			}
		}
		charge := func(tag string, refunded int, i int) delivery {
			id := fmt.Sprintf("evt_%s_ref%d", tag, i)
			return stripeDelivery(id, mustJSON(stripeEventBody(id, "charge.refunded", now.Add(time.Duration(i)*time.Second), map[string]any{
				"id": "ch_" + tag, "object": "charge", "payment_intent": "pi_" + tag, "amount": 4900, "amount_refunded": refunded,
				"currency": "usd", "refunded": refunded == 4900})))
		}
		buy("refund")
		mustPost(t, e.p.URL, charge("refund", 1000, 1), 200)
		e.settle(t, "u-refund")
		if got := ask("u-refund"); got != "pro:active" {
			t.Errorf("after a partial refund: %s, want pro:active", got)
		}
		mustPost(t, e.p.URL, charge("refund", 4900, 2), 200)
		e.settle(t, "u-refund")
		if got := ask("u-refund"); got != "[]" {
			t.Errorf("after a full refund: %s, want []", got)
		}
		buy("dispute")
		mustPost(t, e.p.URL, stripeDelivery("evt_dispute_lost", mustJSON(stripeEventBody("evt_dispute_lost", "charge.dispute.closed", now,
			map[string]any{"id": "dp_dispute", "object": "dispute", "amount": 4900, "currency": "usd", "charge": "ch_dispute",
				"payment_intent": "pi_dispute", "reason": "fraudulent", "status": "lost"}))), 200)
		e.settle(t, "u-dispute")
		if got := ask("u-dispute"); got != "[]" {
			t.Errorf("after a lost dispute: %s, want []", got)
		}
	})

	t.Run("GraceEndsWithoutEvent", func(t *testing.T) {
		ds, _ := lifecycle("stripe", "active", "graceend", now)
		pd := stripeEventBody("evt_graceend_pd", "customer.subscription.updated", now.Add(-72*time.Hour+6*time.Second), map[string]any{
			"id": "sub_graceend", "object": "subscription", "customer": "cus_graceend", "status": "past_due",
			"current_period_end": now.Add(240 * time.Hour).Unix(), "metadata": map[string]any{"app_user_id": "u-graceend"},
			"items": map[string]any{"data": []any{map[string]any{"price": map[string]any{"id": "price_pro", "product": "prod_pro"}, "quantity": 1}}}})
		ds = append(ds, stripeDelivery("evt_graceend_pd", mustJSON(pd)))
		e.deliverAll(t, ds)
		e.settle(t, "u-graceend")
		if got := ask("u-graceend"); !strings.HasPrefix(got, "pro:grace") {
			t.Fatalf("u-graceend in its grace: %s", got)
		}
		before := e.app.Accepted("u-graceend").Version
		waitFor(t, 90*time.Second, "the grace to end without any event", func() bool {
			return ask("u-graceend") == "[]" && e.app.Accepted("u-graceend").Version > before
		})
		t.Logf("u-graceend: grace ended by the job; the app accepted v%d (was v%d) with []", e.app.Accepted("u-graceend").Version, before)
	})

	t.Run("App500Then200", func(t *testing.T) {
		e.app.Fail("u-retry", 500, 500)
		ds, _ := lifecycle("stripe", "cancel_at_period_end", "retry", now)
		for _, d := range ds {
			// A failed call is a failed step: 500 to the sender, which
			// retries; the redriver finishes it meanwhile.
			if _, err := post(context.Background(), e.p.URL, d); err != nil {
				t.Fatal(err)
			}
		}
		e.settle(t, "u-retry")
		calls := e.app.CallsOf("u-retry")
		var seen []string
		for _, c := range calls {
			seen = append(seen, fmt.Sprintf("v%d→%d", c.Body.Version, c.Status))
		}
		t.Logf("the app's calls for u-retry, in order: %s", strings.Join(seen, ", "))
		checkNoOlderAfterAccepted(t, e.app, "u-retry")
		accepted := 0
		for _, c := range calls {
			if c.Status/100 == 2 {
				accepted++
			}
		}
		_, b, _ := e.ask(t, "u-retry", entAPIToken)
		if accepted != 1 || e.app.Accepted("u-retry").Version != b.Version {
			t.Errorf("u-retry: %d versions accepted (want 1, the latest, v%d); the app holds v%d", accepted, b.Version, e.app.Accepted("u-retry").Version)
		}
	})

	t.Run("API", func(t *testing.T) {
		for _, s := range []string{"u-graceend", "user-link", "stripe:cus_link", "u-never-seen"} {
			status, _, raw := e.ask(t, s, entAPIToken)
			t.Logf("GET /api/entitlements/%s → %d %s", s, status, raw)
			if status != 200 {
				t.Errorf("%s: %d", s, status)
			}
		}
		if status, _, _ := e.ask(t, "user-link", ""); status != 401 {
			t.Errorf("without a token: %d, want 401", status)
		}
		if status, _, _ := e.ask(t, "user-link", entAdminToken); status != 401 {
			t.Errorf("with ADMIN_TOKEN: %d, want 401", status)
		}
		req, _ := http.NewRequest(http.MethodGet, e.admin+"/entitlements/user-link", nil)
		req.Header.Set("Authorization", "Bearer "+entAPIToken)
		req.Header.Set("Accept", "application/json")
		res, err := shortClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Errorf("the console with API_TOKEN: %d, want 401", res.StatusCode)
		}
		req.Header.Set("Authorization", "Bearer "+entAdminToken)
		res, err = shortClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var shown entitlements.Shown
		_ = json.NewDecoder(res.Body).Decode(&shown)
		res.Body.Close()
		if res.StatusCode != 200 || len(shown.Grants) != 1 || shown.Grants[0].ObjectID != "sub_link" {
			t.Errorf("the console's entitlements of user-link: %d %+v, want the subscription sub_link granting pro", res.StatusCode, shown)
		}
		// The CLI, with the server's environment.
		r := runServerCmd(t, e.env, "entitlements", "show", "user-link")
		if r.Code != 0 || !strings.Contains(r.Stdout, "pro") || !strings.Contains(r.Stdout, "sub_link") {
			t.Errorf("server entitlements show user-link: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		t.Logf("server entitlements show user-link:\n%s", r.Stdout)
	})
}
