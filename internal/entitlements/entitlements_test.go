package entitlements_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/entitlements/entitlementstest"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const catalogue = `grace: 72h
entitlements:
  pro:
    stripe: [price_pro]
  team:
    stripe: [prod_team]
`

// TestCatalogueRefusedWithLine: what start-up refuses names the line.
func TestCatalogueRefusedWithLine(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"UnknownProvider", "entitlements:\n  pro:\n    stripee: [price_pro]\n", "f.yaml:3: unknown provider \"stripee\""},
		{"Syntax", "entitlements:\n  pro: [\n", "f.yaml:2:"},
		{"Grace", "grace: soon\nentitlements: {}\n", "f.yaml:1: grace \"soon\""},
		{"UnknownMember", "entitlements: {}\ngrants: {}\n", "f.yaml:2: unknown member \"grants\""},
		{"EmptyID", "entitlements:\n  pro:\n    paddle: [\"\"]\n", "f.yaml:3: paddle id of pro"},
		{"BadKey", "entitlements:\n  \"pro plan\":\n    polar: [x]\n", "f.yaml:2: entitlement key \"pro plan\""},
		{"DuplicateKey", "entitlements:\n  pro:\n    stripe: [a]\n  pro:\n    stripe: [b]\n", "f.yaml:4: \"pro\" is named twice"},
		{"Empty", "", "f.yaml: is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := entitlements.Parse("f.yaml", []byte(tc.text))
			var le *entitlements.LineError
			if err == nil || !errors.As(err, &le) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("%v, want an error starting %q", err, tc.want)
			}
		})
	}
	c, err := entitlements.Parse("f.json", []byte(`{"grace": "1h", "entitlements": {"pro": {"stripe": ["price_pro", "prod_pro"], "github_marketplace": [1234]}}}`))
	if err != nil || c.Grace != time.Hour || len(c.Grants) != 3 || !c.NamesStripe() {
		t.Fatalf("a JSON catalogue: %+v, %v", c, err)
	}
}

// rig is a receiver with entitlements on, telling a fake app.
type rig struct {
	*receivertest.Receiver
	app  *entitlementstest.App
	spec webhooks.Spec
}

func newRig(t *testing.T) *rig {
	t.Helper()
	file := filepath.Join(t.TempDir(), "entitlements.yaml")
	if err := os.WriteFile(file, []byte(catalogue), 0o600); err != nil {
		t.Fatal(err)
	}
	app := entitlementstest.New(t, receivertest.FulfillmentSecret)
	r := receivertest.New(t, providers.List(), receivertest.Env("ENTITLEMENTS_FILE", file), receivertest.Env("FULFILLMENT_URL", app.URL()))
	if _, err := entitlements.Install(t.Context(), r.Pool, r.Config.Entitlements); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(providers.All(), func(s webhooks.Spec) bool { return s.Source == stripe.Source })
	return &rig{Receiver: r, app: app, spec: providers.All()[i]}
}

func (r *rig) deliver(t *testing.T, body []byte) {
	t.Helper()
	if res := r.Deliver(t, r.spec, body, nil); res.Status != http.StatusOK {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
}

func (r *rig) set(t *testing.T, subject string) string {
	t.Helper()
	b, err := entitlements.Store{Pool: r.Pool}.Get(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(b.Entitlements)
	return string(raw)
}

// event is a Stripe event.
func event(id, typ string, at int64, obj map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": "2023-10-16", "created": at,
		"livemode": false, "type": typ, "data": map[string]any{"object": obj}})
	return b
}

func sub(tag, status string, cancel bool, at int64, prices ...string) map[string]any {
	var items []any
	for _, p := range prices {
		items = append(items, map[string]any{"price": map[string]any{"id": p, "product": "prod_" + p}, "quantity": 1})
	}
	return map[string]any{"id": "sub_" + tag, "object": "subscription", "customer": "cus_" + tag, "status": status,
		"cancel_at_period_end": cancel, "current_period_end": at + 30*86400, "items": map[string]any{"data": items}}
}

// history is one customer's events: a subscription to pro that goes past
// due (in two events: the later one changes only its metadata), a second
// subscription to team cancelled at its period end, the checkout that
// links the customer to an app user, and an unrelated invoice.
func history(tag string, t0 int64) [][]byte {
	return [][]byte{
		event("evt_"+tag+"_1", "customer.subscription.created", t0, sub(tag, "trialing", false, t0, "price_pro")),
		event("evt_"+tag+"_2", "customer.subscription.updated", t0+10, sub(tag, "active", false, t0, "price_pro")),
		event("evt_"+tag+"_3", "customer.subscription.updated", t0+20, sub(tag, "past_due", false, t0, "price_pro")),
		event("evt_"+tag+"_4", "customer.subscription.updated", t0+30, sub(tag, "past_due", false, t0, "price_pro")),
		event("evt_"+tag+"_5", "customer.subscription.created", t0+5, func() map[string]any {
			m := sub(tag, "active", false, t0, "team")
			m["id"] = "sub_" + tag + "_team"
			return m
		}()),
		event("evt_"+tag+"_6", "customer.subscription.updated", t0+40, func() map[string]any {
			m := sub(tag, "active", true, t0, "team")
			m["id"] = "sub_" + tag + "_team"
			return m
		}()),
		event("evt_"+tag+"_7", "checkout.session.completed", t0+1, map[string]any{"id": "cs_" + tag, "object": "checkout.session",
			"mode": "subscription", "payment_status": "paid", "customer": "cus_" + tag, "client_reference_id": "user_" + tag,
			"amount_total": 1000, "currency": "usd", "customer_details": map[string]any{"email": "a@example.com"}}),
		event("evt_"+tag+"_8", "invoice.paid", t0+2, map[string]any{"id": "in_" + tag, "object": "invoice", "customer": "cus_" + tag,
			"amount_due": 1000, "amount_paid": 1000, "currency": "usd"}),
	}
}

// TestRandomOrdersOneSet is the property: whatever order one customer's
// events arrive in, and however often, the customer's app user ends with
// the same set (its keys, states and untils), the provider-keyed subject
// with none, and the app holds the receiver's latest version.
func TestRandomOrdersOneSet(t *testing.T) {
	r := newRig(t)
	t0 := time.Now().Add(-time.Hour).Unix()
	var want string
	seeds := 12
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		tag := fmt.Sprintf("p%d", seed)
		evs := history(tag, t0)
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		for _, ev := range evs {
			r.deliver(t, ev)
			if rng.IntN(3) == 0 {
				r.deliver(t, ev) // a retry
			}
		}
		got := r.set(t, "user_"+tag)
		if seed == 0 {
			want = got
			t.Logf("every order ends with %s", want)
			// The grace runs from the first past_due event (t0+20), not the
			// later one that only changed the subscription's metadata.
			graceEnd := time.Unix(t0+20, 0).Add(72 * time.Hour).UTC().Format(time.RFC3339)
			if !strings.Contains(want, `"key":"pro","state":"grace","until":"`+graceEnd+`"`) ||
				!strings.Contains(want, `"key":"team","state":"active","until":"`) {
				t.Fatalf("the set %s is not pro in grace until %s and team until its period end", want, graceEnd)
			}
		}
		if got != want {
			t.Errorf("seed %d: %s, want %s", seed, got, want)
		}
		if s := r.set(t, "stripe:cus_"+tag); s != "[]" {
			t.Errorf("seed %d: the provider-keyed subject holds %s", seed, s)
		}
		b, _ := entitlements.Store{Pool: r.Pool}.Get(t.Context(), "user_"+tag)
		if a := r.app.Accepted("user_" + tag); a.Version != b.Version {
			t.Errorf("seed %d: the app holds v%d, the receiver's latest is v%d", seed, a.Version, b.Version)
		}
	}
}

