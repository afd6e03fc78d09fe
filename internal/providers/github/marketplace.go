package github

// Catching up on the Marketplace (server reconcile github-marketplace):
// GitHub Marketplace has no delivery API, so its listing (plans and the
// accounts on each, API with the app's JWT) is compared with the
// Marketplace orders (Marketplace.Run). An account on a plan with no paid
// order becomes a synthetic marketplace_purchase "purchased" event, a plan
// that differs a synthetic "changed", each with a deterministic key and
// processed through this provider like a delivery, so that a second run is
// a duplicate and no step is ever sent twice. What cannot be corrected
// safely (a paid order for an account GitHub no longer lists: the date of
// its cancellation is unknown) is reported, never guessed.
//
// An account is only known to be listed on two plans once every plan is
// read, so the listing is held whole, within the run's bounds
// (reconcile.Held: at most Limits.MaxHeld accounts, and MaxHeldBytes of
// responses read), which stop a listing that grows without end; so do a
// page number GitHub gives twice and a page of accounts already listed
// (reconcile.Pages).

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// GitHub's names, as the GitHub provider uses them.
const (
	githubSource     = "github"
	marketplaceEvent = "marketplace_purchase"
)

// MarketplaceLister lists the app's Marketplace listing; *API is one.
type MarketplaceLister interface {
	Tiers(ctx context.Context) ([]MarketplaceTier, error)
	// AccountPages yields the accounts on a plan a page at a time.
	AccountPages(ctx context.Context, planID int64) iter.Seq2[[]MarketplaceAccount, error]
}

// Marketplace reconciles the GitHub Marketplace orders with GitHub's
// listing.
type Marketplace struct {
	API MarketplaceLister
	// Provider is the GitHub provider a delivery goes through.
	Provider  webhooks.Provider
	Processor reconcile.Processor
	Store     *reconcile.Store
	// Orders reads the Marketplace orders to compare (the pool).
	Orders orders.Lister
	Log    *slog.Logger     // nil: slog.Default()
	Now    func() time.Time // nil: time.Now
	// Limits bound every run (zero fields: reconcile's defaults); the
	// listing is held whole, within MaxHeld accounts and MaxHeldBytes.
	Limits reconcile.Limits
}

// MarketplaceOptions are the options of one run, the flags of
// `server reconcile github-marketplace`.
type MarketplaceOptions struct {
	// DryRun only reports: no correction, no record of the run, no lock.
	DryRun bool
	// Settle leaves accounts whose purchase GitHub changed less than this
	// long ago to the next run: their event may be on its way.
	Settle time.Duration
	// Trigger is recorded with the run: TriggerCLI (default) or
	// TriggerPeriodic.
	Trigger string
	// OnFinding, when set, is called with each finding once it is settled.
	OnFinding func(Finding)
}

// Kinds of findings: how an account or an order differs from GitHub's
// listing.
const (
	// An account GitHub lists on a plan has no order: its purchased event
	// was lost. Corrected with a synthetic "purchased".
	FindMissingOrder = "missing_order"
	// An account's paid order is on another plan (or unit count) than
	// GitHub lists: its changed event was lost. Corrected with a synthetic
	// "changed".
	FindPlanDiffers = "plan_differs"
	// An account's order was cancelled, and GitHub lists it on a plan
	// since a later date: a new purchase whose event was lost. Corrected
	// with a synthetic "purchased".
	FindRepurchased = "repurchased"
	// An account's order was cancelled, and GitHub still lists it, with no
	// sign that it bought again: reported.
	FindCancelledButListed = "cancelled_but_listed"
	// A paid order for an account GitHub no longer lists: its cancelled
	// event was lost, and the date of the cancellation is unknown, so it
	// is reported, not guessed.
	FindPaidNotListed = "paid_not_listed"
	// An account listed on two plans at once: reported.
	FindListedTwice = "listed_twice"
	// An order in a state Marketplace orders never take: reported.
	FindUnexpectedStatus = "unexpected_status"
)

