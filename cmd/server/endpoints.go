package main

import (
	"context"
	"fmt"
	"io"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

var endpointsGroup = group{name: "endpoints", usage: `usage:
  server endpoints check [--fix] [--create] [--json]

Reads how each provider with an API key is set up to send to this receiver
(PUBLIC_URL + its route) and says what is wrong, one line per finding.
server endpoints check --help for its flags.
`}

// endpointsCmd is `server endpoints check`: the endpoint check
// (internal/endpoints), with the server's configuration. It exits 0 when
// nothing is wrong, 1 when something is (or a provider could not be
// checked, or nothing could), 2 on a usage error.
func endpointsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	sub, err := endpointsGroup.subcommand(args, stdout)
	if err != nil {
		return err
	}
	if sub != "check" {
		return endpointsGroup.unknown(sub)
	}
	c := newCommand("endpoints check", "server endpoints check [--fix] [--create] [--json]",
		"For each provider whose API key is set, reads how it is set up to send to PUBLIC_URL + the provider's\n"+
			"route (Stripe's webhook endpoints, Paddle's notification destinations, Polar's webhook endpoints, the\n"+
			"GitHub App's webhook) and prints a line per finding: no endpoint for this receiver, a disabled one,\n"+
			"event types the receiver acts on that are not sent, another API version, another mode; and, as notes,\n"+
			"event types sent that nothing handles (a cost, not an error). Then a summary line per provider.\n"+
			"Exit 0 when nothing is wrong (notes aside), 1 when something is, or a provider could not be checked.\n"+
			"It never deletes an endpoint, and never changes one that sends elsewhere.")
	fix := c.fs.Bool("fix", false, "re-enable this receiver's endpoints, subscribe them to the missing event types (and set their version where the provider can), and print what changed")
	create := c.fs.Bool("create", false, "create the endpoint a provider lacks (Stripe's pinned to the version the receiver reads), and print its signing secret once")
	asJSON := c.fs.Bool("json", false, "print the findings, the changes and the summary as JSON")
	rest, err := c.parse(args[1:], stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return c.fail("takes no arguments, got %q", rest)
	}
	cfg, err := wiring.Load(getenv, providers.All())
	if err != nil {
		return err
	}
	check := &endpoints.Check{PublicURL: cfg.PublicURL, Targets: endpoints.Targets(providers.All(), providers.Endpoints()),
		Settings: cfg.Settings}
	r, err := check.Run(ctx, endpoints.Options{Fix: *fix, Create: *create})
	if err != nil {
		return err
	}
	if *asJSON {
		err = printJSON(stdout, struct {
			endpoints.Report
			Problems int  `json:"problems"`
			OK       bool `json:"ok"`
		}{r, r.Problems(), r.OK()})
	} else {
		err = r.Write(stdout)
	}
	switch {
	case err != nil:
		return err
	case r.Checked() == 0:
		return fmt.Errorf("server endpoints check: no provider could be checked: set the API key of one (see server endpoints check --help)")
	case !r.OK():
		return fmt.Errorf("server endpoints check: %s left, %s", webhooks.Plural(r.Problems(), "problem", "problems"),
			webhooks.Plural(r.Failed(), "failure", "failures"))
	}
	return nil
}