// TestEntitlementStatements holds the performance rule: an event that can
// change entitlements adds one statement to its transaction (in the same
// round trip), an event that cannot adds none; and an event that changes
// none of a subject's entitlements neither writes nor waits for the
// subject: with the subject's lock held by the test, such an event is
// answered at once, while one that changes them waits for the lock.
func TestEntitlementStatements(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Unix()
	plain, with := stripe.New(nil), stripe.New(nil, stripe.WithEntitlements(true))
	for _, tc := range []struct {
		body  []byte
		extra int
	}{
		{event("evt_s1", "customer.subscription.updated", t0, sub("s", "active", false, t0, "price_pro")), 1},
		{event("evt_s2", "customer.subscription.deleted", t0, sub("s", "canceled", false, t0, "price_pro")), 1},
		{event("evt_s3", "charge.refunded", t0, map[string]any{"id": "ch_1", "payment_intent": "pi_1", "amount_refunded": 5, "amount": 10, "currency": "usd"}), 1},
		{event("evt_s4", "invoice.paid", t0, map[string]any{"id": "in_1", "customer": "cus_s", "amount_due": 1, "amount_paid": 1, "currency": "usd"}), 0},
		{event("evt_s5", "customer.updated", t0, map[string]any{"id": "cus_s", "email": "a@example.com"}), 0},
		{event("evt_s6", "customer.subscription.trial_will_end", t0, sub("s", "trialing", false, t0, "price_pro")), 0},
	} {
		var ev map[string]string
		_ = json.Unmarshal(tc.body, &ev)
		n := func(p *stripe.Provider) int {
			e, err := stripe.Decode(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			var plan webhooks.Plan
			if err := p.Plan(&e, &plan); err != nil {
				t.Fatal(err)
			}
			return plan.Len()
		}
		if got := n(with) - n(plain); got != tc.extra {
			t.Errorf("%s: %d statements more with entitlements, want %d", ev["type"], got, tc.extra)
		}
	}

	r := newRig(t)
	r.deliver(t, event("evt_l1", "customer.subscription.created", t0, sub("lock", "active", false, t0, "price_pro")))
	if s := r.set(t, "stripe:cus_lock"); !strings.Contains(s, "pro") {
		t.Fatalf("stripe:cus_lock: %s", s)
	}
	ctx := t.Context()
	holder, err := pgx.Connect(ctx, pgtest.SessionURL(t, r.Config.DatabaseURL))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	hold := func() func() {
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('entitlements:' || $1, 0))`, "stripe:cus_lock"); err != nil {
			t.Fatal(err)
		}
		return func() {
			_, _ = holder.Exec(context.Background(), `SELECT pg_advisory_unlock(hashtextextended('entitlements:' || $1, 0))`, "stripe:cus_lock")
		}
	}
	var xmin string
	if err := r.Pool.QueryRow(ctx, `SELECT xmin::text FROM entitlement_subjects WHERE subject = 'stripe:cus_lock'`).Scan(&xmin); err != nil {
		t.Fatal(err)
	}
	release := hold()
	// A copy, an invoice, an older update: nothing changes, nothing waits.
	for _, body := range [][]byte{
		event("evt_l1", "customer.subscription.created", t0, sub("lock", "active", false, t0, "price_pro")),
		event("evt_l2", "invoice.paid", t0+1, map[string]any{"id": "in_lock", "customer": "cus_lock", "amount_due": 1, "amount_paid": 1, "currency": "usd"}),
		event("evt_l3", "customer.subscription.updated", t0-100, sub("lock", "past_due", false, t0, "price_pro")),
	} {
		done := make(chan receivertest.Response, 1)
		go func() { done <- r.Deliver(t, r.spec, body, nil) }()
		select {
		case res := <-done:
			if res.Status != http.StatusOK {
				t.Fatalf("%d %s", res.Status, res.Body)
			}
		case <-time.After(30 * time.Second):
			release()
			t.Fatalf("an event that changes no entitlement waited for the subject's lock")
		}
	}
	// A change waits for the lock, then applies.
	done := make(chan receivertest.Response, 1)
	go func() {
		done <- r.Deliver(t, r.spec, event("evt_l4", "customer.subscription.deleted", t0+10, sub("lock", "canceled", false, t0, "price_pro")), nil)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for r.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'`) == 0 {
		if time.Now().After(deadline) {
			release()
			t.Fatalf("the event that ends the subscription did not wait for the subject's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var after string
	if err := r.Pool.QueryRow(ctx, `SELECT xmin::text FROM entitlement_subjects WHERE subject = 'stripe:cus_lock'`).Scan(&after); err != nil || after != xmin {
		t.Errorf("the subject's row was written (xmin %s, was %s) by events that change nothing", after, xmin)
	}
	release()
	if res := <-done; res.Status != http.StatusOK {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	if s := r.set(t, "stripe:cus_lock"); s != "[]" {
		t.Errorf("after the deletion: %s", s)
	}
}