// What became of a finding.
const (
	ResCorrected    = "corrected"     // the synthetic event was processed and the order now matches
	ResWouldCorrect = "would_correct" // dry run: a synthetic event would be processed
	ResDeferred     = "deferred"      // GitHub changed the purchase within Settle: left for the next run
	ResReported     = "reported"      // left for an operator
	ResNotConverged = "not_converged" // the synthetic event was processed, and the order still differs: reported
	ResFailed       = "failed"        // the synthetic event could not be processed; the next run retries
)

// Finding is an account or an order that differs from GitHub's listing,
// and what the run did about it.
type Finding struct {
	Kind      string `json:"kind"`
	AccountID int64  `json:"account_id"`
	Login     string `json:"login,omitempty"`
	// Listed is the plan GitHub lists the account on, "<plan id>:<plan
	// name>" as orders.plan spells it; empty if not listed.
	Listed string `json:"listed,omitempty"`
	// Order is the order's status and plan; empty if there is none.
	Order string `json:"order,omitempty"`
	// Correction is the action of the synthetic event ("purchased",
	// "changed"), and Key its event key; empty when only reported.
	Correction string `json:"correction,omitempty"`
	Key        string `json:"key,omitempty"`
	Result     string `json:"result"`
	Detail     string `json:"detail,omitempty"`
}

// String is the finding as the CLI prints it.
func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s account %d", f.Kind, f.AccountID)
	if f.Login != "" {
		fmt.Fprintf(&b, " (%s)", f.Login)
	}
	if f.Listed != "" {
		fmt.Fprintf(&b, ": GitHub lists plan %s", f.Listed)
	} else {
		b.WriteString(": GitHub lists no plan")
	}
	if f.Order != "" {
		fmt.Fprintf(&b, ", order %s", f.Order)
	} else {
		b.WriteString(", no order")
	}
	fmt.Fprintf(&b, " → %s", f.Result)
	if f.Correction != "" {
		fmt.Fprintf(&b, " (%s %s)", f.Correction, f.Key)
	}
	if f.Detail != "" {
		fmt.Fprintf(&b, ": %s", f.Detail)
	}
	return b.String()
}

// MarketplaceSummary is what a run found and did.
type MarketplaceSummary struct {
	DryRun    bool      `json:"dry_run,omitempty"`
	Plans     int       `json:"plans"`
	Accounts  int       `json:"accounts"`
	Orders    int       `json:"orders"`
	InSync    int       `json:"in_sync"`
	Findings  []Finding `json:"findings"`
	Corrected int       `json:"corrected"`
	// WouldCorrect counts, in a dry run, the findings a run would correct.
	WouldCorrect int `json:"would_correct,omitempty"`
	Deferred     int `json:"deferred"`
	Reported     int `json:"reported"` // reported and not converged
	Failed       int `json:"failed"`
}

// Missed is how many discrepancies the run found: events GitHub sent
// that never arrived, or never sent (deferred findings are not counted).
func (s MarketplaceSummary) Missed() int { return len(s.Findings) - s.Deferred }

// Tally is the summary's figures for the record of runs and the metrics.
func (s MarketplaceSummary) Tally() reconcile.Tally {
	return reconcile.Tally{Found: s.Accounts + s.Orders, Missed: s.Missed(), Unresolved: s.Reported + s.Failed}
}

// String is the summary as the CLI prints it; the findings are printed
// one by one with Finding.String.
func (s MarketplaceSummary) String() string {
	var b strings.Builder
	b.WriteString("github-marketplace")
	if s.DryRun {
		b.WriteString(" (dry run)")
	}
	fmt.Fprintf(&b, ": %s, %s listed, %s, %d in sync, %s", webhooks.Plural(s.Plans, "plan", "plans"),
		webhooks.Plural(s.Accounts, "account", "accounts"), webhooks.Plural(s.Orders, "order", "orders"), s.InSync,
		webhooks.Plural(len(s.Findings), "finding", "findings"))
	if s.DryRun {
		fmt.Fprintf(&b, ", %d would be corrected", s.WouldCorrect)
	} else {
		fmt.Fprintf(&b, ", %d corrected", s.Corrected)
	}
	fmt.Fprintf(&b, ", %d reported", s.Reported)
	if s.Deferred > 0 {
		fmt.Fprintf(&b, ", %d left for the next run", s.Deferred)
	}
	if s.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", s.Failed)
	}
	return b.String()
}

