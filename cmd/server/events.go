package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// DefaultGitHubRetention is how long `events prune` keeps GitHub keys by
// default. GitHub signs no timestamp, so a captured delivery stays valid for
// ever; its key is the only thing that makes a replay of it harmless.
const DefaultGitHubRetention = 90 * 24 * time.Hour

const eventsUsage = `usage:
  server events list [--source S] [--type T] [--status in_progress|done|failed|parked]
                     [--older-than D] [--limit N] [--json]
  server events show KEY [--json]
  server events replay KEY...
  server events replay --parked --since D
  server events prune --older-than D [--github-older-than D] [--batch N]
`

func eventsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, eventsUsage)
		return usageError{"events needs a command"}
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	// Operator commands log warnings only, to stderr, away from their output.
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	pool, err := db.Open(ctx, cfg.DatabaseURL, 4)
	if err != nil {
		return err
	}
	defer pool.Close()

	switch args[0] {
	case "list":
		return eventsList(ctx, pool, args[1:], stdout, stderr)
	case "show":
		return eventsShow(ctx, pool, args[1:], stdout, stderr)
	case "replay":
		proc := server.NewProcessor(cfg, pool, webhooks.NewMetrics(prometheus.NewRegistry()))
		return eventsReplay(ctx, pool, proc, server.ProvidersBySource(cfg), args[1:], stdout, stderr)
	case "prune":
		return eventsPrune(ctx, pool, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown events command %q\n%s", args[0], eventsUsage)
	return usageError{"unknown events command"}
}

// flags parses a subcommand's flags, allowing them before and after the
// positional arguments.
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

func eventsList(ctx context.Context, q *pgxpool.Pool, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events list", flag.ContinueOnError)
	var f webhooks.Filter
	fs.StringVar(&f.Source, "source", "", "only this source (stripe, github)")
	fs.StringVar(&f.Type, "type", "", "only this event type")
	fs.StringVar(&f.State, "status", "", "only events in this state: in_progress, done, failed, parked")
	fs.DurationVar(&f.OlderThan, "older-than", 0, "only events received longer ago than this (e.g. 1h)")
	fs.IntVar(&f.Limit, "limit", 50, "at most this many events")
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	if _, err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	switch f.State {
	case "", webhooks.StateDone, webhooks.StateInProgress, webhooks.StateFailed, webhooks.StateParked:
	default:
		return usageError{fmt.Sprintf("--status must be in_progress, done, failed or parked, got %q", f.State)}
	}
	events, err := webhooks.List(ctx, q, f)
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

func eventsShow(ctx context.Context, q *pgxpool.Pool, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	keys, err := parseFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(keys) != 1 {
		return usageError{"events show needs one KEY"}
	}
	d, err := webhooks.Show(ctx, q, keys[0])
	if err != nil {
		return err
	}
	if *asJSON {
		out := struct {
			webhooks.Detail
			Body json.RawMessage `json:"body"`
		}{d, json.RawMessage(d.Body)}
		if !json.Valid(d.Body) {
			out.Body, _ = json.Marshal(string(d.Body))
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(stdout, "event     %s\nsource    %s\ntype      %s\nid        %s\n", d.Key, d.Source, d.Type, d.EventID)
	if d.APIVersion != "" {
		fmt.Fprintf(stdout, "api       %s\n", d.APIVersion)
	}
	fmt.Fprintf(stdout, "received  %s (%s ago)\noutcome   %s\nstate     %s\n", d.ReceivedAt.Format(time.RFC3339),
		time.Since(d.ReceivedAt).Round(time.Second), d.Outcome, d.State)
	if d.Error != "" {
		fmt.Fprintf(stdout, "error     %s\n", d.Error)
	}
	fmt.Fprintln(stdout, "\nclaims:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tSTATUS\tATTEMPTS\tCLAIMED\tCOMPLETED\tNEXT ATTEMPT\tLAST ERROR")
	for _, c := range d.Claims {
		next := "-" // only a step waiting for a retry has a next attempt
		if c.Status == webhooks.StatusInProgress {
			next = ts(c.NextAttemptAt, "-")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", c.Key, c.Status, c.Attempts, ts(c.ClaimedAt, "given back"),
			ts(c.CompletedAt, "-"), next, oneLine(c.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
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

func eventsReplay(ctx context.Context, q *pgxpool.Pool, proc *webhooks.Processor, providers map[string]webhooks.Provider, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events replay", flag.ContinueOnError)
	parked := fs.Bool("parked", false, "replay every event with something parked")
	since := fs.Duration("since", 0, "with --parked: only events received within this long (e.g. 24h)")
	limit := fs.Int("limit", 10000, "with --parked: at most this many events")
	keys, err := parseFlags(fs, args, stderr)
	if err != nil {
		return err
	}
	switch {
	case *parked && len(keys) > 0:
		return usageError{"events replay takes KEYs or --parked, not both"}
	case *parked && *since <= 0:
		return usageError{"events replay --parked needs --since DURATION (e.g. --since 24h)"}
	case *parked:
		if keys, err = webhooks.ParkedSince(ctx, q, *since, *limit); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%d parked events received in the last %s\n", len(keys), *since)
	case len(keys) == 0:
		return usageError{"events replay needs KEYs or --parked --since DURATION"}
	}

	counts := map[string]int{}
	var failed int
	last := time.Now()
	for i, key := range keys {
		res, err := proc.Replay(ctx, providers, key)
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

func eventsPrune(ctx context.Context, q *pgxpool.Pool, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("events prune", flag.ContinueOnError)
	olderThan := fs.Duration("older-than", 0, "delete done events older than this (e.g. 720h); required")
	githubOlderThan := fs.Duration("github-older-than", 0, "retention of GitHub keys (default: the longer of --older-than and 2160h)")
	batch := fs.Int("batch", 1000, "events deleted per transaction")
	if _, err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *olderThan <= 0 {
		return usageError{"events prune needs --older-than DURATION (e.g. --older-than 720h)"}
	}
	if *batch <= 0 {
		return usageError{"--batch must be positive"}
	}
	gh := *githubOlderThan
	if gh == 0 {
		gh = max(*olderThan, DefaultGitHubRetention)
	}
	for _, r := range []struct {
		source string
		keep   time.Duration
	}{{"stripe", *olderThan}, {"github", gh}} {
		res, err := webhooks.Prune(ctx, q, r.source, r.keep, *batch, func(p webhooks.PruneResult) {
			fmt.Fprintf(stderr, "%s: %d events pruned so far\n", r.source, p.Events)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: deleted %d events (%d claim rows) older than %s\n", r.source, res.Events, res.Claims, r.keep)
	}
	return nil
}
