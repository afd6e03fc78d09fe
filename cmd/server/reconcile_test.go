package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/providers/github/githubtest"
	"github.com/paywebhooks/receiver/internal/providers/paddle/paddletest"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

const testStripeKey = "rk_test_reconcile_0123456789"

func checkoutObject(id, email string, amount int) map[string]any {
	return map[string]any{"id": id, "object": "checkout.session", "payment_status": "paid", "amount_total": amount,
		"currency": "usd", "payment_intent": "pi_" + id, "customer_details": map[string]any{"email": email}}
}

// TestReconcileStripeAfterOutage: the receiver was down for ten minutes;
// the events Stripe created meanwhile are found and processed exactly as
// deliveries would have been, once each, and a second run changes nothing.
func TestReconcileStripeAfterOutage(t *testing.T) {
	r := rt.New(t, providers.List())
	api := stripetest.New(t, testStripeKey)
	now := time.Now().Truncate(time.Second)
	before := api.Add("checkout.session.completed", now.Add(-30*time.Minute), checkoutObject("cs_before", "a@example.com", 1000), true)
	if res := r.Deliver(t, stripe.Spec, before.Raw, nil); res.Status != 200 {
		t.Fatalf("delivery before the outage: %d %s", res.Status, res.Body)
	}
	// The outage: three events created while the receiver was stopped.
	api.Add("checkout.session.completed", now.Add(-14*time.Minute), checkoutObject("cs_down1", "b@example.com", 2000), false)
	api.Add("invoice.paid", now.Add(-12*time.Minute), map[string]any{"id": "in_down", "object": "invoice", "amount_due": 500,
		"amount_paid": 500, "currency": "usd", "customer_email": "c@example.com"}, false)
	api.Add("checkout.session.completed", now.Add(-6*time.Minute), checkoutObject("cs_down2", "d@example.com", 3000), false)
	env := map[string]string{
		"DATABASE_URL": r.Config.DatabaseURL, "SMTP_ADDR": r.Config.SMTPAddr, "FULFILLMENT_URL": r.Config.FulfillmentURL,
		"FULFILLMENT_SECRET": rt.FulfillmentSecret, "MAIL_FROM": r.Config.MailFrom, "STRIPE_API_KEY": testStripeKey, "STRIPE_API_BASE": api.URL,
	}
	reconcileRun := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"reconcile", "stripe"}, args...), getenv(env), &out, &errOut)
		t.Logf("server reconcile stripe %s:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
		return out.String(), err
	}
	emails, calls := len(r.SMTP.Messages()), len(r.API.Requests())
	snapshot := r.Snapshot(t)
	state := func(when string) {
		t.Logf("%s: %d orders (%d paid), %d invoices, %d emails sent, %d fulfillment calls", when,
			r.Count(t, `SELECT count(*) FROM orders`), r.Count(t, `SELECT count(*) FROM orders WHERE status = 'paid'`),
			r.Count(t, `SELECT count(*) FROM invoices`), len(r.SMTP.Messages()), len(r.API.Requests()))
	}
	metrics := func(when string) {
		res, err := http.Get(r.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "webhook_reconcile_") {
				lines = append(lines, l)
			}
		}
		t.Logf("/metrics %s:\n%s", when, strings.Join(lines, "\n"))
	}
	state("before reconciling")

	out, err := reconcileRun("--since", "1h", "--dry-run")
	if err != nil || !strings.Contains(out, "3 would be processed") {
		t.Fatalf("dry run: %q, %v", out, err)
	}
	if diff := cmp.Diff(snapshot, r.Snapshot(t)); diff != "" || len(r.SMTP.Messages()) != emails {
		t.Fatalf("a dry run wrote or sent something:\n%s", diff)
	}

	out, err = reconcileRun("--since", "1h")
	if err != nil || !strings.Contains(out, "4 found, 1 already known, 3 processed") {
		t.Fatalf("run: %q, %v", out, err)
	}
	if got := len(r.SMTP.Messages()) - emails; got != 3 {
		t.Errorf("emails sent by the run = %d, want 3 (two confirmations, one receipt)", got)
	}
	if got := len(r.API.Requests()) - calls; got != 2 {
		t.Errorf("fulfillment calls by the run = %d, want 2", got)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND via = 'reconcile'`); n != 3 {
		t.Errorf("events recorded as reconciled = %d, want 3", n)
	}
	after := r.Snapshot(t)
	state("after the first run")
	metrics("after the first run")

	out, err = reconcileRun("--resume")
	if err != nil || !strings.Contains(out, "0 found") {
		t.Fatalf("second run: %q, %v", out, err)
	}
	out, err = reconcileRun("--since", "1h")
	if err != nil || !strings.Contains(out, "4 found, 4 already known, 0 processed") {
		t.Fatalf("third run: %q, %v", out, err)
	}
	if diff := cmp.Diff(after, r.Snapshot(t)); diff != "" {
		t.Fatalf("a second run changed the state:\n%s", diff)
	}
	out, err = reconcileRun("--since", "1h", "--json")
	var rep struct {
		Reconciler string
		DryRun     bool `json:"dry_run"`
		Summary    struct{ Found, Known, Processed, Parked int }
		Unresolved int
		Error      string
	}
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Reconciler != "stripe" || rep.Summary.Found != 4 ||
		rep.Summary.Known != 4 || rep.Summary.Processed != 0 || rep.Unresolved != 0 || rep.Error != "" {
		t.Fatalf("run --json: %v, %q", err, out)
	}
	if len(r.SMTP.Messages())-emails != 3 || len(r.API.Requests())-calls != 2 {
		t.Fatal("a second run sent something again")
	}
	state("after the second and third runs")
	metrics("after the second and third runs")
}

// TestReconcileUsage: the flags a reconciler does not take, and runs
// without their configuration, are refused.
func TestReconcileUsage(t *testing.T) {
	r := rt.New(t, providers.List())
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"nope"}, nil, "unknown reconciliation"},
		{[]string{"stripe", "--since", "1h", "--resume"}, nil, "cannot be used together"},
		{[]string{"github-marketplace", "--since", "1h"}, nil, "flag provided but not defined"},
		{[]string{"stripe", "--dry-run"}, map[string]string{}, "STRIPE_API_KEY is unset"},
		{[]string{"github-marketplace", "--dry-run"}, map[string]string{}, "GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY must be set"},
		{[]string{"stripe"}, map[string]string{"STRIPE_API_KEY": testStripeKey}, "SMTP_ADDR is unset"},
	} {
		env := map[string]string{"DATABASE_URL": r.Config.DatabaseURL}
		for k, v := range c.env {
			env[k] = v
		}
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"reconcile"}, c.args...), getenv(env), &out, &errOut)
		if err == nil || !strings.Contains(err.Error()+errOut.String(), c.want) {
			t.Errorf("reconcile %v: %v %q; want %q", c.args, err, errOut.String(), c.want)
		}
	}
}

// TestReconcileMarketplace: one account GitHub lists with no order (a
// lost purchase) and one paid order GitHub no longer lists: the first is
// corrected through the GitHub provider (order, welcome email, fulfillment
// call, once), the second is reported, not guessed.
func TestReconcileMarketplace(t *testing.T) {
	r := rt.New(t, providers.List())
	gh := githubtest.New(t, 4242)
	gh.AddPlan(githubtest.ListingTier{ID: 7, Name: "Pro", MonthlyPriceInCents: 1500, YearlyPriceInCents: 15000, PriceModel: "FLAT_RATE"})
	gh.Subscribe(7, githubtest.Account{ID: 101, Login: "listed-no-order", Type: "Organization",
		OrganizationBillingEmail: "billing@listed.example", BillingCycle: "monthly", UnitCount: 1})
	if _, err := r.Pool.Exec(context.Background(), `
INSERT INTO orders (source, provider_event_id, external_id, status, amount_cents, currency, customer_email, plan)
VALUES ('github_marketplace', 'guid-stale', 'account:202', 'paid', 1500, 'usd', 'stale@example.com', '7:Pro')`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL": r.Config.DatabaseURL, "SMTP_ADDR": r.Config.SMTPAddr, "FULFILLMENT_URL": r.Config.FulfillmentURL,
		"FULFILLMENT_SECRET": rt.FulfillmentSecret, "MAIL_FROM": r.Config.MailFrom, "GITHUB_APP_ID": "4242", "GITHUB_APP_PRIVATE_KEY": string(gh.PrivateKeyPEM()),
		"GITHUB_API_URL": gh.URL,
	}
	reconcileRun := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"reconcile", "github-marketplace"}, args...), getenv(env), &out, &errOut)
		t.Logf("server reconcile github-marketplace %s:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
		return out.String(), err
	}
	out, err := reconcileRun("--dry-run")
	if err != nil || !strings.Contains(out, "missing_order") || !strings.Contains(out, "paid_not_listed") {
		t.Fatalf("dry run: %q, %v", out, err)
	}
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE external_id = 'account:101'`); n != 0 {
		t.Fatal("a dry run corrected something")
	}
	// The stale order is only reported: left for an operator, exit 3.
	out, err = reconcileRun("--json")
	var rep struct {
		Reconciler string
		Summary    struct{ Corrected, Reported int }
		Unresolved int
	}
	if exitCode(err) != exitUnresolved || json.Unmarshal([]byte(out), &rep) != nil || rep.Reconciler != "github-marketplace" ||
		rep.Summary.Corrected != 1 || rep.Summary.Reported != 1 || rep.Unresolved != 1 {
		t.Fatalf("run: exit %d (%v), %q; want 1 corrected, 1 reported and exit 3", exitCode(err), err, out)
	}
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE external_id = 'account:101' AND status = 'paid'`); n != 1 {
		t.Fatal("the listed account got no paid order")
	}
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE external_id = 'account:202' AND status = 'paid'`); n != 1 {
		t.Fatal("the stale order was changed; it must only be reported")
	}
	emails, calls := len(r.SMTP.Messages()), len(r.API.Requests())
	if emails != 1 || calls != 1 {
		t.Fatalf("emails %d, fulfillment calls %d after the correction, want 1 and 1", emails, calls)
	}
	_, _ = reconcileRun()
	if len(r.SMTP.Messages()) != emails || len(r.API.Requests()) != calls {
		t.Fatal("a second run sent something again")
	}
}