func (m *Marketplace) log() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.Default()
}

func (m *Marketplace) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// listed is an account as GitHub lists it.
type listed struct {
	MarketplaceAccount
	twice bool // also listed on another plan
}

// Run compares GitHub's listing with the Marketplace orders and corrects
// what can be corrected safely through the GitHub provider, as deliveries
// of the lost events would have. It returns ErrBusy when another run holds
// the lock, and an error wrapping ErrIncomplete when a correction could
// not be processed; the summary says what was done either way.
func (m *Marketplace) Run(ctx context.Context, o MarketplaceOptions) (MarketplaceSummary, error) {
	sum := MarketplaceSummary{DryRun: o.DryRun, Findings: []Finding{}}
	ctx, run, err := reconcile.Begin(ctx, m.Store, SourceMarketplace,
		reconcile.Options{DryRun: o.DryRun, Trigger: o.Trigger}, m.Limits, m.Log)
	if err != nil {
		return sum, err
	}
	defer run.End()
	if err := run.Start(ctx); err != nil {
		return sum, err
	}
	err = m.reconcile(ctx, o, &sum)
	return sum, run.Finish(ctx, sum, sum.Tally(), sum.Failed, "correction", "corrections", err)
}

func (m *Marketplace) reconcile(ctx context.Context, o MarketplaceOptions, sum *MarketplaceSummary) error {
	// The orders first, then GitHub: a purchase made in between is listed
	// with no order, and its correction meets the delivery's order as a
	// no-op, which is safe; the other way round it could look cancelled.
	ords, err := orders.ListBySource(ctx, m.Orders, SourceMarketplace)
	if err != nil {
		return fmt.Errorf("reconcile github marketplace: %w", err)
	}
	sum.Orders = len(ords)
	byKey := make(map[string]orders.Listing, len(ords))
	for _, o := range ords {
		byKey[o.ExternalID] = o
	}

	plans, err := m.API.Tiers(ctx)
	if err != nil {
		return fmt.Errorf("reconcile github marketplace: %w", err)
	}
	sum.Plans = len(plans)
	accounts := map[int64]*listed{}
	held := reconcile.Hold(ctx)
	for _, p := range plans {
		for as, err := range m.API.AccountPages(ctx, p.ID) {
			if err == nil {
				err = held.Add(len(as))
			}
			if err != nil {
				return fmt.Errorf("reconcile github marketplace: %w", err)
			}
			for _, a := range as {
				if a.Plan.ID == 0 {
					a.Plan = p
				}
				if prev, ok := accounts[a.ID]; ok {
					prev.twice = true
					continue
				}
				accounts[a.ID] = &listed{MarketplaceAccount: a}
				sum.Accounts++
			}
		}
	}

	now := m.now()
	for _, id := range slices.Sorted(maps.Keys(accounts)) {
		a := accounts[id]
		key := accountKey(id)
		ord, has := byKey[key]
		delete(byKey, key)
		f, ok := compare(a, ord, has)
		if !ok {
			sum.InSync++
			continue
		}
		switch {
		case f.Correction == "":
			f.Result = ResReported
		case o.Settle > 0 && !a.UpdatedAt.IsZero() && now.Sub(a.UpdatedAt) < o.Settle:
			f.Correction, f.Result = "", ResDeferred
			f.Detail = fmt.Sprintf("GitHub changed the purchase %s ago", now.Sub(a.UpdatedAt).Round(time.Second))
		case o.DryRun:
			f.Key = syntheticKey(a.MarketplaceAccount, f.Correction, now)
			f.Result = ResWouldCorrect
		default:
			m.correct(ctx, a.MarketplaceAccount, ord, has, &f, now)
		}
		sum.add(f, o.OnFinding)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	// Orders of accounts GitHub does not list.
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		ord := byKey[k]
		switch ord.Status {
		case orders.StatusCancelled:
			sum.InSync++
			continue
		}
		accountID, _ := strconv.ParseInt(strings.TrimPrefix(ord.ExternalID, "account:"), 10, 64)
		f := Finding{AccountID: accountID, Order: orderText(ord), Result: ResReported}
		if ord.Status == orders.StatusPaid {
			f.Kind = FindPaidNotListed
			f.Detail = "GitHub no longer lists the account; the date of its cancellation is unknown, so the order is left as it is"
		} else {
			f.Kind = FindUnexpectedStatus
		}
		sum.add(f, o.OnFinding)
	}
	return nil
}

