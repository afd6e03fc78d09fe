package stripe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of Stripe's catch-up (server reconcile stripe).
var (
	apiKey = webhooks.Var{
		Name: "STRIPE_API_KEY",
		Doc: "a Stripe API key for catching up on events the endpoint missed (`server reconcile stripe`, " +
			"`RECONCILE_INTERVAL`): a restricted key with read access to Events is enough",
		Secret: true,
		Check: func(v string) error {
			if !strings.HasPrefix(v, "sk_") && !strings.HasPrefix(v, "rk_") {
				return errors.New("must be a secret (sk_…) or restricted (rk_…) key")
			}
			return nil
		},
		Mask: func(v string) string { return v[:3] + "****" },
	}
	apiBase = webhooks.Var{
		Name:    "STRIPE_API_BASE",
		Doc:     "Stripe's API base URL: `https://`, or `http://` to a loopback host (tests point it at a local server)",
		Default: "https://api.stripe.com",
		Check:   reconcile.CheckAPIBase,
	}
)

// ParseConnectAccounts reads STRIPE_CONNECT_ACCOUNTS: the accounts it lists
// (acct_…, in order, without repeats), and whether it is "*" (every
// account). "" lists none.
func ParseConnectAccounts(v string) (accounts []string, all bool, err error) {
	if strings.TrimSpace(v) == "" {
		return nil, false, nil
	}
	for _, a := range strings.Split(v, ",") {
		switch a = strings.TrimSpace(a); {
		case a == "":
			return nil, false, errors.New("has an empty entry between commas")
		case a == "*":
			all = true
		case !connectAccountID(a):
			return nil, false, fmt.Errorf("%s is not a connected account id (acct_…) nor *", webhooks.Quote(a, 40))
		case !slices.Contains(accounts, a):
			accounts = append(accounts, a)
		}
	}
	if all && len(accounts) > 0 {
		return nil, false, errors.New(`"*" already names every account: list accounts or "*", not both`)
	}
	return accounts, all, nil
}

// connectAccountID reports whether a is acct_ followed by up to 64
// letters, digits and underscores.
func connectAccountID(a string) bool {
	rest, ok := strings.CutPrefix(a, "acct_")
	if !ok || rest == "" || len(rest) > 64 {
		return false
	}
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Reconciler catches up on Stripe events the endpoint never received, from
// Stripe's Events API, through the same processor and claims as a
// delivery.
var Reconciler = reconcile.Reconciler{
	Name:   "stripe",
	Source: Source,
	Flags:  []string{"since", "resume", "types", "failed-only"},
	Unconfigured: func(env func(string) string) string {
		if env(apiKey.Name) == "" {
			return apiKey.Name + " is unset"
		}
		return ""
	},
	New: func(e reconcile.Env) (reconcile.Instance, error) {
		api, err := NewAPI(APIConfig{Key: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name)})
		if err != nil {
			return nil, err
		}
		accounts, all, err := ParseConnectAccounts(e.Settings.Env(connectAccounts.Name))
		if err != nil {
			return nil, fmt.Errorf("%s %w", connectAccounts.Name, err)
		}
		store := reconcile.NewStore(e.Pool)
		return instance{
			CatchUp: &CatchUp{API: api, Provider: e.Provider, Decode: Decode, Processor: e.Processor,
				Claims: store, Store: store, Log: e.Log, Accounts: accounts, AllAccounts: all},
			periodicTypes: catchUpTypes,
		}, nil
	},
}

// instance is the reconcile.Instance of Stripe's catch-up, with the
// event types the periodic job lists (those the provider acts on).
type instance struct {
	*CatchUp
	periodicTypes []string
}

// Run implements reconcile.Instance.
func (s instance) Run(ctx context.Context, o reconcile.Options) (reconcile.Summary, error) {
	so := CatchUpOptions{Since: o.Since, Resume: o.Resume, Types: o.Types, FailedOnly: o.FailedOnly, DryRun: o.DryRun,
		Trigger: o.Trigger}
	if o.Out != nil {
		so.OnEvent = func(r EventReport) {
			if o.DryRun || r.Disposition != reconcile.DispKnown {
				line := fmt.Sprintf("%s %s %s %s", r.Created.UTC().Format(time.RFC3339), r.ID, r.Type, r.Disposition)
				if r.Account != "" {
					line = r.Account + " " + line
				}
				if r.Err != nil {
					line += ": " + r.Err.Error()
				}
				fmt.Fprintln(o.Out, line)
			}
		}
		so.Progress = func(sum CatchUpSummary) {
			if sum.Found > 0 && sum.Found%100 == 0 {
				fmt.Fprintf(o.Out, "… %s\n", sum)
			}
		}
	}
	sum, err := s.CatchUp.Run(ctx, so)
	return sum, err
}

// Job implements reconcile.Instance.
func (s instance) Job() reconcile.Job {
	return s.CatchUp.Job(CatchUpOptions{Types: s.periodicTypes}, 0)
}

// Job returns the periodic job of Stripe: Resume from the cursor of the
// last run with o's filters, or from lookback ago (reconcile.DefaultLookback when 0)
// the first time, leaving events younger than o.Settle (reconcile.DefaultSettle
// when 0) to their delivery. Give it the types the receiver handles, so that
// what it counts as missed is what the endpoint should have received.
func (s *CatchUp) Job(o CatchUpOptions, lookback time.Duration) reconcile.Job {
	if lookback <= 0 {
		lookback = reconcile.DefaultLookback
	}
	if o.Settle <= 0 {
		o.Settle = reconcile.DefaultSettle
	}
	o.Resume, o.Since, o.DryRun, o.Trigger = true, lookback, false, reconcile.TriggerPeriodic
	return reconcile.Job{Source: Source, Run: func(ctx context.Context) (reconcile.Tally, error) {
		sum, err := s.Run(ctx, o)
		if err == nil {
			s.log().Info("reconcile stripe", "summary", sum.String())
		}
		return sum.Tally(), err
	}}
}