// TestReconcileAPIBaseMustBeHTTPS: an API base that would carry the key in
// clear is refused at start-up, before anything is sent; loopback is not.
func TestReconcileAPIBaseMustBeHTTPS(t *testing.T) {
	r := rt.New(t, providers.List())
	for _, c := range []struct{ name, key, value string }{
		{"stripe", "STRIPE_API_KEY", testStripeKey},
		{"github-marketplace", "GITHUB_APP_ID", "4242"},
		{"paddle", "PADDLE_API_KEY", "pdl_sdbx_apikey_reconcile_0123456789"},
	} {
		base := map[string]string{"stripe": "STRIPE_API_BASE", "github-marketplace": "GITHUB_API_URL", "paddle": "PADDLE_API_BASE"}[c.name]
		env := map[string]string{"DATABASE_URL": r.Config.DatabaseURL, c.key: c.value, base: "http://api.example.com"}
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"reconcile", c.name, "--dry-run"}, getenv(env), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), "https://") {
			t.Errorf("reconcile %s with %s=http://api.example.com: %v", c.name, base, err)
		}
	}
}

// TestReconcileStopsAgainstABrokenAPI: a Stripe API that pages for ever
// (here: the same page again and again) stops the command at once, with an
// error naming the cause; the run is recorded as an error.
func TestReconcileStopsAgainstABrokenAPI(t *testing.T) {
	r := rt.New(t, providers.List())
	api := stripetest.New(t, testStripeKey)
	now := time.Now().Truncate(time.Second)
	for i := range 5 {
		api.Add("product.created", now.Add(-time.Duration(50-i)*time.Minute), map[string]any{"id": fmt.Sprint("prod_", i)}, true)
	}
	api.Misbehave(stripetest.RepeatPage)
	env := map[string]string{"DATABASE_URL": r.Config.DatabaseURL, "STRIPE_API_KEY": testStripeKey, "STRIPE_API_BASE": api.URL}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"reconcile", "stripe", "--allow-unconfigured"}, getenv(env), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "stopped: the API") {
		t.Fatalf("reconcile against a broken API: %v\n%s", err, errOut.String())
	}
	if n := len(api.Requests()); n > 20 {
		t.Errorf("%d requests", n)
	}
	if n := r.Count(t, `SELECT count(*) FROM reconcile_runs WHERE source = 'stripe' AND result = 'error' AND error LIKE '%stopped%'`); n != 1 {
		t.Errorf("%d runs recorded as stopped", n)
	}
	t.Logf("%d requests: %v", len(api.Requests()), err)
}

