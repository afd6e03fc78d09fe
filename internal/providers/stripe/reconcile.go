package stripe

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of Stripe's catch-up (server reconcile stripe).
var (
	apiKey = webhooks.Var{
		Name: "STRIPE_API_KEY",
		Doc: "a Stripe API key for catching up on events the endpoint missed (`server reconcile stripe`, " +
			"`RECONCILE_INTERVAL`): a restricted key with read access to Events is enough; thin events " +
			"(`STRIPE_THIN_WEBHOOK_SECRET`) are fetched with it from `/v2`, which Stripe opens to secret keys (`sk_…`)",
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
// Stripe's Events API (API.List), through the same processor and claims as
// a delivery (reconcile.Events). An event fetched over TLS with the API key
// is authentic without a signature; its stored body is its JSON object byte
// for byte as the API returned it.
//
// A platform with connected accounts (STRIPE_CONNECT_ACCOUNTS) has their
// events too: those are not in the platform's own listing, but in each
// account's, read with the Stripe-Account header: a run lists the
// platform's events, then each listed account's, each with a cursor of its
// own. An account list of "*" cannot be enumerated from the events API:
// the run says so (NoteAllAccounts), and lists the platform's own events
// only.
var Reconciler = reconcile.Reconciler{
	Name:         "stripe",
	Source:       Source,
	Flags:        []string{"since", "resume", "types", "failed-only"},
	Unconfigured: reconcile.Requires(apiKey.Name),
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
		r := Events(api, e.Provider, e.Processor, store)
		r.Log, r.Accounts = e.Log, accounts
		if all {
			r.Note = NoteAllAccounts
		}
		return r.Instance(), nil
	},
}

// NoteAllAccounts is a run's note when STRIPE_CONNECT_ACCOUNTS is *.
const NoteAllAccounts = "STRIPE_CONNECT_ACCOUNTS is *: the events API cannot enumerate connected accounts, " +
	"so no connected account's events were listed; list the accounts (acct_…) to reconcile theirs"

// Events returns the reconciliation of Stripe's events listed by api
// (an *API), handed to proc as deliveries of prov, with store's claims,
// cursors and runs.
func Events(api reconcile.Lister, prov webhooks.Provider, proc reconcile.Processor, store *reconcile.Store) *reconcile.Events {
	return &reconcile.Events{Source: Source, Lister: api, Decode: DecodeListed, Provider: prov, Processor: proc,
		Claims: store, Store: store, MaxTypes: MaxListTypes, PeriodicTypes: periodicTypes}
}

// DecodeListed is Decode of a listed event's raw JSON.
func DecodeListed(l reconcile.Listed) (webhooks.Event, error) { return Decode(l.Raw) }
