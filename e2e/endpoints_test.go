package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
)

// TestEndpointsCheckStripe runs `server endpoints check` as an operator
// would, the built binary against Stripe's webhook endpoints (the fake's),
// on a wrong setup: this receiver's endpoint disabled, two of the types it
// acts on not sent, another API version; and another URL's endpoint,
// wrong too, which is never touched. The check exits 1 with a line per
// finding; --fix re-enables the endpoint and subscribes it to the whole
// list, and exits 1 for the version it cannot change; --create makes an
// endpoint pinned to the receiver's version and prints its secret once;
// the old endpoint deleted, the check exits 0 and prints the summary
// alone. The database is never contacted: DATABASE_URL names a closed
// port.
func TestEndpointsCheckStripe(t *testing.T) {
	api := stripetest.New(t, "rk_test_e2e_endpoints_0123456789")
	here := "https://pay.example.com/webhooks/stripe"
	types := stripe.Spec.Types
	lacks := []string{"invoice.paid", "charge.refunded"}
	old := api.AddWebhookEndpoint(stripetest.WebhookEndpoint{URL: here, Status: "disabled", APIVersion: "2024-06-20",
		EnabledEvents: slices.DeleteFunc(slices.Clone(types), func(s string) bool { return slices.Contains(lacks, s) })})
	other := api.AddWebhookEndpoint(stripetest.WebhookEndpoint{URL: "https://shop.example.com/stripe-hook", Status: "disabled",
		EnabledEvents: []string{"payment_intent.succeeded"}})
	env := map[string]string{
		"DATABASE_URL":          "postgres://receiver@127.0.0.1:1/receiver",
		"PUBLIC_URL":            "https://pay.example.com",
		"STRIPE_WEBHOOK_SECRET": stripeSecret,
		"STRIPE_API_KEY":        api.Key,
		"STRIPE_API_BASE":       api.URL,
		"STRIPE_LIVEMODE":       "false",
		"PAYWEBHOOKS_DEV":       "",
	}
	step := func(want int, args ...string) cmdResult {
		t.Helper()
		r := runServerCmd(t, env, append([]string{"endpoints", "check"}, args...)...)
		t.Logf("$ server endpoints check %s   (exit %d)\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		if r.Code != want {
			t.Fatalf("server endpoints check %s: exit %d, want %d", strings.Join(args, " "), r.Code, want)
		}
		return r
	}

	r := step(1)
	for _, want := range []string{
		"stripe " + old.ID + ": disabled (status disabled): stripe sends it nothing; --fix re-enables it\n",
		"stripe " + old.ID + ": not sent 2 event types the receiver acts on: invoice.paid, charge.refunded; --fix subscribes it\n",
		"stripe " + old.ID + ": endpoint version 2024-06-20, receiver reads 2023-10-16; an endpoint's version cannot be changed: --create makes one pinned to 2023-10-16",
		"stripe: 1 endpoint sends to " + here + " (1 other sends elsewhere, left alone): 3 problems\n",
		"endpoints check: 1 provider of 4 checked, 3 problems left\n",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the check does not print %q", want)
		}
	}

	r = step(1, "--fix")
	if !strings.Contains(r.Stdout, fmt.Sprintf("stripe %s: changed: re-enabled; subscribed to invoice.paid, charge.refunded (%d event types in all)\n", old.ID, len(types))) ||
		!strings.Contains(r.Stdout, "stripe: 1 endpoint sends to "+here+" (1 other sends elsewhere, left alone): 1 problem\n") {
		t.Errorf("--fix does not say what it changed, or what is left")
	}
	if !strings.Contains(r.Stdout, "left: stripe "+old.ID+": endpoint version 2024-06-20, receiver reads 2023-10-16") ||
		strings.Contains(r.Stdout, "left: stripe "+old.ID+": disabled") {
		t.Errorf("--fix does not say which problem is left")
	}
	hooks := api.WebhookEndpoints()
	if got := hooks[0]; got.Status != "enabled" || len(got.EnabledEvents) != len(types) || got.APIVersion != "2024-06-20" {
		t.Errorf("after --fix this receiver's endpoint is %+v", got)
	}
	if got := hooks[1]; got.ID != other.ID || got.Status != "disabled" || !slices.Equal(got.EnabledEvents, other.EnabledEvents) {
		t.Errorf("--fix changed another URL's endpoint: %+v", got)
	}

	r = step(1, "--fix", "--create")
	hooks = api.WebhookEndpoints()
	if len(hooks) != 3 || hooks[2].APIVersion != stripe.APIVersion || hooks[2].URL != here || len(hooks[2].EnabledEvents) != len(types) {
		t.Fatalf("after --create the endpoints are %+v", hooks)
	}
	created := hooks[2]
	if strings.Count(r.Stdout, created.Secret) != 1 || !strings.Contains(r.Stdout, "add it to STRIPE_WEBHOOK_SECRET after the current one") ||
		!strings.Contains(r.Stdout, "then delete "+old.ID+" at the provider") {
		t.Errorf("--create does not print the new endpoint's secret once, with what to do with it")
	}
	if strings.Contains(r.Stderr, created.Secret) {
		t.Error("the secret went to stderr")
	}

	// The operator puts the new secret in place and deletes the old endpoint.
	env["STRIPE_WEBHOOK_SECRET"] = stripeSecret + "," + created.Secret
	api.DeleteWebhookEndpoint(old.ID)
	r = step(0)
	want := "stripe: 1 endpoint sends to " + here + " (1 other sends elsewhere, left alone): right\n" +
		"github: not checked: GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY must be set\n" +
		"paddle: not checked: PADDLE_API_KEY is unset\n" +
		"polar: not checked: POLAR_API_KEY is unset\n" +
		"endpoints check: 1 provider of 4 checked, nothing wrong\n"
	if r.Stdout != want || r.Stderr != "" {
		t.Errorf("a clean check printed\n%s%s\nwant the summary alone:\n%s", r.Stdout, r.Stderr, want)
	}
	r = step(0, "--json")
	var report struct {
		OK       bool `json:"ok"`
		Problems int  `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &report); err != nil || !report.OK {
		t.Errorf("--json: %v %+v", err, report)
	}

	delete(env, "PUBLIC_URL")
	if r := runServerCmd(t, env, "endpoints", "check"); r.Code != 1 || !strings.Contains(r.Stderr, "PUBLIC_URL is unset") {
		t.Errorf("without PUBLIC_URL: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := runServerCmd(t, nil, "endpoints", "check", "--help"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "usage:\n  server endpoints check") {
		t.Errorf("--help without configuration: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := runServerCmd(t, nil, "endpoints", "check", "--delete"); r.Code != 2 {
		t.Errorf("an unknown flag: exit %d, want 2", r.Code)
	}
}