func (s *MarketplaceSummary) add(f Finding, on func(Finding)) {
	s.Findings = append(s.Findings, f)
	switch f.Result {
	case ResCorrected:
		s.Corrected++
	case ResWouldCorrect:
		s.WouldCorrect++
	case ResDeferred:
		s.Deferred++
	case ResFailed:
		s.Failed++
	default:
		s.Reported++
	}
	if on != nil {
		on(f)
	}
}

// compare says how a listed account differs from its order, and which
// correction fits, if any is safe. ok is false when they agree.
func compare(a *listed, ord orders.Listing, has bool) (f Finding, ok bool) {
	f = Finding{AccountID: a.ID, Login: a.Login, Listed: tierText(a.Plan)}
	if has {
		f.Order = orderText(ord)
	}
	switch {
	case a.twice:
		f.Kind = FindListedTwice
		f.Detail = "GitHub lists the account on more than one plan"
	case !has:
		f.Kind, f.Correction = FindMissingOrder, "purchased"
	case ord.Status == orders.StatusPaid:
		if agrees(a.MarketplaceAccount, ord) {
			return Finding{}, false // a renamed plan is the same plan
		}
		if planID(ord.Tier) == a.Plan.ID {
			want, _ := price(a.MarketplaceAccount)
			f.Detail = fmt.Sprintf("amount %d, GitHub's plan and unit count make %d", ord.AmountCents, want)
		}
		f.Kind, f.Correction = FindPlanDiffers, "changed"
	case ord.Status == orders.StatusCancelled:
		if !a.UpdatedAt.IsZero() && !ord.EffectiveAt.IsZero() && a.UpdatedAt.After(ord.EffectiveAt) {
			f.Kind, f.Correction = FindRepurchased, "purchased"
			f.Detail = fmt.Sprintf("GitHub changed the purchase on %s, after the cancellation of %s",
				a.UpdatedAt.UTC().Format(time.RFC3339), ord.EffectiveAt.UTC().Format(time.RFC3339))
			break
		}
		f.Kind = FindCancelledButListed
		f.Detail = "nothing shows a purchase after the cancellation"
	default:
		f.Kind = FindUnexpectedStatus
	}
	return f, true
}

// correct processes the synthetic event of a finding and checks that the
// order now agrees with GitHub.
func (m *Marketplace) correct(ctx context.Context, a MarketplaceAccount, ord orders.Listing, has bool, f *Finding, now time.Time) {
	ev, err := SyntheticPurchase(a, f.Correction, now)
	if err != nil {
		f.Result, f.Detail = ResFailed, err.Error()
		return
	}
	f.Key = ev.Key
	res := m.Processor.Process(ctx, m.Provider, ev)
	switch res.Outcome {
	case webhooks.OutcomeProcessed, webhooks.OutcomeDuplicate, webhooks.OutcomeStepFailed, webhooks.OutcomeLeaseConflict:
		// The event's writes committed (now or in an earlier run); its steps
		// run, or are finished by the redriver.
	case webhooks.OutcomeIgnored, webhooks.OutcomeParked:
		f.Result = ResNotConverged
		f.Detail = fmt.Sprintf("the GitHub provider answered %s", res.Outcome)
		return
	default:
		f.Result = ResFailed
		f.Detail = fmt.Sprintf("outcome %s: %v", res.Outcome, res.Err)
		m.log().Error("reconcile github marketplace: correction not processed", "key", ev.Key, "error", res.Err)
		return
	}
	after, ok, err := orders.ListingOf(ctx, m.Orders, SourceMarketplace, accountKey(a.ID))
	switch {
	case err != nil:
		f.Result, f.Detail = ResFailed, err.Error()
	case ok && agrees(a, after):
		f.Result = ResCorrected
		f.Order = orderText(after)
	default:
		f.Result = ResNotConverged
		if ok {
			f.Detail = fmt.Sprintf("outcome %s, and the order is now %s", res.Outcome, orderText(after))
		} else {
			f.Detail = fmt.Sprintf("outcome %s, and there is still no order", res.Outcome)
		}
	}
}

