package github_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/providers"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/providers/github/githubtest"
	"github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
)

// These tests run the reconcilers with the receiver's own processor and
// providers (receivertest): what a run writes and sends is what deliveries
// of the same events write and send.

func TestMarketplaceWithTheRealProcessor(t *testing.T) {
	r := receivertest.New(t, providers.List())
	gh := githubtest.New(t, testAppID)
	gh.AddPlan(githubtest.ListingTier{ID: 7, Name: "Pro", MonthlyPriceInCents: 1500, YearlyPriceInCents: 15000, PriceModel: "FLAT_RATE"})
	gh.AddPlan(githubtest.ListingTier{ID: 8, Name: "Team", MonthlyPriceInCents: 500, YearlyPriceInCents: 5000, PriceModel: "PER_UNIT", UnitName: "seat"})
	jan := func(d int) time.Time { return time.Date(2026, 1, d, 10, 0, 0, 0, time.UTC) }
	gh.Subscribe(7, githubtest.Account{ID: 1001, Login: "acme", OrganizationBillingEmail: "billing@acme.example", UpdatedAt: jan(5)})
	gh.Subscribe(8, githubtest.Account{ID: 1002, Login: "globex", UnitCount: 4, UpdatedAt: jan(20)})
	// globex bought Pro on the 2nd (delivered); its change to Team was lost.
	purchase := []byte(`{"action":"purchased","effective_date":"2026-01-02T00:00:00+00:00","sender":{"login":"globex-admin","id":9},
"marketplace_purchase":{"account":{"type":"Organization","id":1002,"login":"globex","organization_billing_email":null},
"billing_cycle":"monthly","unit_count":1,"on_free_trial":false,"free_trial_ends_on":null,"next_billing_date":null,
"plan":{"id":7,"name":"Pro","description":"","monthly_price_in_cents":1500,"yearly_price_in_cents":15000,"price_model":"FLAT_RATE","has_free_trial":false,"unit_name":null,"bullets":[]}}}`)
	if res := r.Deliver(t, github.Spec, purchase, map[string][]string{"X-GitHub-Event": {"marketplace_purchase"}, "X-GitHub-Delivery": {"guid-globex"}}); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	r.SMTP.WaitFor(t, 1, 5*time.Second)

	ghAPI, err := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: gh.PrivateKeyPEM(), BaseURL: gh.URL})
	if err != nil {
		t.Fatal(err)
	}
	rec := &github.Marketplace{API: ghAPI, Provider: github.New([]string{receivertest.Secret(github.Spec)}, receivertest.NotifyEmail),
		Processor: r.Server.Processor(), Store: reconcile.NewStore(r.Pool), Orders: r.Pool, Log: reconciletest.Log(t)}
	sum, err := rec.Run(context.Background(), github.MarketplaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []brief{
		{github.FindMissingOrder, 1001, "purchased", github.ResCorrected},
		{github.FindPlanDiffers, 1002, "changed", github.ResCorrected},
	}
	if diff := cmp.Diff(want, briefs(sum.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	wantOrders := []string{
		"order github_marketplace reconcile:marketplace:1001:purchased:7:20260105T100000Z account:1001  paid 1500 usd billing@acme.example 7:Pro",
		"order github_marketplace " + github.Key("0", "guid-globex", github.BodyHash(purchase)) + " account:1002  paid 2000 usd  8:Team",
	}
	if diff := cmp.Diff(wantOrders, r.Snapshot(t)); diff != "" {
		t.Errorf("orders (-want +got):\n%s", diff)
	}
	msgs := r.SMTP.WaitFor(t, 2, 5*time.Second)
	if got := msgs[len(msgs)-1].To; len(got) != 1 || got[0] != "billing@acme.example" {
		t.Errorf("welcome email to %v", got)
	}
	if n := len(r.API.Requests()); n != 2 {
		t.Errorf("%d fulfillment calls, want 2 (one per purchase)", n)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE via = 'reconcile' AND kind = 'event'`); n != 2 {
		t.Errorf("%d reconciled claims, want 2", n)
	}

	t.Run("SecondRunSendsNothing", func(t *testing.T) {
		before := r.Snapshot(t)
		sum, err := rec.Run(context.Background(), github.MarketplaceOptions{})
		if err != nil || len(sum.Findings) != 0 || sum.InSync != 2 {
			t.Errorf("%+v %v", sum, err)
		}
		if diff := cmp.Diff(before, r.Snapshot(t)); diff != "" {
			t.Errorf("state changed (-before +after):\n%s", diff)
		}
		stepsSettled(t, r)
		if n := len(r.SMTP.Messages()); n != 2 {
			t.Errorf("%d emails, want 2", n)
		}
	})
	t.Run("ACancellationLostIsReported", func(t *testing.T) {
		gh.Unsubscribe(1001)
		before := r.Snapshot(t)
		sum, err := rec.Run(context.Background(), github.MarketplaceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]brief{{github.FindPaidNotListed, 1001, "", github.ResReported}}, briefs(sum.Findings)); diff != "" {
			t.Errorf("findings (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, r.Snapshot(t)); diff != "" {
			t.Errorf("a reported finding changed the state (-before +after):\n%s", diff)
		}
	})
}

// stepsSettled waits until no step of any event is in progress: every
// email and fulfillment call planned so far was made (or parked).
func stepsSettled(t *testing.T, r *receivertest.Receiver) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND status = 'in_progress'`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("steps still in progress after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
