package github_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/pgtest"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/providers/github/githubtest"
	"github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

const testAppID = 31337

// marketplaceWrites stands in for the GitHub provider's writes of a
// marketplace_purchase event (the contract's table): purchased makes the
// account's order paid, or reactivates a cancelled one; changed moves a
// paid order to the new plan. Both are conditional, as the provider's are.
func marketplaceWrites(ctx context.Context, tx pgx.Tx, ev webhooks.Event) error {
	var p struct {
		Action string `json:"action"`
		MP     struct {
			Account struct {
				ID    int64   `json:"id"`
				Email *string `json:"organization_billing_email"`
			} `json:"account"`
			BillingCycle string `json:"billing_cycle"`
			UnitCount    int64  `json:"unit_count"`
			Plan         struct {
				ID         int64  `json:"id"`
				Name       string `json:"name"`
				Monthly    int64  `json:"monthly_price_in_cents"`
				Yearly     int64  `json:"yearly_price_in_cents"`
				PriceModel string `json:"price_model"`
			} `json:"plan"`
		} `json:"marketplace_purchase"`
	}
	if err := json.Unmarshal(ev.Body, &p); err != nil {
		return err
	}
	amount := p.MP.Plan.Monthly
	if p.MP.BillingCycle == "yearly" {
		amount = p.MP.Plan.Yearly
	}
	if strings.EqualFold(strings.ReplaceAll(p.MP.Plan.PriceModel, "_", "-"), "per-unit") {
		amount *= p.MP.UnitCount
	}
	ext := fmt.Sprintf("account:%d", p.MP.Account.ID)
	plan := fmt.Sprintf("%d:%s", p.MP.Plan.ID, p.MP.Plan.Name)
	var err error
	switch p.Action {
	case "purchased":
		_, err = tx.Exec(ctx, `
INSERT INTO orders (source, provider_event_id, external_id, status, amount_cents, currency, customer_email, plan)
VALUES ('github_marketplace', $1, $2, 'paid', $3, 'usd', $4, $5)
ON CONFLICT (source, external_id) DO UPDATE SET status = 'paid', plan = EXCLUDED.plan, amount_cents = EXCLUDED.amount_cents
WHERE orders.status = 'cancelled'`, ev.ID, ext, amount, p.MP.Account.Email, plan)
	case "changed":
		_, err = tx.Exec(ctx, `UPDATE orders SET plan = $2, amount_cents = $3 WHERE source = 'github_marketplace' AND external_id = $1`,
			ext, plan, amount)
	default:
		err = fmt.Errorf("action %q", p.Action)
	}
	return err
}

type marketplaceEnv struct {
	gh    *githubtest.Server
	pool  *pgxpool.Pool
	store *reconcile.Store
	proc  *reconciletest.ClaimingProcessor
	rec   *github.Marketplace
	now   time.Time
}

func newMarketplaceEnv(t *testing.T) *marketplaceEnv {
	t.Helper()
	e := &marketplaceEnv{gh: githubtest.New(t, testAppID), pool: pgtest.NewPool(t), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	e.store = reconcile.NewStore(e.pool)
	e.proc = &reconciletest.ClaimingProcessor{Pool: e.pool, Apply: marketplaceWrites}
	api, err := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: e.gh.PrivateKeyPEM(), BaseURL: e.gh.URL})
	if err != nil {
		t.Fatal(err)
	}
	e.rec = &github.Marketplace{API: api, Processor: e.proc, Store: e.store, Orders: e.pool, Now: func() time.Time { return e.now }, Log: reconciletest.Log(t)}
	e.gh.AddPlan(githubtest.ListingTier{ID: 7, Number: 1, Name: "Pro", MonthlyPriceInCents: 1500, YearlyPriceInCents: 15000, PriceModel: "FLAT_RATE"})
	e.gh.AddPlan(githubtest.ListingTier{ID: 8, Number: 2, Name: "Team", MonthlyPriceInCents: 500, YearlyPriceInCents: 5000, PriceModel: "PER_UNIT", UnitName: "seat"})
	return e
}

