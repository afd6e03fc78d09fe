package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// The synopses of the events commands, for each command's usage and the
// group's.
const (
	listSynopsis = `server events list [--source S] [--type T] [--state done|resolved|in_progress|failed|parked]
                   [--older-than D] [--limit N] [--json]`
	showSynopsis    = `server events show KEY [--json]`
	resolveSynopsis = `server events resolve KEY --reason TEXT [--json]`
	replaySynopsis  = `server events replay KEY... [--allow-mismatch] [--json]
server events replay --parked --since D [--limit N] [--allow-mismatch] [--json]`
)

func pruneSynopsis(specs []webhooks.Spec) string {
	var perSource []string
	for _, s := range specs {
		perSource = append(perSource, fmt.Sprintf("[--%s-older-than D]", s.Source))
	}
	return "server events prune --older-than D " + strings.Join(perSource, " ") + "\n" +
		"                    [--batch N] [--dry-run] [--force] [--json]"
}

func eventsGroup(specs []webhooks.Spec) group {
	indent := func(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") + "\n" }
	return group{name: "events", usage: "usage:\n" + indent(listSynopsis) + indent(showSynopsis) + indent(replaySynopsis) +
		indent(resolveSynopsis) + indent(pruneSynopsis(specs)) + `
Sources: ` + strings.Join(providers.Sources(specs), ", ") + `. DATABASE_URL names the database.
server events COMMAND --help for a command's flags.
`}
}

func eventsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	specs := providers.All()
	g := eventsGroup(specs)
	sub, err := g.subcommand(args, stdout)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		return eventsList(ctx, getenv, specs, args[1:], stdout, stderr)
	case "show":
		return eventsShow(ctx, getenv, specs, args[1:], stdout, stderr)
	case "replay":
		return eventsReplay(ctx, getenv, args[1:], stdout, stderr)
	case "resolve":
		return eventsResolve(ctx, getenv, args[1:], stdout, stderr)
	case "prune":
		return eventsPrune(ctx, getenv, specs, args[1:], stdout, stderr)
	}
	return g.unknown(sub, "list", "show", "replay", "resolve", "prune")
}

// operatorEnv is what an operator command works with once its command line
// is understood: the configuration, a logger of warnings (to stderr, away
// from its output) and a pool.
type operatorEnv struct {
	cfg  wiring.Setup
	log  *slog.Logger
	pool *pgxpool.Pool
}

// openOperator loads the configuration and opens a pool of conns
// connections. The caller closes the pool.
func openOperator(ctx context.Context, getenv func(string) string, stderr io.Writer, conns int32) (operatorEnv, error) {
	cfg, err := wiring.Load(getenv, providers.All())
	if err != nil {
		return operatorEnv{}, err
	}
	log := slog.New(reqlog.NewHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	pool, err := db.Open(ctx, cfg.DatabaseURL, conns, cfg.DBOptions(log)...)
	if err != nil {
		return operatorEnv{}, err
	}
	return operatorEnv{cfg: cfg, log: log, pool: pool}, nil
}

func eventsList(ctx context.Context, getenv func(string) string, specs []webhooks.Spec, args []string, stdout, stderr io.Writer) error {
	c := newCommand("events list", listSynopsis,
		"Lists stored events, newest first: a table, or a JSON object per line with --json.\n"+
			"The count goes to stderr.")
	var f ops.Filter
	var state string
	sources := providers.Sources(specs)
	c.fs.StringVar(&f.Source, "source", "", "only this `SOURCE` ("+strings.Join(sources, ", ")+")")
	c.fs.StringVar(&f.Type, "type", "", "only this event `TYPE`")
	c.fs.StringVar(&state, "state", "", "only events in this `STATE` (the table's STATE column): "+stateList)
	c.fs.StringVar(&state, "status", "", "the former name of --state (`STATE`)")
	c.fs.DurationVar(&f.OlderThan, "older-than", 0, "only events received longer ago than this (e.g. 1h)")
	c.fs.IntVar(&f.Limit, "limit", 50, "at most `N` events")
	asJSON := c.fs.Bool("json", false, "print a JSON object per event and line instead of a table")
	rest, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	f.State = webhooks.State(state)
	switch {
	case len(rest) > 0:
		return c.fail("takes no arguments, got %q", rest)
	case state != "" && !slices.Contains(webhooks.States, f.State):
		return c.fail("--%s must be one of %s, got %q", given(c, "state", "status"), stateList, state)
	case f.Source != "" && !slices.Contains(sources, f.Source):
		return c.fail("--source must be one of %s, got %q", strings.Join(sources, ", "), f.Source)
	case f.OlderThan < 0:
		return c.fail("--older-than must not be negative")
	case f.Limit <= 0:
		return c.fail("--limit must be positive")
	}
	env, err := openOperator(ctx, getenv, stderr, 4)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	events, err := ops.List(ctx, env.pool, f)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s ago\n", e.Key, e.Source, e.Type, e.Word(), e.StepsDone, e.Steps,
			time.Since(e.ReceivedAt).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stderr, plural(len(events), "event"))
	return nil
}

