package reconcile_test

import (
	"testing"

	"github.com/paywebhooks/receiver/internal/reconcile"
)

// TestRequires: the first unset variable is named, in the order given;
// none unset is "".
func TestRequires(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	needs := reconcile.Requires("A_KEY", "B_ID")
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "A_KEY is unset"},
		{map[string]string{"B_ID": "x"}, "A_KEY is unset"},
		{map[string]string{"A_KEY": "k"}, "B_ID is unset"},
		{map[string]string{"A_KEY": "k", "B_ID": "x"}, ""},
	} {
		if got := needs(env(c.env)); got != c.want {
			t.Errorf("%v: %q, want %q", c.env, got, c.want)
		}
	}
}
