package github

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of the Marketplace's catch-up (server reconcile
// github-marketplace): the GitHub App that owns the listing.
var (
	appID = webhooks.Var{
		Name: "GITHUB_APP_ID",
		Doc:  "the GitHub App that owns the Marketplace listing, for `server reconcile github-marketplace`",
		Check: func(v string) error {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
				return errors.New("must be the app's numeric id")
			}
			return nil
		},
	}
	appKey = webhooks.Var{
		Name:   "GITHUB_APP_PRIVATE_KEY",
		Doc:    "the app's private key, as PEM text or the path of a PEM file",
		Secret: true,
		Check: func(v string) error {
			_, err := ReadPrivateKey(v)
			return err
		},
	}
	apiURL = webhooks.Var{
		Name:    "GITHUB_API_URL",
		Doc:     "GitHub's REST API base URL: `https://`, or `http://` to a loopback host (tests point it at a local server)",
		Default: defaultAPIURL,
		Check:   reconcile.CheckAPIBase,
	}
)

// Reconciler compares the Marketplace orders with GitHub's listing of the
// app's plans and accounts, and corrects what it safely can through the
// same processor and conditional updates as a delivery.
var Reconciler = reconcile.Reconciler{
	Name:   "github-marketplace",
	Source: Source,
	Unconfigured: func(env func(string) string) string {
		if env(appID.Name) == "" || env(appKey.Name) == "" {
			return appID.Name + " and " + appKey.Name + " must be set"
		}
		return ""
	},
	New: func(e reconcile.Env) (reconcile.Instance, error) {
		key, err := ReadPrivateKey(e.Settings.Env(appKey.Name))
		if err != nil {
			return nil, err
		}
		id, _ := strconv.ParseInt(e.Settings.Env(appID.Name), 10, 64)
		api, err := NewAPI(APIConfig{AppID: id, PrivateKey: key, BaseURL: e.Settings.Env(apiURL.Name)})
		if err != nil {
			return nil, err
		}
		return instance{Marketplace: &Marketplace{API: api, Provider: e.Provider,
			Processor: e.Processor, Store: reconcile.NewStore(e.Pool), Orders: e.Pool, Log: e.Log}}, nil
	},
}

// instance is the reconcile.Instance of the Marketplace's catch-up.
type instance struct{ *Marketplace }

// Run implements reconcile.Instance.
func (m instance) Run(ctx context.Context, o reconcile.Options) (reconcile.Summary, error) {
	mo := MarketplaceOptions{DryRun: o.DryRun, Trigger: o.Trigger}
	if o.Out != nil {
		mo.OnFinding = func(f Finding) { fmt.Fprintln(o.Out, f.String()) }
	}
	sum, err := m.Marketplace.Run(ctx, mo)
	return sum, err
}

// Job implements reconcile.Instance.
func (m instance) Job() reconcile.Job { return m.Marketplace.Job(MarketplaceOptions{}) }

// Job returns the periodic job of the Marketplace, leaving purchases GitHub
// changed within o.Settle (reconcile.DefaultSettle when 0) to their delivery.
func (m *Marketplace) Job(o MarketplaceOptions) reconcile.Job {
	if o.Settle <= 0 {
		o.Settle = reconcile.DefaultSettle
	}
	o.DryRun, o.Trigger = false, reconcile.TriggerPeriodic
	return reconcile.Job{Source: SourceMarketplace, Run: func(ctx context.Context) (reconcile.Tally, error) {
		sum, err := m.Run(ctx, o)
		if err == nil {
			m.log().Info("reconcile github marketplace", "summary", sum.String())
			for _, f := range sum.Findings {
				m.log().Warn("reconcile github marketplace: finding", "finding", f.String())
			}
		}
		return sum.Tally(), err
	}}
}
