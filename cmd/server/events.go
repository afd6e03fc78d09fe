package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func eventsUsage(specs []webhooks.Spec) string {
	var perSource []string
	for _, s := range specs {
		perSource = append(perSource, fmt.Sprintf("[--%s-older-than D]", s.Source))
	}
	return `usage:
  server events list [--source ` + strings.Join(providers.Sources(specs), "|") + `] [--type T]
                     [--status in_progress|done|failed|parked] [--older-than D] [--limit N] [--json]
  server events show KEY [--json]
  server events replay KEY... [--allow-unconfigured]
  server events replay --parked --since D [--allow-unconfigured]
  server events prune --older-than D ` + strings.Join(perSource, " ") + `
                      [--batch N] [--dry-run] [--force]
`
}

func eventsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	specs := providers.All()
	if len(args) == 0 {
		fmt.Fprint(stderr, eventsUsage(specs))
		return usageError{"events needs a command"}
	}
	cfg, err := config.Load(getenv, specs)
	if err != nil {
		return err
	}
	// Operator commands log warnings only, to stderr, away from their output.
	log := slog.New(reqlog.NewHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	pool, err := db.Open(ctx, cfg.DatabaseURL, 4)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch args[0] {
	case "list":
		return eventsList(ctx, pool, specs, args[1:], stdout, stderr)
	case "show":
		return eventsShow(ctx, pool, specs, args[1:], stdout, stderr)
	case "replay":
		return eventsReplay(ctx, cfg, pool, log, args[1:], stdout, stderr)
	case "prune":
		return eventsPrune(ctx, pool, specs, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown events command %q\n%s", args[0], eventsUsage(specs))
	return usageError{"unknown events command"}
}

// parseFlags parses a subcommand's flags, allowing them before and after
// the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, error) {
	fs.SetOutput(stderr)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

func eventsList(ctx context.Context, q *pgxpool.Pool, specs []webhooks.Spec, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events list", flag.ContinueOnError)
	var f ops.Filter
	var state string
	sources := providers.Sources(specs)
	fs.StringVar(&f.Source, "source", "", "only this source ("+strings.Join(sources, ", ")+")")
	fs.StringVar(&f.Type, "type", "", "only this event type")
	fs.StringVar(&state, "status", "", "only events in this state: in_progress, done, failed, parked")
	fs.DurationVar(&f.OlderThan, "older-than", 0, "only events received longer ago than this (e.g. 1h)")
	fs.IntVar(&f.Limit, "limit", 50, "at most this many events")
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	if _, err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	f.State = webhooks.State(state)
	if state != "" && !slices.Contains(webhooks.States, f.State) {
		return usageError{fmt.Sprintf("--status must be in_progress, done, failed or parked, got %q", state)}
	}
	if f.Source != "" && !slices.Contains(sources, f.Source) {
		return usageError{fmt.Sprintf("--source must be one of %s, got %q", strings.Join(sources, ", "), f.Source)}
	}
	events, err := ops.List(ctx, q, f)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, e := range events {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSOURCE\tTYPE\tSTATE\tSTEPS\tRECEIVED")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s ago\n", e.Key, e.Source, e.Type, e.State, e.StepsDone, e.Steps,
			time.Since(e.ReceivedAt).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d events\n", len(events))
	return nil
}

func eventsShow(ctx context.Context, q *pgxpool.Pool, specs []webhooks.Spec, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	keys, err := parseFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(keys) != 1 {
		return usageError{"events show needs one KEY"}
	}
	d, err := ops.Show(ctx, q, keys[0])
	if err != nil {
		return err
	}
	records, err := ops.Related(ctx, q, d, specs)
	if err != nil {
		return err
	}
	if *asJSON {
		out := struct {
			ops.Detail
			Records ops.Records     `json:"records"`
			Body    json.RawMessage `json:"body"`
		}{d, records, json.RawMessage(d.Body)}
		if !json.Valid(d.Body) {
			out.Body, _ = json.Marshal(string(d.Body))
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "event     %s\nsource    %s\ntype      %s\nid        %s\nvia       %s\n", d.Key, d.Source, d.Type, d.EventID, d.Via)
	if d.APIVersion != "" {
		fmt.Fprintf(stdout, "api       %s\n", d.APIVersion)
	}
	fmt.Fprintf(stdout, "received  %s (%s ago)\noutcome   %s\nstate     %s\n", d.ReceivedAt.Format(time.RFC3339),
		time.Since(d.ReceivedAt).Round(time.Second), d.Outcome, d.State)
	if d.Error != "" {
		fmt.Fprintf(stdout, "error     %s\n", d.Error)
	}
	if d.Reason != "" {
		fmt.Fprintf(stdout, "ignored   %s\n", oneLine(d.Reason))
	}
	fmt.Fprintln(stdout, "\nclaims:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tSTATUS\tATTEMPTS\tCLAIMED\tCOMPLETED\tNEXT ATTEMPT\tLAST ERROR / REASON")
	for _, c := range d.Claims {
		next := "-" // only a step waiting for a retry has a next attempt
		if c.Status == string(webhooks.StatusInProgress) {
			next = ts(c.NextAttemptAt, "-")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", c.Key, c.Status, c.Attempts, ts(c.ClaimedAt, "given back"),
			ts(c.CompletedAt, "-"), next, oneLine(c.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !records.Empty() {
		fmt.Fprintln(stdout, "\nrecords:")
		if err := printRecords(stdout, records); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "\nbody:")
	var pretty bytes.Buffer
	if json.Indent(&pretty, d.Body, "  ", "  ") == nil {
		fmt.Fprintf(stdout, "  %s\n", pretty.String())
	} else {
		fmt.Fprintf(stdout, "  %s\n", d.Body)
	}
	return nil
}

// printRecords prints the business rows an event concerns, one a line.
func printRecords(w io.Writer, r ops.Records) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	wrote := func(b bool) string {
		if b {
			return "written by this event"
		}
		return "named in its body"
	}
	orNone := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintln(tw, "  ROW\tID\tSTATUS\tAMOUNT\tDETAIL\t")
	for _, o := range r.Orders {
		fmt.Fprintf(tw, "  order #%d (%s)\t%s\t%s\t%s\trefunded %s; payment %s; account %s; customer %s\t%s\n", o.ID, o.Source,
			o.ExternalID, o.Status, money(o.AmountCents, o.Currency), money(o.AmountRefunded, o.Currency), orNone(o.PaymentIntentID),
			orNone(o.AccountID), orNone(o.CustomerEmail), wrote(o.Wrote))
	}
	for _, i := range r.Invoices {
		fmt.Fprintf(tw, "  invoice\t%s\t%s\t%s of %s\taccount %s; customer %s\t%s\n", i.StripeInvoiceID, i.Status,
			money(i.AmountPaid, i.Currency), money(i.AmountDue, i.Currency), orNone(i.AccountID), orNone(i.CustomerEmail), wrote(i.Wrote))
	}
	for _, f := range r.Refunds {
		fmt.Fprintf(tw, "  refund\t%s\trecorded\t%s\tpayment %s\twritten by this event\n", f.ChargeID,
			money(f.AmountRefunded, f.Currency), f.PaymentIntentID)
	}
	for _, s := range r.Subscriptions {
		fmt.Fprintf(tw, "  subscription (%s)\t%s\t%s\tperiod ends %s\tcancel at period end %t; customer %s; account %s; as of %s\t%s\n",
			s.Source, s.ExternalID, s.Status, ts(s.CurrentPeriodEnd, "-"), s.CancelAtPeriodEnd, orNone(s.CustomerID),
			orNone(s.AccountID), s.LastEventID, wrote(s.Wrote))
	}
	for _, x := range r.Disputes {
		fmt.Fprintf(tw, "  dispute (%s)\t%s\t%s\t%s\treason %s; evidence due %s; payment %s; account %s; as of %s\t%s\n",
			x.Source, x.ExternalID, x.Status, money(x.AmountCents, x.Currency), orNone(x.Reason), ts(x.EvidenceDueBy, "-"),
			orNone(x.PaymentIntentID), orNone(x.AccountID), x.LastEventID, wrote(x.Wrote))
	}
	return tw.Flush()
}

// money formats an amount in a currency's minor unit.
func money(cents int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", cents/100, cents%100, strings.ToUpper(currency))
}

func ts(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Format(time.RFC3339)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// unconfigured says which of the server's delivery settings this shell
// lacks: a replay runs steps, and must run them as the server would.
func unconfigured(cfg config.Config) []string {
	var missing []string
	if cfg.SMTPAddr == "" {
		missing = append(missing, "SMTP_ADDR is unset: emails would be written to "+cfg.MailDir+" instead of sent")
	}
	if cfg.FulfillmentURL == "" {
		missing = append(missing, "FULFILLMENT_URL is unset: fulfillment steps could not run (parked ones would stay parked, new ones be skipped)")
	}
	return missing
}

func eventsReplay(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events replay", flag.ContinueOnError)
	parked := fs.Bool("parked", false, "replay every event with something parked")
	since := fs.Duration("since", 0, "with --parked: only events received within this long (e.g. 24h)")
	limit := fs.Int("limit", 10000, "with --parked: at most this many events")
	allow := fs.Bool("allow-unconfigured", false, "run steps even though SMTP_ADDR or FULFILLMENT_URL is unset in this shell")
	keys, err := parseFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	switch {
	case *parked && len(keys) > 0:
		return usageError{"events replay takes KEYs or --parked, not both"}
	case *parked && *since <= 0:
		return usageError{"events replay --parked needs --since DURATION (e.g. --since 24h)"}
	case !*parked && len(keys) == 0:
		return usageError{"events replay needs KEYs or --parked --since DURATION"}
	}
	if missing := unconfigured(cfg); len(missing) > 0 && !*allow {
		return fmt.Errorf("events replay runs steps with this shell's configuration, which lacks the server's:\n  %s\n"+
			"set them as the server has them, or pass --allow-unconfigured to accept that", strings.Join(missing, "\n  "))
	}
	provs, err := server.Providers(cfg)
	if err != nil {
		return err
	}
	stopTracing, err := tracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	proc := server.NewProcessor(cfg, pool, providers.StepKinds(cfg), webhooks.NewMetrics(prometheus.NewRegistry()), log)
	if *parked {
		if keys, err = ops.ParkedSince(ctx, pool, *since, *limit); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%d parked events received in the last %s\n", len(keys), *since)
	}

	counts := map[webhooks.Outcome]int{}
	var failed int
	last := time.Now()
	for i, key := range keys {
		res, err := ops.Replay(ctx, pool, proc, provs, key, "cli", log)
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(stdout, "%s: error: %v\n", key, err)
		case res.Err != nil:
			counts[res.Outcome]++
			fmt.Fprintf(stdout, "%s: %s: %v\n", key, res.Outcome, res.Err)
		default:
			counts[res.Outcome]++
			fmt.Fprintf(stdout, "%s: %s\n", key, res.Outcome)
		}
		if len(keys) > 20 && (time.Since(last) > time.Second || i == len(keys)-1) {
			fmt.Fprintf(stderr, "replayed %d/%d\n", i+1, len(keys))
			last = time.Now()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	fmt.Fprintf(stderr, "replayed %d events: %v, %d errors\n", len(keys), counts, failed)
	notDone := failed + counts[webhooks.OutcomeStepFailed] + counts[webhooks.OutcomeLeaseConflict] + counts[webhooks.OutcomeError]
	if notDone > 0 {
		return fmt.Errorf("%d of %d events are not done", notDone, len(keys))
	}
	return nil
}

// pruneDefault is the window `events prune` keeps when none is given for a
// provider: 30 days, or the provider's floor when that is longer.
const pruneDefault = 30 * 24 * time.Hour

func eventsPrune(ctx context.Context, q *pgxpool.Pool, specs []webhooks.Spec, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events prune", flag.ContinueOnError)
	olderThan := fs.Duration("older-than", 0, "delete done events older than this (e.g. 720h); a provider whose floor is longer keeps its floor")
	own := map[string]*time.Duration{}
	for _, s := range specs {
		own[s.Source] = fs.Duration(s.Source+"-older-than", 0,
			fmt.Sprintf("window of %s events (default: --older-than, at least %s)", s.Source, s.Retention))
	}
	batch := fs.Int("batch", 1000, "events deleted per transaction")
	dryRun := fs.Bool("dry-run", false, "count what would be deleted; delete nothing")
	force := fs.Bool("force", false, "accept windows below a provider's floor")
	if _, err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *batch <= 0 {
		return usageError{"--batch must be positive"}
	}
	// Negative windows are refused outright; windows below a floor unless
	// --force: a key pruned inside the sender's retry window makes its
	// next retry look new.
	var problems []string
	check := func(flagName string, d time.Duration, floor time.Duration) {
		switch {
		case d < 0:
			problems = append(problems, fmt.Sprintf("--%s %s is negative", flagName, d))
		case d > 0 && d < floor && !*force:
			problems = append(problems, fmt.Sprintf("--%s %s is shorter than the floor %s (pass --force to go below it)", flagName, d, floor))
		}
	}
	minFloor := time.Duration(1<<63 - 1)
	for _, s := range specs {
		minFloor = min(minFloor, s.Retention)
		check(s.Source+"-older-than", *own[s.Source], s.Retention)
	}
	if *olderThan == 0 && !slices.ContainsFunc(specs, func(s webhooks.Spec) bool { return *own[s.Source] > 0 }) {
		return usageError{"events prune needs --older-than DURATION (e.g. --older-than 720h)"}
	}
	check("older-than", *olderThan, minFloor)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "events prune:", p)
		}
		return usageError{"events prune: window refused"}
	}

	verb := "deleted"
	if *dryRun {
		verb = "would delete"
	}
	for _, s := range specs {
		window, note := *own[s.Source], ""
		if window == 0 {
			window = *olderThan
			if window == 0 {
				window = max(pruneDefault, s.Retention)
			}
			if window < s.Retention && !*force {
				window, note = s.Retention, " (its floor)"
			}
		}
		res, err := ops.Prune(ctx, q, s.Source, window, *batch, *dryRun, func(p ops.PruneResult) {
			fmt.Fprintf(stderr, "%s: %d events pruned so far\n", s.Source, p.Events)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %s %d events (%d claim rows) older than %s%s\n", s.Source, verb, res.Events, res.Claims, window, note)
	}
	return nil
}
