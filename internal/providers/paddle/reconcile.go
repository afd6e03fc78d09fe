package paddle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of Paddle's catch-up (server reconcile paddle).
var (
	apiKey = webhooks.Var{
		Name: "PADDLE_API_KEY",
		Doc: "a Paddle API key for catching up on events the notification destination missed " +
			"(`server reconcile paddle`, `RECONCILE_INTERVAL`): a key with the permission to read events is enough",
		Secret: true,
		Check: func(v string) error {
			if len(v) < 16 || strings.ContainsAny(v, " \t\r\n") {
				return errors.New("is not a Paddle API key")
			}
			return nil
		},
		Mask: func(v string) string {
			// pdl_live_apikey_…, pdl_sdbx_apikey_…: the mode may be shown.
			if i := strings.Index(v, "apikey_"); strings.HasPrefix(v, "pdl_") && i > 0 {
				return v[:i+len("apikey_")] + "****"
			}
			return "****"
		},
	}
	apiBase = webhooks.Var{
		Name: "PADDLE_API_BASE",
		Doc: "Paddle's API base URL (`https://sandbox-api.paddle.com` for the sandbox): `https://`, " +
			"or `http://` to a loopback host (tests point it at a local server)",
		Default: DefaultAPIBase,
		Check:   reconcile.CheckAPIBase,
	}
)

// init declares the catch-up's variables among the Spec's (paddle.go
// declares the provider's own), once.
func init() {
	for _, v := range []webhooks.Var{apiKey, apiBase} {
		declared := false
		for _, w := range Spec.Vars {
			declared = declared || w.Name == v.Name
		}
		if !declared {
			Spec.Vars = append(Spec.Vars, v)
		}
	}
}

// Reconciler catches up on Paddle events the notification destination
// never received, from Paddle's List Events API, through the same
// processor and claims as a delivery.
var Reconciler = reconcile.Reconciler{
	Name:   "paddle",
	Source: Source,
	Flags:  []string{"since", "resume", "types"},
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
		store := reconcile.NewStore(e.Pool)
		return instance{CatchUp: &CatchUp{API: api, Provider: e.Provider, Decode: Decode, Processor: e.Processor,
			Claims: store, Store: store, Log: e.Log}}, nil
	},
}

// instance is the reconcile.Instance of Paddle's catch-up.
type instance struct{ *CatchUp }

// Run implements reconcile.Instance.
func (s instance) Run(ctx context.Context, o reconcile.Options) (reconcile.Summary, error) {
	po := CatchUpOptions{Since: o.Since, Resume: o.Resume, Types: o.Types, DryRun: o.DryRun, Trigger: o.Trigger}
	if o.Out != nil {
		po.OnEvent = func(r EventReport) {
			if o.DryRun || r.Disposition != reconcile.DispKnown {
				line := fmt.Sprintf("%s %s %s %s", r.OccurredAt.UTC().Format(time.RFC3339), r.ID, r.Type, r.Disposition)
				if r.Err != nil {
					line += ": " + r.Err.Error()
				}
				fmt.Fprintln(o.Out, line)
			}
		}
		po.Progress = func(sum CatchUpSummary) {
			if sum.Found > 0 && sum.Found%1000 == 0 {
				fmt.Fprintf(o.Out, "… %s\n", sum)
			}
		}
	}
	return s.CatchUp.Run(ctx, po)
}

// Job implements reconcile.Instance.
func (s instance) Job() reconcile.Job { return s.CatchUp.Job(CatchUpOptions{Types: handledTypes}, 0) }

// Job returns the periodic job of Paddle: Resume from the cursor of the
// last run with o's filters, or from lookback ago (reconcile.DefaultLookback
// when 0) the first time, leaving events younger than o.Settle
// (reconcile.DefaultSettle when 0) to their delivery. Give it the types the
// receiver handles, so that what it counts as missed is what the
// destination should have received.
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
			s.log().Info("reconcile paddle", "summary", sum.String())
		}
		return sum.Tally(), err
	}}
}