// order inserts a Marketplace order as a delivery would have made it.
func (e *marketplaceEnv) order(t *testing.T, account int64, status, plan string, amount int64, effective time.Time) {
	t.Helper()
	var eff any
	if !effective.IsZero() {
		eff = effective
	}
	reconciletest.MustExec(t, e.pool, `INSERT INTO orders (source, provider_event_id, external_id, status, amount_cents, currency, plan, effective_at, effective_rank)
VALUES ('github_marketplace', $1, $2, $3, $4, 'usd', $5, $6, 1)`,
		fmt.Sprintf("guid-%d", account), fmt.Sprintf("account:%d", account), status, amount, plan, eff)
}

type orderRow struct {
	Status, Plan string
	Amount       int64
}

func (e *marketplaceEnv) orders(t *testing.T) map[string]orderRow {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT external_id, status, coalesce(plan, ''), amount_cents FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]orderRow{}
	var ext string
	var o orderRow
	if _, err := pgx.ForEachRow(rows, []any{&ext, &o.Status, &o.Plan, &o.Amount}, func() error {
		out[ext] = o
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// brief is a finding as the tests compare it.
type brief struct {
	Kind       string
	Account    int64
	Correction string
	Result     string
}

func briefs(fs []github.Finding) []brief {
	var out []brief
	for _, f := range fs {
		out = append(out, brief{f.Kind, f.AccountID, f.Correction, f.Result})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out
}

// seedMarketplace is a listing and orders with one case of each kind.
func (e *marketplaceEnv) seedMarketplace(t *testing.T) {
	jan := func(d int) time.Time { return time.Date(2026, 1, d, 10, 0, 0, 0, time.UTC) }
	// 1001: on Pro, no order: its purchased event was lost.
	e.gh.Subscribe(7, githubtest.Account{ID: 1001, Login: "acme", OrganizationBillingEmail: "billing@acme.example", UpdatedAt: jan(5)})
	// 1002: on Team (3 seats), its order still on Pro.
	e.gh.Subscribe(8, githubtest.Account{ID: 1002, Login: "globex", UnitCount: 3, UpdatedAt: jan(6)})
	e.order(t, 1002, "paid", "7:Pro", 1500, jan(2))
	// 1003: in sync.
	e.gh.Subscribe(7, githubtest.Account{ID: 1003, Login: "initech", UpdatedAt: jan(3)})
	e.order(t, 1003, "paid", "7:Pro", 1500, jan(3))
	// 1004: in sync, the plan renamed since.
	e.gh.Subscribe(7, githubtest.Account{ID: 1004, Login: "hooli", UpdatedAt: jan(3)})
	e.order(t, 1004, "paid", "7:Professional", 1500, jan(3))
	// 1005: Team with 5 seats, the order for 3.
	e.gh.Subscribe(8, githubtest.Account{ID: 1005, Login: "umbrella", UnitCount: 5, UpdatedAt: jan(20)})
	e.order(t, 1005, "paid", "8:Team", 1500, jan(2))
	// 1006: cancelled on the 15th, bought again on the 25th.
	e.gh.Subscribe(7, githubtest.Account{ID: 1006, Login: "stark", UpdatedAt: jan(25)})
	e.order(t, 1006, "cancelled", "7:Pro", 1500, jan(15))
	// 1007: cancelled on the 15th, yet listed with nothing newer.
	e.gh.Subscribe(7, githubtest.Account{ID: 1007, Login: "wayne", UpdatedAt: jan(10)})
	e.order(t, 1007, "cancelled", "7:Pro", 1500, jan(15))
	// 2001: paid, no longer listed: its cancelled event was lost.
	e.order(t, 2001, "paid", "7:Pro", 1500, jan(1))
	// 2002: cancelled, not listed: in sync.
	e.order(t, 2002, "cancelled", "7:Pro", 1500, jan(1))
	// 1008: bought a minute ago, no order yet: its delivery may be on its way.
	e.gh.Subscribe(7, githubtest.Account{ID: 1008, Login: "recent", UpdatedAt: e.now.Add(-time.Minute)})
}

func TestMarketplaceRun(t *testing.T) {
	e := newMarketplaceEnv(t)
	e.seedMarketplace(t)
	var seen []github.Finding
	sum, err := e.rec.Run(context.Background(), github.MarketplaceOptions{Settle: 2 * time.Minute,
		OnFinding: func(f github.Finding) { seen = append(seen, f) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []brief{
		{github.FindMissingOrder, 1001, "purchased", github.ResCorrected},
		{github.FindPlanDiffers, 1002, "changed", github.ResCorrected},
		{github.FindPlanDiffers, 1005, "changed", github.ResCorrected},
		{github.FindRepurchased, 1006, "purchased", github.ResCorrected},
		{github.FindCancelledButListed, 1007, "", github.ResReported},
		{github.FindMissingOrder, 1008, "", github.ResDeferred},
		{github.FindPaidNotListed, 2001, "", github.ResReported},
	}
	if diff := cmp.Diff(want, briefs(sum.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if len(seen) != len(sum.Findings) {
		t.Errorf("OnFinding called %d times for %d findings", len(seen), len(sum.Findings))
	}
	if sum.Plans != 2 || sum.Accounts != 8 || sum.Orders != 8 || sum.InSync != 3 || sum.Corrected != 4 ||
		sum.Reported != 2 || sum.Deferred != 1 || sum.Failed != 0 || sum.Missed() != 6 {
		t.Errorf("summary %+v", sum)
	}
	wantOrders := map[string]orderRow{
		"account:1001": {"paid", "7:Pro", 1500},
		"account:1002": {"paid", "8:Team", 1500},
		"account:1003": {"paid", "7:Pro", 1500},
		"account:1004": {"paid", "7:Professional", 1500},
		"account:1005": {"paid", "8:Team", 2500},
		"account:1006": {"paid", "7:Pro", 1500},
		"account:1007": {"cancelled", "7:Pro", 1500},
		"account:2001": {"paid", "7:Pro", 1500},
		"account:2002": {"cancelled", "7:Pro", 1500},
	}
	if diff := cmp.Diff(wantOrders, e.orders(t)); diff != "" {
		t.Errorf("orders (-want +got):\n%s", diff)
	}
	got := e.proc.Processed()
	wantKeys := []string{
		"reconcile:marketplace:1001:purchased:7:20260105T100000Z",
		"reconcile:marketplace:1002:changed:8:20260106T100000Z",
		"reconcile:marketplace:1005:changed:8:20260120T100000Z",
		"reconcile:marketplace:1006:purchased:7:20260125T100000Z",
	}
	if diff := cmp.Diff(wantKeys, reconciletest.KeysOf(got)); diff != "" {
		t.Errorf("synthetic events (-want +got):\n%s", diff)
	}
	for _, ev := range got {
		if ev.Source != "github" || ev.Type != "marketplace_purchase" || ev.ID != ev.Key || ev.Via != webhooks.ViaReconcile || ev.BodyHash != nil {
			t.Errorf("event %+v", ev)
		}
	}
	runs, err := e.store.Runs(context.Background(), github.SourceMarketplace, 5)
	if err != nil || len(runs) != 1 || runs[0].Result != "ok" || runs[0].Tally != (reconcile.Tally{Found: 16, Missed: 6, Unresolved: 2}) {
		t.Errorf("runs %+v %v", runs, err)
	}
	for _, s := range []string{"2 plans, 8 accounts listed, 8 orders, 3 in sync, 7 findings", "4 corrected", "2 reported", "1 left for the next run"} {
		if !strings.Contains(sum.String(), s) {
			t.Errorf("summary %q lacks %q", sum.String(), s)
		}
	}

	t.Run("SecondRunChangesNothing", func(t *testing.T) {
		before := len(e.proc.Processed())
		sum, err := e.rec.Run(context.Background(), github.MarketplaceOptions{Settle: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		want := []brief{
			{github.FindCancelledButListed, 1007, "", github.ResReported},
			{github.FindMissingOrder, 1008, "", github.ResDeferred},
			{github.FindPaidNotListed, 2001, "", github.ResReported},
		}
		if diff := cmp.Diff(want, briefs(sum.Findings)); diff != "" {
			t.Errorf("findings (-want +got):\n%s", diff)
		}
		if n := len(e.proc.Processed()) - before; n != 0 {
			t.Errorf("processor called %d times", n)
		}
	})
	t.Run("LaterTheRecentPurchaseIsCorrected", func(t *testing.T) {
		e.now = e.now.Add(10 * time.Minute)
		sum, err := e.rec.Run(context.Background(), github.MarketplaceOptions{Settle: 2 * time.Minute})
		if err != nil || sum.Corrected != 1 || e.orders(t)["account:1008"].Status != "paid" {
			t.Errorf("%+v %v", sum, err)
		}
	})
}

func TestMarketplaceDryRunWritesNothing(t *testing.T) {
	e := newMarketplaceEnv(t)
	e.seedMarketplace(t)
	before := e.orders(t)
	sum, err := e.rec.Run(context.Background(), github.MarketplaceOptions{DryRun: true, Settle: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if sum.WouldCorrect != 4 || sum.Corrected != 0 || !strings.Contains(sum.String(), "4 would be corrected") {
		t.Errorf("summary %+v", sum)
	}
	for _, f := range sum.Findings {
		if f.Result == github.ResWouldCorrect && !strings.HasPrefix(f.Key, "reconcile:marketplace:") {
			t.Errorf("finding %+v without the key it would use", f)
		}
	}
	if n := len(e.proc.Processed()); n != 0 {
		t.Errorf("processor called %d times", n)
	}
	if diff := cmp.Diff(before, e.orders(t)); diff != "" {
		t.Errorf("orders changed (-before +after):\n%s", diff)
	}
	if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM reconcile_runs`); n != 0 {
		t.Errorf("%d runs recorded", n)
	}
}

func TestMarketplaceCorrectionsThatDoNotTakeEffect(t *testing.T) {
	e := newMarketplaceEnv(t)
	e.gh.Subscribe(7, githubtest.Account{ID: 1, Login: "parked"})
	e.gh.Subscribe(7, githubtest.Account{ID: 2, Login: "failing"})
	e.gh.Subscribe(7, githubtest.Account{ID: 3, Login: "claimed-before"})
	// An earlier run's claim of the same key, whose order was deleted since.
	reconciletest.MustExec(t, e.pool, `INSERT INTO processed_events (event_key, source, status, kind) VALUES ($1, 'github', 'done', 'event')`,
		"reconcile:marketplace:3:purchased:7:2026-03-01")
	e.proc.Outcome = func(ev webhooks.Event) (webhooks.Outcome, bool) {
		switch {
		case strings.Contains(ev.Key, ":1:"):
			return webhooks.OutcomeParked, true
		case strings.Contains(ev.Key, ":2:"):
			return webhooks.OutcomeError, true
		}
		return "", false
	}
	sum, err := e.rec.Run(context.Background(), github.MarketplaceOptions{})
	if !errors.Is(err, reconcile.ErrIncomplete) {
		t.Errorf("error %v, want ErrIncomplete", err)
	}
	want := []brief{
		{github.FindMissingOrder, 1, "purchased", github.ResNotConverged},
		{github.FindMissingOrder, 2, "purchased", github.ResFailed},
		{github.FindMissingOrder, 3, "purchased", github.ResNotConverged},
	}
	if diff := cmp.Diff(want, briefs(sum.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	runs, _ := e.store.Runs(context.Background(), github.SourceMarketplace, 1)
	if len(runs) != 1 || runs[0].Result != "error" || runs[0].Tally.Unresolved != 3 {
		t.Errorf("runs %+v", runs)
	}
}

func TestMarketplaceOneAtATime(t *testing.T) {
	e := newMarketplaceEnv(t)
	release, err := e.store.Lock(context.Background(), github.SourceMarketplace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.rec.Run(context.Background(), github.MarketplaceOptions{}); !errors.Is(err, reconcile.ErrBusy) {
		t.Errorf("run under another's lock: %v", err)
	}
	if _, err := e.rec.Run(context.Background(), github.MarketplaceOptions{DryRun: true}); err != nil {
		t.Errorf("dry run under another's lock: %v", err)
	}
	release()
	if _, err := e.rec.Run(context.Background(), github.MarketplaceOptions{}); err != nil {
		t.Errorf("run after release: %v", err)
	}
}

func TestMarketplaceListingErrors(t *testing.T) {
	e := newMarketplaceEnv(t)
	e.gh.FailNext(500, 1)
	if _, err := e.rec.Run(context.Background(), github.MarketplaceOptions{}); err == nil {
		t.Error("a run whose listing failed succeeded")
	}
	runs, _ := e.store.Runs(context.Background(), github.SourceMarketplace, 1)
	if len(runs) != 1 || runs[0].Result != "error" || runs[0].Error == "" {
		t.Errorf("runs %+v", runs)
	}
}

func TestSyntheticPurchase(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := github.MarketplaceAccount{
		ID: 18404719, Login: "username", Type: "Organization", OrganizationBillingEmail: "username@email.com",
		BillingCycle: "monthly", UnitCount: 10, NextBillingDate: time.Date(2017, 11, 5, 0, 0, 0, 0, time.UTC),
		UpdatedAt: time.Date(2017, 10, 25, 0, 0, 0, 0, time.UTC),
		Plan: github.MarketplaceTier{ID: 435, Name: "Basic Plan", Description: "Basic Plan", MonthlyPriceInCents: 1000,
			YearlyPriceInCents: 10000, PriceModel: "per-unit", HasFreeTrial: true, UnitName: "seat", Bullets: []string{"Is Basic"}},
	}
	ev, err := github.SyntheticPurchase(a, "changed", now)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Key != "reconcile:marketplace:18404719:changed:435:20171025T000000Z" || ev.ID != ev.Key || ev.Type != "marketplace_purchase" ||
		ev.Source != "github" || ev.Via != webhooks.ViaReconcile {
		t.Errorf("event %+v", ev)
	}
	want := `{"action":"changed","effective_date":"2017-10-25T00:00:00+00:00","marketplace_purchase":{` +
		`"account":{"type":"Organization","id":18404719,"login":"username","organization_billing_email":"username@email.com"},` +
		`"billing_cycle":"monthly","unit_count":10,"on_free_trial":false,"free_trial_ends_on":null,` +
		`"next_billing_date":"2017-11-05T00:00:00+00:00","plan":{"id":435,"name":"Basic Plan","description":"Basic Plan",` +
		`"monthly_price_in_cents":1000,"yearly_price_in_cents":10000,"price_model":"per-unit","has_free_trial":true,` +
		`"unit_name":"seat","bullets":["Is Basic"]}}}`
	if string(ev.Body) != want {
		t.Errorf("body\n got %s\nwant %s", ev.Body, want)
	}

	t.Run("WithoutUpdatedAt", func(t *testing.T) {
		b := a
		b.UpdatedAt = time.Time{}
		ev, _ := github.SyntheticPurchase(b, "purchased", now)
		if ev.Key != "reconcile:marketplace:18404719:purchased:435:2026-03-01" || !strings.Contains(string(ev.Body), `"effective_date":"2026-03-01T12:00:00+00:00"`) {
			t.Errorf("key %s body %s", ev.Key, ev.Body)
		}
	})

	// Every field of the synthetic body is where GitHub's own payload has
	// it, with the same JSON type (or null): the team's captured samples,
	// when they sit beside the checkout.
	t.Run("ShapedAsGitHubsPayload", func(t *testing.T) {
		sample, err := os.ReadFile(filepath.Join(receivertest.SharedSamples(t, "github"), "marketplace_purchase_changed.payload.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ours, theirs any
		if err := json.Unmarshal(ev.Body, &ours); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(sample, &theirs); err != nil {
			t.Fatal(err)
		}
		for _, problem := range shapeDiff("", ours, theirs) {
			t.Error(problem)
		}
	})
}

// shapeDiff lists the fields of ours that theirs lacks or types otherwise.
func shapeDiff(path string, ours, theirs any) []string {
	switch o := ours.(type) {
	case map[string]any:
		t, ok := theirs.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: an object, GitHub's is %T", path, theirs)}
		}
		var out []string
		for k, v := range o {
			tv, ok := t[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: not in GitHub's payload", path, k))
				continue
			}
			out = append(out, shapeDiff(path+"."+k, v, tv)...)
		}
		return out
	case nil:
		return nil
	default:
		if theirs != nil && fmt.Sprintf("%T", ours) != fmt.Sprintf("%T", theirs) {
			return []string{fmt.Sprintf("%s: %T, GitHub's is %T", path, ours, theirs)}
		}
	}
	return nil
}
