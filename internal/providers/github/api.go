package github

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"

	"github.com/paywebhooks/receiver/internal/reconcile"
)

// MarketplaceTier is a plan of the app's Marketplace listing (GitHub calls it a plan; here Plan is the core's webhooks.Plan).
type MarketplaceTier struct {
	ID                  int64
	Name                string
	Description         string
	MonthlyPriceInCents int64
	YearlyPriceInCents  int64
	PriceModel          string // as GitHub spells it: FLAT_RATE, PER_UNIT, FREE (or flat-rate, …)
	UnitName            string
	HasFreeTrial        bool
	Bullets             []string
}

// MarketplaceAccount is a GitHub account on a plan, as the listing shows it.
type MarketplaceAccount struct {
	ID                       int64
	Login                    string
	Type                     string // Organization, User
	OrganizationBillingEmail string
	BillingCycle             string // monthly, yearly
	UnitCount                int64
	OnFreeTrial              bool
	FreeTrialEndsOn          time.Time // zero: none
	NextBillingDate          time.Time // zero: none
	// UpdatedAt is when GitHub last changed the purchase; zero when the
	// listing does not say.
	UpdatedAt time.Time
	Plan      MarketplaceTier
	// PendingChange is a change that takes effect at the end of the
	// billing cycle; the account is still on Plan until then.
	PendingChange *MarketplacePendingChange
}

// MarketplacePendingChange is a plan change waiting for the end of the
// billing cycle.
type MarketplacePendingChange struct {
	EffectiveDate time.Time
	UnitCount     int64
	PlanID        int64 // 0: none (a cancellation)
}

// APIConfig configures the GitHub API client.
type APIConfig struct {
	AppID int64 // GITHUB_APP_ID
	// PrivateKey is the app's private key as PEM (see ReadPrivateKey).
	PrivateKey []byte
	// BaseURL is the REST API's base URL (GITHUB_API_URL); empty: GitHub's.
	BaseURL string
	// HTTPClient's transport carries the requests, under the app's JWT;
	// nil: reconcile.NewClient's for BaseURL, which sends the JWT to
	// BaseURL's origin only and bounds every run (see reconcile.Bound).
	HTTPClient *http.Client
	// Stubbed lists GitHub's stubbed Marketplace data instead of the
	// listing's (/marketplace_listing/stubbed/…), for trying an app out.
	Stubbed bool
}

// API lists the app's Marketplace listing with google/go-github,
// authenticated as the GitHub App with a JWT from ghinstallation: the
// Marketplace listing endpoints take no installation token.
type API struct {
	client *github.Client
}

// ReadPrivateKey reads GITHUB_APP_PRIVATE_KEY: the PEM text itself, or the
// path of a file holding it.
func ReadPrivateKey(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, errors.New("github app private key: empty")
	}
	if strings.HasPrefix(v, "-----BEGIN") {
		return []byte(v + "\n"), nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("github app private key: %w", err)
	}
	return b, nil
}

// NewAPI returns a client of the Marketplace listing API for the app.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.AppID <= 0 {
		return nil, errors.New("github api: no app id")
	}
	var hc *http.Client
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	} else {
		base := cfg.BaseURL
		if base == "" {
			base = defaultAPIURL
		}
		c, err := reconcile.NewClient(base)
		if err != nil {
			return nil, fmt.Errorf("github api: %w", err)
		}
		hc = c
	}
	tr := hc.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	atr, err := ghinstallation.NewAppsTransport(tr, cfg.AppID, cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("github api: %w", err)
	}
	if cfg.BaseURL != "" {
		atr.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	}
	hc.Transport = atr
	opts := []github.ClientOptionsFunc{github.WithHTTPClient(hc)}
	if cfg.BaseURL != "" {
		base := cfg.BaseURL
		if !strings.HasSuffix(base, "/") {
			base += "/"
		}
		opts = append(opts, github.WithURLs(&base, nil))
	}
	client, err := github.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("github api: %w", err)
	}
	client.Marketplace.Stubbed = cfg.Stubbed
	return &API{client: client}, nil
}

// defaultAPIURL is GitHub's REST API (GITHUB_API_URL's default).
const defaultAPIURL = "https://api.github.com"

