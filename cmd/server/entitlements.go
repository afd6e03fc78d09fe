package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/paywebhooks/receiver/internal/entitlements"
)

var entitlementsGroup = group{name: "entitlements", usage: `usage:
  server entitlements show SUBJECT [--json]

Prints a subject's entitlements (the app's user id, or stripe:cus_…,
paddle:ctm_…, polar:<customer id>, github:<account id>): its latest
version, as the app is told it and GET /api/entitlements/<subject> answers,
and what grants each key now.
`}

// entitlementsCmd is `server entitlements show SUBJECT [--json]`.
func entitlementsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, err := entitlementsGroup.subcommand(args, stdout)
	if err != nil {
		return err
	}
	if sub != "show" {
		return entitlementsGroup.unknown(sub, "show")
	}
	c := newCommand("entitlements show", "server entitlements show SUBJECT [--json]",
		"Prints the subject's latest version (what the app is told, and what GET /api/entitlements/<subject>\n"+
			"answers), the version the app last answered 2xx, and what grants each key now: the subscription, order\n"+
			"or Stripe feature list, its status and the catalogue id it matched. A subject never seen is version 0\n"+
			"with no entitlements. Exit 1 when entitlements are off (ENTITLEMENTS_FILE is unset).")
	asJSON := c.fs.Bool("json", false, "print the subject as JSON: the API's body, acked_version, grants and customers")
	rest, err := c.parse(args[1:], stdout)
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] == "" {
		return c.fail("takes one SUBJECT, got %q", rest)
	}
	env, err := openOperator(ctx, getenv, stderr, 2)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	if env.cfg.Entitlements == nil {
		return fmt.Errorf("server entitlements show: entitlements are off: ENTITLEMENTS_FILE is unset")
	}
	shown, err := entitlements.Store{Pool: env.pool}.Show(ctx, rest[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, shown)
	}
	return writeShown(stdout, shown)
}

// writeShown prints a subject for a person.
func writeShown(w io.Writer, s entitlements.Shown) error {
	until := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "subject %s: version %d (the app answered 2xx for %d)\n", s.Subject, s.Version, s.AckedVersion)
	if len(s.Customers) > 0 {
		fmt.Fprintf(w, "customers: %v\n", s.Customers)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tUNTIL\tGRANTED BY")
	if len(s.Entitlements) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t")
	}
	for _, e := range s.Entitlements {
		by := ""
		for _, g := range s.Grants {
			if g.Key == e.Key && g.State == e.State {
				if by != "" {
					by += "; "
				}
				by += fmt.Sprintf("%s %s %s (%s, %s)", g.Source, g.Kind, g.ObjectID, g.Status, g.Item)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Key, e.State, until(e.Until), by)
	}
	return tw.Flush()
}