func eventsShow(ctx context.Context, getenv func(string) string, specs []webhooks.Spec, args []string, stdout, stderr io.Writer) error {
	c := newCommand("events show", showSynopsis,
		"Shows the stored event (by its key, or the provider's event id) with every claim of its\n"+
			"steps (status, attempts, last error or reason, timestamps) and its raw body.")
	asJSON := c.fs.Bool("json", false, "print the event, its claims and its body as JSON")
	keys, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(keys) != 1 {
		return c.fail("needs one KEY, got %d", len(keys))
	}
	env, err := openOperator(ctx, getenv, stderr, 4)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	d, err := ops.Show(ctx, env.pool, keys[0])
	if err != nil {
		return err
	}
	d.AddRefs(wiring.StepKinds(env.cfg, providers.List()))
	records, err := ops.Related(ctx, env.pool, d, specs, wiring.Owners(providers.List()))
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
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "event     %s\nsource    %s\ntype      %s\nid        %s\nvia       %s\n", d.Key, d.Source, d.Type, d.EventID, d.Via)
	if d.APIVersion != "" {
		fmt.Fprintf(stdout, "api       %s\n", d.APIVersion)
	}
	fmt.Fprintf(stdout, "received  %s (%s ago)\nstate     %s\n", d.ReceivedAt.Format(time.RFC3339),
		time.Since(d.ReceivedAt).Round(time.Second), d.Word())
	if d.Error != "" {
		fmt.Fprintf(stdout, "error     %s\n", d.Error)
	}
	if r := d.Resolution; r != nil {
		note := ""
		if r.Reopened {
			note = " (then reopened by a replay)"
		}
		fmt.Fprintf(stdout, "resolved  by %s at %s%s: %s\n", r.By, r.At.Format(time.RFC3339), note, oneLine(r.Reason))
	}
	if d.Reason != "" {
		fmt.Fprintf(stdout, "ignored   %s\n", oneLine(d.Reason))
	}
	fmt.Fprintln(stdout, "\nclaims:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tSTATUS\tATTEMPTS\tCLAIMED\tCOMPLETED\tNEXT ATTEMPT\tLAST ERROR / REASON")
	for _, c := range d.Claims {
		next := "-" // only a step waiting for a retry has a next attempt
		if c.Status == string(webhooks.ClaimInProgress) {
			next = ts(c.NextAttemptAt, "-")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", c.Key, c.Status, c.Attempts, ts(c.ClaimedAt, "given back"),
			ts(c.CompletedAt, "-"), next, oneLine(c.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printRefs(stdout, d.Claims)
	printAttempts(stdout, d.Claims)
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

// printRefs writes what each step sends that is the same on every attempt
// (its Message-ID, its Idempotency-Key), to look for downstream.
func printRefs(w io.Writer, claims []ops.Claim) {
	var lines []string
	for _, c := range claims {
		for _, r := range c.Refs {
			lines = append(lines, fmt.Sprintf("  %s\t%s\t%s", c.Step, r.Name, r.Value))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nsent with:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	_ = tw.Flush()
}

// printAttempts writes every attempt of every step: when, how long, the
// outcome, the answer's status and the error.
func printAttempts(w io.Writer, claims []ops.Claim) {
	fmt.Fprintln(w, "\nattempts:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\t#\tSTARTED\tTOOK\tOUTCOME\tSTATUS\tBY\tERROR")
	n := 0
	for _, c := range claims {
		for _, a := range c.History {
			n++
			took, status, by := "-", "-", a.Runner
			if a.Outcome != "running" && a.Outcome != "unrecorded" {
				took = a.Duration.Round(time.Millisecond).String()
			}
			if a.Status != 0 {
				status = fmt.Sprint(a.Status)
			}
			if by == "" {
				by = "-"
			}
			errText := a.Error
			if a.ErrorClass != "" {
				errText = a.ErrorClass + ": " + errText
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Step, a.N, ts(a.StartedAt, "-"), took, a.Outcome,
				status, by, oneLine(errText))
		}
	}
	if n == 0 {
		fmt.Fprintln(tw, "  (none)")
	}
	_ = tw.Flush()
}

// printRecords prints the business rows an event concerns, one a line, as
// their owners tell them (ops.Line).
func printRecords(w io.Writer, r ops.Records) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ROW\tID\tSTATUS\tAMOUNT\tDETAIL\t")
	for _, l := range r.Lines() {
		row, amount, detail, wrote := l.Kind, l.Amount, []string{}, "named in its body"
		if l.Source != "" {
			row += " (" + l.Source + ")"
		}
		if amount == "" {
			amount = "-"
		}
		if l.Refunded != "" {
			detail = append(detail, "refunded "+l.Refunded)
		}
		for _, n := range l.Notes {
			text := n.Label
			if n.Text != "" {
				text += " " + n.Text
			}
			if n.At != nil {
				text += " " + ts(n.At, "-")
			}
			detail = append(detail, text)
		}
		if l.Customer != "" {
			detail = append(detail, "customer "+l.Customer)
		}
		if l.AsOf != "" {
			detail = append(detail, "as of "+l.AsOf)
		}
		if len(detail) == 0 {
			detail = append(detail, "-")
		}
		if l.Wrote {
			wrote = "written by this event"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", row, l.ID, l.Status, amount, strings.Join(detail, "; "), wrote)
	}
	return tw.Flush()
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

// replayed is what became of one event's replay.
type replayed struct {
	Key string `json:"key"`
	// Outcome is the replay's, as a delivery's would be.
	Outcome webhooks.Outcome `json:"outcome,omitempty"`
	// State is the event's state after the replay: a duplicate can leave
	// a step parked that this shell could not run.
	State webhooks.State `json:"state,omitempty"`
	// Result sums both up: the outcome when the event is done (processed,
	// duplicate, ignored); else parked, step_failed, lease_conflict,
	// in_progress or error.
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// replayResults are the results a summary counts, in its order.
var replayResults = []struct{ result, words string }{
	{string(webhooks.OutcomeProcessed), "processed"},
	{string(webhooks.OutcomeDuplicate), "duplicate"},
	{string(webhooks.OutcomeIgnored), "ignored"},
	{string(webhooks.OutcomeParked), "parked"},
	{string(webhooks.OutcomeStepFailed), "with a step to retry"},
	{string(webhooks.OutcomeLeaseConflict), "held by another worker"},
	{string(webhooks.StateInProgress), "in progress"},
	{string(webhooks.OutcomeError), "failed"},
}

// resultOf sums up a replay: r's outcome and the event's state after it.
func resultOf(r replayed) string {
	switch {
	case r.Outcome == "": // not replayed: not found, the database failed
		return string(webhooks.OutcomeError)
	case r.Outcome == webhooks.OutcomeStepFailed, r.Outcome == webhooks.OutcomeLeaseConflict, r.Outcome == webhooks.OutcomeError:
		return string(r.Outcome)
	case r.State == "": // replayed, but what it left could not be read
		return string(webhooks.OutcomeError)
	case r.Outcome == webhooks.OutcomeParked, r.State == webhooks.StateParked:
		return string(webhooks.OutcomeParked)
	case r.State == webhooks.StateFailed:
		return string(webhooks.OutcomeStepFailed)
	case r.State == webhooks.StateInProgress:
		return string(webhooks.StateInProgress)
	}
	return string(r.Outcome)
}

// summary is a count of each result, in words: "1 processed, 1 parked".
func summary(counts map[string]int) string {
	var parts []string
	for _, r := range replayResults {
		if n := counts[r.result]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r.words))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func eventsReplay(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer) error {
	c := newCommand("events replay", replaySynopsis,
		"Runs stored events again from their bodies, through the same claims as a delivery: parked\n"+
			"work is reopened, done work is left as it is. A line per event on stdout (a JSON report\n"+
			"with --json), a summary on stderr. Steps run with this shell's configuration: run it with\n"+
			"the server's environment. It refuses a shell that differs from what the running receivers\n"+
			"use (naming each difference; exit 2) unless --allow-mismatch, and warns when no running\n"+
			"receiver is recorded.\n"+
			"Exit 0 when every event is done, 3 when one is left parked, 1 when one failed.")
	parked := c.fs.Bool("parked", false, "replay every event with something parked")
	since := c.fs.Duration("since", 0, "with --parked: only events received within this long (e.g. 24h)")
	limit := c.fs.Int("limit", 10000, "with --parked: at most `N` events")
	allow := allowMismatchFlag(c)
	asJSON := c.fs.Bool("json", false, "print a JSON report of every event's result and the counts")
	keys, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case *parked && len(keys) > 0:
		return c.fail("takes KEYs or --parked, not both")
	case *parked && *since <= 0:
		return c.fail("--parked needs --since DURATION (e.g. --since 24h)")
	case !*parked && len(keys) == 0:
		return c.fail("needs KEYs, or --parked --since DURATION")
	case *limit <= 0:
		return c.fail("--limit must be positive")
	}
	env, err := openOperator(ctx, getenv, stderr, 4)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	cfg, pool, log := env.cfg, env.pool, env.log
	if err := checkShell(ctx, env, "events replay runs steps", *allow, stderr); err != nil {
		return err
	}
	provs, err := server.Providers(cfg, providers.All())
	if err != nil {
		return err
	}
	stopTracing, err := tracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	proc := server.NewProcessor(cfg, pool, wiring.StepKinds(cfg, providers.List()), webhooks.NewMetrics(prometheus.NewRegistry()), log)
	if *parked {
		if keys, err = ops.ParkedSince(ctx, pool, *since, *limit); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s received in the last %s\n", plural(len(keys), "parked event"), *since)
	}

	counts := map[string]int{}
	results := make([]replayed, 0, len(keys))
	last := time.Now()
	for i, key := range keys {
		r := replayed{Key: key}
		res, err := ops.Replay(ctx, pool, proc, provs, key, "cli", log)
		switch {
		case err != nil:
			r.Error = err.Error()
		case res.Err != nil:
			r.Outcome, r.Error = res.Outcome, res.Err.Error()
		default:
			r.Outcome = res.Outcome
		}
		if err == nil {
			// What the replay left: a duplicate may leave a step parked.
			if d, err := ops.Show(ctx, pool, key); err != nil {
				r.Error = strings.TrimPrefix(r.Error+"; read its state: "+err.Error(), "; ")
			} else {
				r.State = d.State
			}
		}
		r.Result = resultOf(r)
		counts[r.Result]++
		results = append(results, r)
		if !*asJSON {
			line := key + ": "
			if r.Outcome != "" {
				line += string(r.Outcome)
			} else {
				line += "error"
			}
			if r.Error != "" {
				line += ": " + oneLine(r.Error)
			}
			if r.Result != string(r.Outcome) && r.Outcome != "" && r.State != "" {
				line += " (left " + string(r.State) + ")"
			}
			fmt.Fprintln(stdout, line)
		}
		if len(keys) > 20 && (time.Since(last) > time.Second || i == len(keys)-1) {
			fmt.Fprintf(stderr, "replayed %d/%d\n", i+1, len(keys))
			last = time.Now()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	left := counts[string(webhooks.OutcomeParked)]
	notDone := 0
	for _, r := range results {
		if !slices.Contains([]string{string(webhooks.OutcomeProcessed), string(webhooks.OutcomeDuplicate),
			string(webhooks.OutcomeIgnored), string(webhooks.OutcomeParked)}, r.Result) {
			notDone++
		}
	}
	if *asJSON {
		if err := printJSON(stdout, struct {
			Events     []replayed     `json:"events"`
			Counts     map[string]int `json:"counts"`
			LeftParked int            `json:"left_parked"`
			NotDone    int            `json:"not_done"`
		}{results, counts, left, notDone}); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "replayed %s: %s\n", plural(len(keys), "event"), summary(counts))
	switch {
	case notDone > 0:
		return fmt.Errorf("%d of %s not done", notDone, plural(len(keys), "event"))
	case left > 0:
		return unresolvedError{fmt.Sprintf("server events replay: %d of %s left parked (server events show KEY says why)", left, plural(len(keys), "event"))}
	}
	return nil
}

// stateList lists the states a listing can be filtered by.
var stateList = func() string {
	var names []string
	for _, s := range webhooks.States {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}()

func eventsResolve(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer) error {
	c := newCommand("events resolve", resolveSynopsis,
		"Closes a parked event that no replay can fix (a refund for an order the fulfillment API will\n"+
			"never know, a body whose fields cannot be read): its parked claims become resolved and leave\n"+
			"the parked count, the metrics and the alerts; its body and attempts stay; prune treats it as\n"+
			"finished. The reason, who (cli and $USER) and when are kept with it. `events replay KEY`\n"+
			"reopens it. Only an event with something parked can be resolved: any other is refused (exit 1).")
	reason := c.fs.String("reason", "", "why no replay can fix it (kept with the event; required)")
	asJSON := c.fs.Bool("json", false, "print what was resolved as JSON")
	keys, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(keys) != 1:
		return c.fail("needs one KEY, got %d", len(keys))
	case strings.TrimSpace(*reason) == "":
		return c.fail("needs --reason TEXT: say why no replay can fix it")
	case len([]rune(*reason)) > ops.MaxReasonLength:
		return c.fail("--reason is longer than %d characters", ops.MaxReasonLength)
	}
	env, err := openOperator(ctx, getenv, stderr, 2)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	user := getenv("USER")
	if user == "" {
		user = "unknown"
	}
	res, err := ops.Resolve(ctx, env.pool, keys[0], *reason, "cli "+user, env.log)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "%s: resolved (%s closed: %s), now %s\n", res.Key, plural(len(res.Closed), "claim"),
		strings.Join(res.Closed, ", "), res.State)
	return nil
}

// pruneDefault is the window `events prune` keeps when none is given for a
// provider: 30 days, or the provider's floor when that is longer.
const pruneDefault = 30 * 24 * time.Hour

// pruned is what prune did (or, in a dry run, would do) to one source.
type pruned struct {
	Source string `json:"source"`
	// Window is the age past which done events were deleted, a Go
	// duration; AtFloor when it was raised to the provider's floor.
	Window        string  `json:"window"`
	WindowSeconds float64 `json:"window_seconds"`
	AtFloor       bool    `json:"at_floor,omitempty"`
	Events        int64   `json:"events"`
	Claims        int64   `json:"claims"`
}

func eventsPrune(ctx context.Context, getenv func(string) string, specs []webhooks.Spec, args []string, stdout, stderr io.Writer) error {
	c := newCommand("events prune", pruneSynopsis(specs),
		"Deletes events whose every claim is final (done, or skipped steps), with their bodies,\n"+
			"older than each provider's window, in batches. A window below a provider's floor is\n"+
			"refused unless --force; --older-than is raised to a provider's floor where that is longer.")
	olderThan := c.fs.Duration("older-than", 0, "delete done events older than this (e.g. 720h); a provider whose floor is longer keeps its floor")
	own := map[string]*time.Duration{}
	for _, s := range specs {
		own[s.Source] = c.fs.Duration(s.Source+"-older-than", 0,
			fmt.Sprintf("window of %s events (default: --older-than, at least %s)", s.Source, s.Retention))
	}
	batch := c.fs.Int("batch", 1000, "`N` events deleted per transaction")
	dryRun := c.fs.Bool("dry-run", false, "count what would be deleted; delete nothing")
	force := c.fs.Bool("force", false, "accept windows below a provider's floor")
	asJSON := c.fs.Bool("json", false, "print what was deleted (or would be) per source as JSON")
	rest, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return c.fail("takes no arguments, got %q", rest)
	}
	if *batch <= 0 {
		return c.fail("--batch must be positive")
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
		return c.fail("needs --older-than DURATION (e.g. --older-than 720h)")
	}
	check("older-than", *olderThan, minFloor)
	if len(problems) > 0 {
		return c.fail("window refused, nothing deleted:\n  %s", strings.Join(problems, "\n  "))
	}

	env, err := openOperator(ctx, getenv, stderr, 4)
	if err != nil {
		return err
	}
	defer env.pool.Close()
	verb := "deleted"
	if *dryRun {
		verb = "would delete"
	}
	var out []pruned
	for _, s := range specs {
		p := pruned{Source: s.Source}
		window := *own[s.Source]
		if window == 0 {
			window = *olderThan
			if window == 0 {
				window = max(pruneDefault, s.Retention)
			}
			if window < s.Retention && !*force {
				window, p.AtFloor = s.Retention, true
			}
		}
		p.Window, p.WindowSeconds = window.String(), window.Seconds()
		res, err := ops.Prune(ctx, env.pool, s.Source, window, *batch, *dryRun, func(p ops.PruneResult) {
			fmt.Fprintf(stderr, "%s: %s pruned so far\n", s.Source, plural(p.Events, "event"))
		})
		if err != nil {
			return err
		}
		p.Events, p.Claims = res.Events, res.Claims
		out = append(out, p)
		if !*asJSON {
			note := ""
			if p.AtFloor {
				note = " (its floor)"
			}
			fmt.Fprintf(stdout, "%s: %s %s (%s) older than %s%s\n", s.Source, verb, plural(res.Events, "event"), plural(res.Claims, "claim row"), window, note)
		}
	}
	if *asJSON {
		return printJSON(stdout, struct {
			DryRun  bool     `json:"dry_run"`
			Sources []pruned `json:"sources"`
		}{*dryRun, out})
	}
	return nil
}
