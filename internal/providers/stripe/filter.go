package stripe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Variables of the events acted on: which mode, which connected accounts.
var (
	liveMode = webhooks.Var{
		Name: "STRIPE_LIVEMODE",
		Doc: "`true` or `false`: the mode whose events are acted on; an event of the other mode (its `livemode`) " +
			"is acknowledged 200 `ignored`, stored and counted, and acted on in no way (on deliveries and " +
			"reconciliation alike). Unset: the mode of `STRIPE_API_KEY`'s prefix (`sk_live_`/`rk_live_` live, " +
			"`sk_test_`/`rk_test_` test); with neither, both modes are acted on and start-up warns",
		Check: func(v string) error {
			if v != "true" && v != "false" {
				return errors.New("must be true or false")
			}
			return nil
		},
	}
	connectAccounts = webhooks.Var{
		Name: "STRIPE_CONNECT_ACCOUNTS",
		Doc: "connected accounts (`acct_…`, comma-separated, or `*` for all) whose events (those carrying " +
			"`account`, sent to a Connect endpoint) are acted on; their orders, invoices, subscriptions and " +
			"disputes record the account in `account_id`. Unset: an event carrying `account` is acknowledged " +
			"200 `ignored`. `server reconcile stripe` also lists each listed account's events (`*` cannot be listed)",
		Check: func(v string) error {
			_, _, err := ParseConnectAccounts(v)
			return err
		},
	}
)

// Filter is which Stripe events a provider acts on: those of one mode (or
// both) and of the platform itself and the connected accounts it lists.
// Every other event is acknowledged, stored and counted as ignored, with
// the reason on its claim, and writes nothing and plans nothing: the
// decision is made in Plan, so it holds for a delivery, a reconciled event
// and a replay alike.
type Filter struct {
	// Livemode is the mode acted on; nil: both (neither STRIPE_LIVEMODE
	// nor a key whose prefix says the mode is set, and start-up warns).
	Livemode *bool
	// Accounts are the connected accounts acted on; AllAccounts: any.
	Accounts    map[string]bool
	AllAccounts bool
}

// FilterOf reads the filter from STRIPE_LIVEMODE (else the mode of
// STRIPE_API_KEY's prefix: sk_live_ and rk_live_ are live, sk_test_ and
// rk_test_ test) and STRIPE_CONNECT_ACCOUNTS, and says what start-up
// should warn of.
func FilterOf(env func(string) string) (Filter, []string, error) {
	var s Filter
	var warnings []string
	keyMode := modeOfKey(env(apiKey.Name))
	switch v := env(liveMode.Name); v {
	case "true", "false":
		live := v == "true"
		s.Livemode = &live
		if keyMode != nil && *keyMode != live {
			warnings = append(warnings, fmt.Sprintf("%s=%s but %s is a %s key: the events reconciliation lists "+
				"are of the other mode and will be ignored", liveMode.Name, v, apiKey.Name, modeName(*keyMode)))
		}
	case "":
		s.Livemode = keyMode
		if keyMode == nil {
			warnings = append(warnings, fmt.Sprintf("neither %s nor a live or test %s is set: Stripe events "+
				"of both modes (live and test) are acted on", liveMode.Name, apiKey.Name))
		}
	default:
		return Filter{}, nil, fmt.Errorf("%s must be true or false", liveMode.Name)
	}
	accounts, err := parseAccounts(env(connectAccounts.Name))
	if err != nil {
		return Filter{}, nil, fmt.Errorf("%s %w", connectAccounts.Name, err)
	}
	if accounts["*"] {
		s.AllAccounts = true
	} else {
		s.Accounts = accounts
	}
	return s, warnings, nil
}

func modeName(live bool) string {
	if live {
		return "live"
	}
	return "test"
}

// modeOfKey is the mode of a Stripe API key by its prefix, or nil.
func modeOfKey(key string) *bool {
	for _, p := range []struct {
		prefix string
		live   bool
	}{{"sk_live_", true}, {"rk_live_", true}, {"sk_test_", false}, {"rk_test_", false}} {
		if strings.HasPrefix(key, p.prefix) {
			return &p.live
		}
	}
	return nil
}

// parseAccounts reads STRIPE_CONNECT_ACCOUNTS as a set: its accounts, or
// the key "*" for every account.
func parseAccounts(v string) (map[string]bool, error) {
	accounts, all, err := ParseConnectAccounts(v)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	if all {
		out["*"] = true
	}
	for _, a := range accounts {
		out[a] = true
	}
	return out, nil
}

// ignores says why the scope leaves the event alone, or "".
func (s Filter) ignores(env *envelope) string {
	if s.Livemode != nil && env.Livemode.live() != *s.Livemode {
		return fmt.Sprintf("a %s-mode event, and only %s-mode events are acted on (other mode: %s, else %s's prefix)",
			modeName(env.Livemode.live()), modeName(*s.Livemode), liveMode.Name, apiKey.Name)
	}
	if a := string(env.Account); a != "" && !s.AllAccounts && !s.Accounts[a] {
		return fmt.Sprintf("an event of connected account %s, which %s does not list (account not configured)",
			webhooks.Quote(a, 40), connectAccounts.Name)
	}
	return ""
}
