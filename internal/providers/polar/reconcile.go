package polar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of Polar's catch-up (server reconcile polar).
var (
	apiKey = webhooks.Var{
		Name: "POLAR_API_KEY",
		Doc: "a Polar organization access token for catching up on events the endpoint missed " +
			"(`server reconcile polar`, `RECONCILE_INTERVAL`), from the webhook endpoint's deliveries: the `webhooks:read` scope is enough",
		Secret: true,
		Check: func(v string) error {
			if len(v) < 16 || strings.ContainsAny(v, " \t\r\n") {
				return errors.New("is not a Polar access token")
			}
			return nil
		},
		Mask: func(v string) string {
			if strings.HasPrefix(v, "polar_oat_") {
				return "polar_oat_****"
			}
			return "****"
		},
	}
	apiBase = webhooks.Var{
		Name: "POLAR_API_BASE",
		Doc: "Polar's API base URL (`https://sandbox-api.polar.sh` for the sandbox): `https://`, " +
			"or `http://` to a loopback host (tests point it at a local server)",
		Default: DefaultAPIBase,
		Check:   reconcile.CheckAPIBase,
	}
	endpointID = webhooks.Var{
		Name: "POLAR_WEBHOOK_ENDPOINT_ID",
		Doc: "the id of the Polar webhook endpoint that posts to this receiver (Polar > Settings > Webhooks), " +
			"whose deliveries `server reconcile polar` reads: an organization's other endpoints send other webhook-ids",
		Check: checkUUID,
	}
)

// checkUUID accepts a UUID as Polar writes ids: 8-4-4-4-12 hex digits.
func checkUUID(v string) error {
	if len(v) != 36 {
		return errors.New("is not a UUID (8-4-4-4-12 hex digits)")
	}
	for i, c := range v {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return errors.New("is not a UUID (8-4-4-4-12 hex digits)")
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return errors.New("is not a UUID (8-4-4-4-12 hex digits)")
		}
	}
	return nil
}

// init declares the catch-up's variables among the Spec's (polar.go
// declares the provider's own), once.
func init() {
	for _, v := range []webhooks.Var{apiKey, apiBase, endpointID} {
		declared := false
		for _, w := range Spec.Vars {
			declared = declared || w.Name == v.Name
		}
		if !declared {
			Spec.Vars = append(Spec.Vars, v)
		}
	}
}

// Reconciler catches up on Polar events the endpoint missed, from the
// endpoint's deliveries as Polar's API lists them, through the same
// processor and claims as a delivery.
var Reconciler = reconcile.Reconciler{
	Name:   "polar",
	Source: Source,
	Flags:  []string{"since", "resume"},
	Unconfigured: func(env func(string) string) string {
		switch {
		case env(apiKey.Name) == "":
			return apiKey.Name + " is unset"
		case env(endpointID.Name) == "":
			return endpointID.Name + " is unset"
		}
		return ""
	},
	New: func(e reconcile.Env) (reconcile.Instance, error) {
		api, err := NewAPI(APIConfig{Token: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name)})
		if err != nil {
			return nil, err
		}
		store := reconcile.NewStore(e.Pool)
		return instance{CatchUp: &CatchUp{API: api, Endpoint: e.Settings.Env(endpointID.Name), Provider: e.Provider,
			Processor: e.Processor, Claims: store, Store: store, Log: e.Log}}, nil
	},
}

// instance is the reconcile.Instance of Polar's catch-up.
type instance struct{ *CatchUp }

// Run implements reconcile.Instance.
func (s instance) Run(ctx context.Context, o reconcile.Options) (reconcile.Summary, error) {
	po := CatchUpOptions{Since: o.Since, Resume: o.Resume, DryRun: o.DryRun, Trigger: o.Trigger}
	if o.Out != nil {
		po.OnEvent = func(r EventReport) {
			if o.DryRun || r.Disposition != reconcile.DispKnown {
				line := fmt.Sprintf("%s %s %s %s", r.CreatedAt.UTC().Format(time.RFC3339), r.ID, r.Type, r.Disposition)
				if r.Err != nil {
					line += ": " + r.Err.Error()
				}
				fmt.Fprintln(o.Out, line)
			}
		}
	}
	return s.CatchUp.Run(ctx, po)
}

// Job implements reconcile.Instance.
func (s instance) Job() reconcile.Job { return s.CatchUp.Job(0) }

// Job returns the periodic job of Polar: Resume from the end of the last
// run's window, or from lookback ago (reconcile.DefaultLookback when 0)
// the first time, leaving deliveries younger than reconcile.DefaultSettle
// to finish. Polar retries a failed delivery for about 35 minutes, so a
// run finds what the endpoint missed once Polar has given up, or while it
// still retries.
func (s *CatchUp) Job(lookback time.Duration) reconcile.Job {
	if lookback <= 0 {
		lookback = reconcile.DefaultLookback
	}
	o := CatchUpOptions{Resume: true, Since: lookback, Settle: reconcile.DefaultSettle, Trigger: reconcile.TriggerPeriodic}
	return reconcile.Job{Source: Source, Run: func(ctx context.Context) (reconcile.Tally, error) {
		sum, err := s.Run(ctx, o)
		if err == nil {
			s.log().Info("reconcile polar", "summary", sum.String())
		}
		return sum.Tally(), err
	}}
}
