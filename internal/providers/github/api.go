package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"
)

// MarketplacePlan is a plan of the app's Marketplace listing.
type MarketplacePlan struct {
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
	Plan      MarketplacePlan
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
	// nil: http.DefaultTransport with a 30 s timeout.
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
	hc := &http.Client{Timeout: 30 * time.Second}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
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

// Plans lists every plan of the listing, following the pages.
func (a *API) Plans(ctx context.Context) ([]MarketplacePlan, error) {
	var out []MarketplacePlan
	opts := &github.ListOptions{PerPage: 100}
	for {
		plans, resp, err := a.client.Marketplace.ListPlans(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list marketplace plans: %w", err)
		}
		for _, p := range plans {
			out = append(out, planOf(p))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// Accounts lists every account on the plan, following the pages.
func (a *API) Accounts(ctx context.Context, planID int64) ([]MarketplaceAccount, error) {
	var out []MarketplaceAccount
	opts := &github.ListOptions{PerPage: 100}
	for {
		accounts, resp, err := a.client.Marketplace.ListPlanAccountsForPlan(ctx, planID, opts)
		if err != nil {
			return nil, fmt.Errorf("list accounts of marketplace plan %d: %w", planID, err)
		}
		for _, acc := range accounts {
			out = append(out, accountOf(acc))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func planOf(p *github.MarketplacePlan) MarketplacePlan {
	if p == nil {
		return MarketplacePlan{}
	}
	var bullets []string
	if p.Bullets != nil {
		bullets = *p.Bullets
	}
	return MarketplacePlan{
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
		out.Plan = planOf(mp.Plan)
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
