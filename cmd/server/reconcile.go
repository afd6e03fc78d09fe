package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/telemetry"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// reconcileSynopsis is the synopsis of `server reconcile <r.Name>`.
func reconcileSynopsis(r reconcile.Reconciler) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server reconcile %s", r.Name)
	if r.Takes("since") {
		b.WriteString(" [--since D | --resume]")
	}
	if r.Takes("types") {
		b.WriteString(" [--types T,…]")
	}
	if r.Takes("failed-only") {
		b.WriteString(" [--failed-only]")
	}
	b.WriteString(" [--dry-run] [--allow-mismatch] [--json]")
	return b.String()
}

func reconcileGroup() group {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, r := range providers.Reconcilers() {
		b.WriteString("  " + reconcileSynopsis(r) + "\n")
	}
	b.WriteString(`
Catches up on events a provider's deliveries missed, through the same processor and claims
as a delivery. server reconcile NAME --help for its flags.
`)
	return group{name: "reconcile", usage: b.String()}
}

// reconcileCmd is `server reconcile <name>`: one run of a provider's
// catch-up, through the same processor and claims as a delivery, printing
// a line per event (or finding) it acts on and a summary. It exits 1 when
// the run fails or leaves anything unprocessed, 3 when it leaves something
// for an operator (an event parked, a finding it only reports).
func reconcileCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	g := reconcileGroup()
	name, err := g.subcommand(args, stdout)
	if err != nil {
		return err
	}
	var rec reconcile.Reconciler
	for _, r := range providers.Reconcilers() {
		if r.Name == name {
			rec = r
		}
	}
	if rec.Name == "" {
		var names []string
		for _, r := range providers.Reconcilers() {
			names = append(names, r.Name)
		}
		return usageError{msg: fmt.Sprintf("server reconcile: unknown reconciliation %q", name) + didYouMean(name, names), usage: g.usage}
	}
	c := newCommand("reconcile "+rec.Name, reconcileSynopsis(rec),
		"A line per event processed (or finding) and a summary on stdout; with --json, the lines go\n"+
			"to stderr and the summary is printed as JSON. The events' steps run with this shell's\n"+
			"configuration: run it with the server's environment. A shell that differs from what the\n"+
			"running receivers use is refused (naming each difference; exit 2) unless --allow-mismatch.\n"+
			"Exit 0 when everything found is handled, 3 when something is left for an operator (parked,\n"+
			"or reported only), 1 on failure.")
	var o reconcile.Options
	var types string
	c.fs.BoolVar(&o.DryRun, "dry-run", false, "list what would be processed (or corrected) and write nothing")
	allow := allowMismatchFlag(c)
	asJSON := c.fs.Bool("json", false, "print the run's summary as JSON (the per-event lines go to stderr)")
	if rec.Takes("since") {
		c.fs.DurationVar(&o.Since, "since", 0, "events created within this long (e.g. 72h); default: all the provider keeps")
		c.fs.BoolVar(&o.Resume, "resume", false, "continue after the last event the previous run with the same filters reconciled")
	}
	if rec.Takes("types") {
		c.fs.StringVar(&types, "types", "", "only these event `TYPES`, comma-separated (at most 20)")
	}
	if rec.Takes("failed-only") {
		c.fs.BoolVar(&o.FailedOnly, "failed-only", false, "only events not yet delivered successfully")
	}
	rest, err := c.parse(args[1:], stdout)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return c.fail("takes no arguments, got %q", rest)
	case o.Since < 0:
		return c.fail("--since must be positive")
	case o.Since > 0 && o.Resume:
		return c.fail("--since and --resume cannot be used together")
	}
	for _, t := range strings.Split(types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Types = append(o.Types, t)
		}
	}
	if len(o.Types) > 20 {
		return c.fail("--types takes at most 20 types")
	}

	list := providers.List()
	cfg, err := wiring.Load(getenv, registry.Specs(list))
	if err != nil {
		return err
	}
	if why := rec.Unconfigured(cfg.Settings(rec.Source).Env); why != "" {
		return fmt.Errorf("reconcile %s: %s", rec.Name, why)
	}
	log := slog.New(reqlog.NewHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	pool, err := db.Open(ctx, cfg.DatabaseURL, 8, cfg.DBOptions(log)...)
	if err != nil {
		return err
	}
	defer pool.Close()
	if !o.DryRun {
		env := operatorEnv{cfg: cfg, log: log, pool: pool}
		if err := checkShell(ctx, env, "reconcile "+rec.Name+" runs the steps of the events it processes", *allow, stderr); err != nil {
			return err
		}
	}
	provs, err := server.Providers(cfg, registry.Specs(list))
	if err != nil {
		return err
	}
	stopTracing, err := tracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	proc := server.NewProcessor(cfg, pool, wiring.StepKinds(cfg, list), webhooks.NewMetrics(prometheus.NewRegistry()), log)
	on, _, err := server.Reconcilers(cfg, registry.Reconcilers(list), pool, proc, provs, log)
	if err != nil {
		return err
	}
	o.Trigger, o.Out = reconcile.TriggerCLI, stdout
	if *asJSON {
		o.Out = stderr
	}
	sum, err := on[rec.Name].Run(ctx, o)
	if errors.Is(err, reconcile.ErrBusy) {
		err = fmt.Errorf("reconcile %s: another run (a replica's periodic run, or an operator's) holds the lock; try again later", rec.Name)
	}
	var unresolved int
	if t, ok := sum.(interface{ Tally() reconcile.Tally }); ok && !o.DryRun {
		unresolved = t.Tally().Unresolved
	}
	switch {
	case *asJSON:
		out := struct {
			Reconciler string            `json:"reconciler"`
			DryRun     bool              `json:"dry_run"`
			Summary    reconcile.Summary `json:"summary"`
			Unresolved int               `json:"unresolved"`
			Error      string            `json:"error,omitempty"`
		}{Reconciler: rec.Name, DryRun: o.DryRun, Summary: sum, Unresolved: unresolved}
		if err != nil {
			out.Error = err.Error()
		}
		if e := printJSON(stdout, out); e != nil && err == nil {
			err = e
		}
	case sum != nil:
		fmt.Fprintln(stdout, sum.String())
	}
	if err == nil && unresolved > 0 {
		return unresolvedError{fmt.Sprintf("server reconcile %s: %d left for an operator (parked, or reported only)", rec.Name, unresolved)}
	}
	return err
}

// tracing configures OpenTelemetry from OTEL_* for an operator command that
// runs steps, as the server does, so that a replay's or a reconciliation's
// spans link to the deliveries that planned its steps. The returned func
// flushes what was recorded.
func tracing(ctx context.Context, log *slog.Logger) (func(), error) {
	_, shutdown, err := telemetry.Setup(ctx, log)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}, nil
}