// TestReconcilePaddle: events Paddle created while the receiver was down
// are found and processed as deliveries would have been, once.
func TestReconcilePaddle(t *testing.T) {
	r := rt.New(t, providers.List())
	api := paddletest.New(t, "pdl_sdbx_apikey_reconcile_0123456789")
	now := time.Now().Truncate(time.Second)
	txn := func(id, email string) map[string]any {
		return map[string]any{"id": id, "status": "completed", "currency_code": "USD", "custom_data": map[string]any{"email": email},
			"details": map[string]any{"totals": map[string]any{"grand_total": "1500"}}}
	}
	api.Add("transaction.completed", now.Add(-20*time.Minute), txn("txn_down1", "b@example.com"))
	api.Add("transaction.completed", now.Add(-10*time.Minute), txn("txn_down2", "c@example.com"))
	env := map[string]string{
		"DATABASE_URL": r.Config.DatabaseURL, "SMTP_ADDR": r.Config.SMTPAddr, "FULFILLMENT_URL": r.Config.FulfillmentURL,
		"FULFILLMENT_SECRET": rt.FulfillmentSecret,
		"MAIL_FROM":          r.Config.MailFrom, "PADDLE_API_KEY": api.Key, "PADDLE_API_BASE": api.URL,
	}
	reconcileRun := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"reconcile", "paddle"}, args...), getenv(env), &out, &errOut)
		t.Logf("server reconcile paddle %s:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
		return out.String(), err
	}
	if out, err := reconcileRun("--since", "1h", "--dry-run"); err != nil || !strings.Contains(out, "2 would be processed") {
		t.Fatalf("dry run: %q, %v", out, err)
	}
	if out, err := reconcileRun("--since", "1h"); err != nil || !strings.Contains(out, "2 found, 0 already known, 2 processed") {
		t.Fatalf("run: %q, %v", out, err)
	}
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE source = 'paddle' AND status = 'paid'`); n != 2 {
		t.Errorf("%d paid orders, want 2", n)
	}
	if out, err := reconcileRun("--since", "1h"); err != nil || !strings.Contains(out, "2 found, 2 already known, 0 processed") {
		t.Fatalf("second run: %q, %v", out, err)
	}
}
