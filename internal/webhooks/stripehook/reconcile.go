package stripehook

import (
	"errors"
	"net/url"
	"strings"

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
		Doc:     "Stripe's API base URL (tests point it at a local server)",
		Default: "https://api.stripe.com",
		Check:   absoluteURL,
	}
)

func absoluteURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http(s) URL")
	}
	return nil
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
		api, err := reconcile.NewStripeAPI(reconcile.StripeConfig{Key: e.Settings.Env(apiKey.Name), BaseURL: e.Settings.Env(apiBase.Name)})
		if err != nil {
			return nil, err
		}
		store := reconcile.NewStore(e.Pool)
		return reconcile.StripeInstance{
			Stripe: &reconcile.Stripe{API: api, Provider: e.Provider, Decode: Decode, Processor: e.Processor,
				Claims: store, Store: store, Log: e.Log},
			PeriodicTypes: handledTypes,
		}, nil
	},
}