// agrees reports whether a paid order is what GitHub lists for the account:
// the same plan id (a renamed plan is the same plan) and, when it can be
// computed, the same amount (a per-unit plan's unit count).
func agrees(a MarketplaceAccount, o orders.Listing) bool {
	if o.Status != orders.StatusPaid || planID(o.Tier) != a.Plan.ID {
		return false
	}
	want, err := price(a)
	return err != nil || want == o.AmountCents
}

func accountKey(id int64) string { return "account:" + strconv.FormatInt(id, 10) }

func tierText(p MarketplaceTier) string { return strconv.FormatInt(p.ID, 10) + ":" + p.Name }

func orderText(o orders.Listing) string { return string(o.Status) + " " + o.Tier }

// planID reads the plan id of orders.plan ("<plan id>:<plan name>").
func planID(plan string) int64 {
	id, _, _ := strings.Cut(plan, ":")
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// price is what the GitHub provider records as the order's amount.
func price(a MarketplaceAccount) (int64, error) {
	return MarketplacePrice(a.BillingCycle, a.Plan.PriceModel, a.Plan.MonthlyPriceInCents, a.Plan.YearlyPriceInCents, a.UnitCount)
}

// MarketplacePrice is what a Marketplace purchase costs per billing cycle,
// the amount of its order, whether a delivery or a reconciliation records
// it: the plan's price for the cycle, times the unit count for a per-unit
// plan. GitHub spells price models both FLAT_RATE and flat-rate.
func MarketplacePrice(billingCycle, priceModel string, monthlyCents, yearlyCents, units int64) (int64, error) {
	var unit int64
	switch strings.ToLower(billingCycle) {
	case "monthly":
		unit = monthlyCents
	case "yearly":
		unit = yearlyCents
	default:
		return 0, fmt.Errorf("billing_cycle %q", billingCycle)
	}
	switch strings.ReplaceAll(strings.ToLower(priceModel), "_", "-") {
	case "flat-rate", "free":
		return unit, nil
	case "per-unit":
		if units < 0 || (units > 0 && unit > math.MaxInt64/units) {
			return 0, fmt.Errorf("unit_count %d at %d cents", units, unit)
		}
		return unit * units, nil
	}
	return 0, fmt.Errorf("price_model %q", priceModel)
}

// syntheticKey is the deterministic event key of a correction: the
// account, the action, the plan and when GitHub last changed the purchase
// (the day of the run when the listing does not say), so that a second run
// over the same listing is a duplicate of the first.
func syntheticKey(a MarketplaceAccount, action string, now time.Time) string {
	when := now.UTC().Format("2006-01-02")
	if !a.UpdatedAt.IsZero() {
		when = a.UpdatedAt.UTC().Format("20060102T150405Z")
	}
	return fmt.Sprintf("reconcile:marketplace:%d:%s:%d:%s", a.ID, action, a.Plan.ID, when)
}

// The body of a synthetic marketplace_purchase event, shaped as GitHub's
// payload (field names, order and spelling). There is no sender (nobody
// acted) and no previous_marketplace_purchase (what the order had is not
// all of it).
type purchasePayload struct {
	Action              string       `json:"action"`
	EffectiveDate       string       `json:"effective_date"`
	MarketplacePurchase purchaseBody `json:"marketplace_purchase"`
}

type purchaseBody struct {
	Account struct {
		Type                     string  `json:"type"`
		ID                       int64   `json:"id"`
		Login                    string  `json:"login"`
		OrganizationBillingEmail *string `json:"organization_billing_email"`
	} `json:"account"`
	BillingCycle    string   `json:"billing_cycle"`
	UnitCount       int64    `json:"unit_count"`
	OnFreeTrial     bool     `json:"on_free_trial"`
	FreeTrialEndsOn *string  `json:"free_trial_ends_on"`
	NextBillingDate *string  `json:"next_billing_date"`
	Plan            planBody `json:"plan"`
}

type planBody struct {
	ID                  int64    `json:"id"`
	Name                string   `json:"name"`
	Description         string   `json:"description"`
	MonthlyPriceInCents int64    `json:"monthly_price_in_cents"`
	YearlyPriceInCents  int64    `json:"yearly_price_in_cents"`
	PriceModel          string   `json:"price_model"`
	HasFreeTrial        bool     `json:"has_free_trial"`
	UnitName            *string  `json:"unit_name"`
	Bullets             []string `json:"bullets"`
}

// githubTime is GitHub's spelling of times in marketplace_purchase
// payloads ("2017-10-25T00:00:00+00:00").
func githubTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05-07:00")
	return &s
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// SyntheticPurchase builds the marketplace_purchase event with action
// ("purchased" or "changed") that GitHub would have sent for the account
// as listed: its body shaped as GitHub's payload, effective at the time
// GitHub last changed the purchase (now when the listing does not say), its
// key deterministic (see syntheticKey) and its ID the key, so that the
// order it makes is unique by event as every order is. It is marked Via
// "reconcile" and carries no body hash: nothing was signed.
func SyntheticPurchase(a MarketplaceAccount, action string, now time.Time) (webhooks.Event, error) {
	effective := a.UpdatedAt
	if effective.IsZero() {
		effective = now
	}
	var p purchasePayload
	p.Action = action
	p.EffectiveDate = *githubTime(effective)
	mp := &p.MarketplacePurchase
	mp.Account.Type = a.Type
	if mp.Account.Type == "" {
		mp.Account.Type = "Organization"
	}
	mp.Account.ID = a.ID
	mp.Account.Login = a.Login
	mp.Account.OrganizationBillingEmail = nullable(a.OrganizationBillingEmail)
	mp.BillingCycle = strings.ToLower(a.BillingCycle)
	mp.UnitCount = a.UnitCount
	mp.OnFreeTrial = a.OnFreeTrial
	mp.FreeTrialEndsOn = githubTime(a.FreeTrialEndsOn)
	mp.NextBillingDate = githubTime(a.NextBillingDate)
	mp.Plan = planBody{
		ID:                  a.Plan.ID,
		Name:                a.Plan.Name,
		Description:         a.Plan.Description,
		MonthlyPriceInCents: a.Plan.MonthlyPriceInCents,
		YearlyPriceInCents:  a.Plan.YearlyPriceInCents,
		PriceModel:          a.Plan.PriceModel,
		HasFreeTrial:        a.Plan.HasFreeTrial,
		UnitName:            nullable(a.Plan.UnitName),
		Bullets:             a.Plan.Bullets,
	}
	if mp.Plan.Bullets == nil {
		mp.Plan.Bullets = []string{}
	}
	body, err := json.Marshal(p)
	if err != nil {
		return webhooks.Event{}, fmt.Errorf("synthetic %s for account %d: %w", action, a.ID, err)
	}
	key := syntheticKey(a, action, now)
	return reconcile.Reconciled(webhooks.Event{
		Source: githubSource,
		Key:    key,
		ID:     key,
		Type:   marketplaceEvent,
		Body:   body,
	}), nil
}
