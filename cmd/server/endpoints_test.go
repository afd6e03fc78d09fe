package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestEndpointsUsage: `server endpoints` prints its usage with no
// configuration, and a command line it does not understand is a usage
// error (exit 2), nothing read.
func TestEndpointsUsage(t *testing.T) {
	for _, args := range [][]string{{"endpoints", "--help"}, {"endpoints", "check", "--help"}, {"help", "endpoints", "check"}, {"endpoints", "check", "-h"}} {
		out, errOut, err := cli(nil, args...)
		if exitCode(err) != exitOK || !strings.HasPrefix(out, "usage:\n") || !strings.Contains(out, "server endpoints check") || errOut != "" {
			t.Errorf("%v: exit %d (%v), stdout %q, stderr %q", args, exitCode(err), err, out, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"endpoints"}, "server endpoints: a command is needed"},
		{[]string{"endpoints", "fix"}, `server endpoints: unknown command "fix"`},
		{[]string{"endpoints", "check", "stripe"}, `server endpoints check: takes no arguments, got ["stripe"]`},
		{[]string{"endpoints", "check", "--delete"}, "flag provided but not defined: -delete"},
	} {
		out, errOut, err := cli(nil, c.args...)
		if exitCode(err) != exitUsage || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usage:\n  server endpoints check") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q with the usage", c.args, exitCode(err), out, errOut, c.want)
		}
	}
}

// TestEndpointsCheckExitStatus: a right setup exits 0 and prints the
// summary alone; a wrong one exits 1; without PUBLIC_URL, or with no
// provider's API key, it says why and exits 1; --json prints the report.
func TestEndpointsCheckExitStatus(t *testing.T) {
	api := stripetest.New(t, "rk_test_endpoints_check_0123")
	env := map[string]string{"DATABASE_URL": "postgres://receiver@127.0.0.1:1/receiver", "PUBLIC_URL": "https://pay.example.com",
		"STRIPE_WEBHOOK_SECRET": rt.Secret(stripe.Spec), "STRIPE_API_KEY": api.Key, "STRIPE_API_BASE": api.URL}
	we := api.AddWebhookEndpoint(stripetest.WebhookEndpoint{URL: "https://pay.example.com/webhooks/stripe",
		EnabledEvents: stripe.Spec.Types, APIVersion: stripe.APIVersion})

	out, errOut, err := cli(env, "endpoints", "check")
	want := "stripe: 1 endpoint sends to https://pay.example.com/webhooks/stripe: right\n" +
		"github: not checked: GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY must be set\n" +
		"paddle: not checked: PADDLE_API_KEY is unset\n" +
		"polar: not checked: POLAR_API_KEY is unset\n" +
		"endpoints check: 1 provider of 4 checked, nothing wrong\n"
	if exitCode(err) != exitOK || out != want || errOut != "" {
		t.Errorf("a right setup: exit %d (%v)\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", exitCode(err), err, out, errOut, want)
	}

	out, errOut, _ = cli(env, "endpoints", "check", "--json")
	var report struct {
		OK        bool `json:"ok"`
		Problems  int  `json:"problems"`
		Providers []struct {
			Source    string `json:"source"`
			Endpoints int    `json:"endpoints"`
		} `json:"providers"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || !report.OK || report.Problems != 0 || report.Providers[0].Endpoints != 1 {
		t.Errorf("--json: %v %+v\n%s%s", err, report, out, errOut)
	}

	api.DeleteWebhookEndpoint(we.ID)
	out, errOut, err = cli(env, "endpoints", "check")
	if exitCode(err) != exitFailure || !strings.Contains(out, "stripe: no endpoint sends to https://pay.example.com/webhooks/stripe") ||
		!strings.Contains(errOut, "server endpoints check: 1 problem left, 0 failures") {
		t.Errorf("no endpoint: exit %d\nstdout:\n%s\nstderr:\n%s", exitCode(err), out, errOut)
	}

	noURL := map[string]string{}
	for k, v := range env {
		noURL[k] = v
	}
	delete(noURL, "PUBLIC_URL")
	if out, errOut, err := cli(noURL, "endpoints", "check"); exitCode(err) != exitFailure || out != "" ||
		!strings.Contains(errOut, "PUBLIC_URL is unset, so which of the providers' endpoints are this receiver's cannot be told") {
		t.Errorf("without PUBLIC_URL: exit %d, stdout %q, stderr %q", exitCode(err), out, errOut)
	}
	delete(noURL, "STRIPE_API_KEY")
	noURL["PUBLIC_URL"] = "https://pay.example.com"
	if out, errOut, err := cli(noURL, "endpoints", "check"); exitCode(err) != exitFailure ||
		!strings.Contains(out, "nothing could be checked") || !strings.Contains(errOut, "no provider could be checked") {
		t.Errorf("without an API key: exit %d, stdout %q, stderr %q", exitCode(err), out, errOut)
	}
}
