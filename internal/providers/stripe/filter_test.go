package stripe_test

import (
	"slices"
	"strings"
	"testing"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
)

// TestFilterOf: the mode and the accounts acted on, from STRIPE_LIVEMODE,
// STRIPE_API_KEY's prefix and STRIPE_CONNECT_ACCOUNTS, and what start-up
// warns of.
func TestFilterOf(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		live     string // "true", "false" or "both"
		accounts string // "*", or the ids, sorted, comma-separated
		warn     string // a piece of the warning; "" for none
		err      string
	}{
		{"NothingSet", nil, "both", "", "both modes (live and test) are acted on", ""},
		{"LiveModeTrue", map[string]string{"STRIPE_LIVEMODE": "true"}, "true", "", "", ""},
		{"LiveModeFalse", map[string]string{"STRIPE_LIVEMODE": "false"}, "false", "", "", ""},
		{"SecretLiveKey", map[string]string{"STRIPE_API_KEY": "sk_live_x"}, "true", "", "", ""},
		{"RestrictedLiveKey", map[string]string{"STRIPE_API_KEY": "rk_live_x"}, "true", "", "", ""},
		{"SecretTestKey", map[string]string{"STRIPE_API_KEY": "sk_test_x"}, "false", "", "", ""},
		{"RestrictedTestKey", map[string]string{"STRIPE_API_KEY": "rk_test_x"}, "false", "", "", ""},
		{"KeyOfNoMode", map[string]string{"STRIPE_API_KEY": "sk_org_x"}, "both", "", "both modes", ""},
		{"ModeAgainstKey", map[string]string{"STRIPE_LIVEMODE": "true", "STRIPE_API_KEY": "rk_test_x"}, "true", "",
			"STRIPE_API_KEY is a test key", ""},
		{"EveryAccount", map[string]string{"STRIPE_LIVEMODE": "true", "STRIPE_CONNECT_ACCOUNTS": "*"}, "true", "*", "", ""},
		{"Accounts", map[string]string{"STRIPE_LIVEMODE": "true", "STRIPE_CONNECT_ACCOUNTS": "acct_1B, acct_1A"}, "true", "acct_1A,acct_1B", "", ""},
		{"ErrAccount", map[string]string{"STRIPE_CONNECT_ACCOUNTS": "acct_1A,cus_1"}, "", "", "", `"cus_1"`},
		{"ErrAccountWithStar", map[string]string{"STRIPE_CONNECT_ACCOUNTS": "acct_1A,*"}, "", "", "", `"*"`},
		{"ErrMode", map[string]string{"STRIPE_LIVEMODE": "yes"}, "", "", "", "true or false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, warnings, err := stripe.FilterOf(func(k string) string { return c.env[k] })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			live := "both"
			if f.Livemode != nil {
				live = map[bool]string{true: "true", false: "false"}[*f.Livemode]
			}
			var accounts []string
			for a := range f.Accounts {
				accounts = append(accounts, a)
			}
			if f.AllAccounts {
				accounts = []string{"*"}
			}
			slices.Sort(accounts)
			if live != c.live || strings.Join(accounts, ",") != c.accounts {
				t.Errorf("live %s, accounts %v; want %s, %s", live, accounts, c.live, c.accounts)
			}
			switch w := strings.Join(warnings, "\n"); {
			case c.warn == "" && w != "":
				t.Errorf("warned %q", w)
			case c.warn != "" && !strings.Contains(w, c.warn):
				t.Errorf("warnings %q, want one with %q", w, c.warn)
			}
		})
	}
	// The variables' own checks, which start-up runs, agree.
	for _, v := range stripe.Spec.Vars {
		switch v.Name {
		case "STRIPE_LIVEMODE":
			if v.Check("true") != nil || v.Check("1") == nil {
				t.Errorf("%s's check", v.Name)
			}
		case "STRIPE_CONNECT_ACCOUNTS":
			if v.Check("acct_1A,acct_2B") != nil || v.Check("*") != nil || v.Check("acct_1A,,") == nil {
				t.Errorf("%s's check", v.Name)
			}
		}
	}
}