// Plans lists every plan of the listing, following the pages (each page
// within the run's bounds: see AccountPages).
func (a *API) Tiers(ctx context.Context) ([]MarketplaceTier, error) {
	var out []MarketplaceTier
	pages, held := reconcile.NewPages(ctx), reconcile.Hold(ctx)
	seen := map[int64]bool{}
	opts := &github.ListOptions{PerPage: 100}
	for {
		if err := pages.Next(pageCursor(opts.Page)); err != nil {
			return nil, fmt.Errorf("list marketplace plans: %w", err)
		}
		plans, resp, err := a.client.Marketplace.ListPlans(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list marketplace plans: %w", err)
		}
		fresh := 0
		for _, p := range plans {
			if !seen[p.GetID()] {
				seen[p.GetID()] = true
				fresh++
				out = append(out, tierOf(p))
			}
		}
		if err := errors.Join(pages.Got(fresh, resp.NextPage != 0), held.Add(fresh)); err != nil {
			return nil, fmt.Errorf("list marketplace plans: %w", err)
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// AccountPages lists the accounts on the plan a page at a time, each
// account once, for a consumer that bounds what it holds (reconcile.Held):
// GitHub pages by number (Link: rel="next"), and a listing whose next page
// is one it read before, or that says more follows a page of accounts it
// had all listed already, stops the run (reconcile.Pages), as does one
// longer than the run's pages.
func (a *API) AccountPages(ctx context.Context, planID int64) iter.Seq2[[]MarketplaceAccount, error] {
	return func(yield func([]MarketplaceAccount, error) bool) {
		pages := reconcile.NewPages(ctx)
		seen := map[int64]bool{}
		opts := &github.ListOptions{PerPage: 100}
		for {
			if err := pages.Next(pageCursor(opts.Page)); err != nil {
				yield(nil, fmt.Errorf("list accounts of marketplace plan %d: %w", planID, err))
				return
			}
			accounts, resp, err := a.client.Marketplace.ListPlanAccountsForPlan(ctx, planID, opts)
			if err != nil {
				yield(nil, fmt.Errorf("list accounts of marketplace plan %d: %w", planID, err))
				return
			}
			page := make([]MarketplaceAccount, 0, len(accounts))
			for _, acc := range accounts {
				if !seen[acc.GetID()] {
					seen[acc.GetID()] = true
					page = append(page, accountOf(acc))
				}
			}
			if err := pages.Got(len(page), resp.NextPage != 0); err != nil {
				yield(nil, fmt.Errorf("list accounts of marketplace plan %d: %w", planID, err))
				return
			}
			if !yield(page, nil) || resp.NextPage == 0 {
				return
			}
			opts.Page = resp.NextPage
		}
	}
}

// Accounts lists every account on the plan, following the pages, within
// the run's bound on what a listing may hold.
func (a *API) Accounts(ctx context.Context, planID int64) ([]MarketplaceAccount, error) {
	var out []MarketplaceAccount
	held := reconcile.Hold(ctx)
	for page, err := range a.AccountPages(ctx, planID) {
		if err == nil {
			err = held.Add(len(page))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
	}
	return out, nil
}

// pageCursor is a page number as reconcile.Pages follows it; 0 (the first
// page, asked for without a number) is page 1.
func pageCursor(page int) string { return "page=" + strconv.Itoa(max(page, 1)) }

func tierOf(p *github.MarketplacePlan) MarketplaceTier {
	if p == nil {
		return MarketplaceTier{}
	}
	var bullets []string
	if p.Bullets != nil {
		bullets = *p.Bullets
	}
	return MarketplaceTier{
		ID:                  p.GetID(),
		Name:                p.GetName(),
		Description:         p.GetDescription(),
		MonthlyPriceInCents: int64(p.GetMonthlyPriceInCents()),
		YearlyPriceInCents:  int64(p.GetYearlyPriceInCents()),
		PriceModel:          p.GetPriceModel(),
		UnitName:            p.GetUnitName(),
		HasFreeTrial:        p.GetHasFreeTrial(),
		Bullets:             bullets,
	}
}

func accountOf(a *github.MarketplacePlanAccount) MarketplaceAccount {
	out := MarketplaceAccount{
		ID:                       a.GetID(),
		Login:                    a.GetLogin(),
		Type:                     a.GetType(),
		OrganizationBillingEmail: a.GetOrganizationBillingEmail(),
	}
	if mp := a.MarketplacePurchase; mp != nil {
		out.BillingCycle = mp.GetBillingCycle()
		out.UnitCount = int64(mp.GetUnitCount())
		out.OnFreeTrial = mp.GetOnFreeTrial()
		out.FreeTrialEndsOn = mp.GetFreeTrialEndsOn().Time
		out.NextBillingDate = mp.GetNextBillingDate().Time
		out.UpdatedAt = mp.GetUpdatedAt().Time
		out.Plan = tierOf(mp.Plan)
	}
	if pc := a.MarketplacePendingChange; pc != nil {
		out.PendingChange = &MarketplacePendingChange{
			EffectiveDate: pc.GetEffectiveDate().Time,
			UnitCount:     int64(pc.GetUnitCount()),
		}
		if pc.Plan != nil {
			out.PendingChange.PlanID = pc.Plan.GetID()
		}
	}
	return out
}
