package stripe_test

import (
	"os"
	"strings"
	"testing"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
)

// TestAPIVersionPolicy holds the version policy together: the version the
// receiver's requests are pinned to is the one its events are counted
// against, docs/events.md names both pins, and endpoints check reports every
// endpoint not pinned to it.
func TestAPIVersionPolicy(t *testing.T) {
	if stripe.Spec.APIVersion != stripe.APIVersion {
		t.Errorf("events are counted against %s, requests pinned to %s: one version, or the mismatch metric lies",
			stripe.Spec.APIVersion, stripe.APIVersion)
	}
	doc, err := os.ReadFile("../../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, policy, found := strings.Cut(string(doc), "\n## Stripe API versions\n")
	if !found {
		t.Error("docs/events.md has no section ## Stripe API versions")
	}
	policy, _, _ = strings.Cut(policy, "\n## ")
	for _, v := range []string{stripe.APIVersion, stripe.V2APIVersion, "webhook_api_version_mismatches_total",
		"When Stripe retires a version", "endpoints check"} {
		if !strings.Contains(policy, v) {
			t.Errorf("docs/events.md's version policy does not say %q", v)
		}
	}
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		name    string
		version *string
		want    string // a part of the finding; "" for none
	}{
		{"Pinned", str(stripe.APIVersion), ""},
		{"AccountDefault", nil, "follows the account's default"},
		{"Empty", str(""), "follows the account's default"},
		{"Newer", str("2026-09-30.endive"), `api_version is "2026-09-30.endive", the receiver is built against 2023-10-16`},
		{"Older", str("2020-08-27"), "pin a new endpoint to 2023-10-16"},
	} {
		got := stripe.VersionFinding(c.version)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: finding %q, want one saying %q", c.name, got, c.want)
		}
	}
}
