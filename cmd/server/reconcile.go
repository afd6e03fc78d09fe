package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/telemetry"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func reconcileUsage() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, r := range providers.Reconcilers() {
		fmt.Fprintf(&b, "  server reconcile %s", r.Name)
		if r.Takes("since") {
			b.WriteString(" [--since D | --resume]")
		}
		if r.Takes("types") {
			b.WriteString(" [--types T,…]")
		}
		if r.Takes("failed-only") {
			b.WriteString(" [--failed-only]")
		}
		b.WriteString(" [--dry-run] [--allow-unconfigured]\n")
	}
	return b.String()
}

// reconcileCmd is `server reconcile <name>`: one run of a provider's
// catch-up, through the same processor and claims as a delivery, printing
// a line per event (or finding) it acts on and a summary. It exits non-zero
// when the run fails or leaves anything unprocessed.
func reconcileCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, reconcileUsage())
		return usageError{"reconcile needs a name"}
	}
	var rec reconcile.Reconciler
	for _, r := range providers.Reconcilers() {
		if r.Name == args[0] {
			rec = r
		}
	}
	if rec.Name == "" {
		fmt.Fprintf(stderr, "unknown reconciliation %q\n%s", args[0], reconcileUsage())
		return usageError{"unknown reconciliation"}
	}
	fs := flag.NewFlagSet("reconcile "+rec.Name, flag.ContinueOnError)
	var o reconcile.Options
	var types string
	fs.BoolVar(&o.DryRun, "dry-run", false, "list what would be processed (or corrected) and write nothing")
	allow := fs.Bool("allow-unconfigured", false, "run steps even though SMTP_ADDR or FULFILLMENT_URL is unset in this shell")
	if rec.Takes("since") {
		fs.DurationVar(&o.Since, "since", 0, "events created within this long (e.g. 72h); default: all the provider keeps (Stripe 30 days, Paddle 90)")
		fs.BoolVar(&o.Resume, "resume", false, "continue after the last event the previous run with the same filters reconciled")
	}
	if rec.Takes("types") {
		fs.StringVar(&types, "types", "", "only these event types, comma-separated (at most 20)")
	}
	if rec.Takes("failed-only") {
		fs.BoolVar(&o.FailedOnly, "failed-only", false, "only events not yet delivered successfully")
	}
	rest, err := parseFlags(fs, args[1:], stderr)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usageError{fmt.Sprintf("reconcile %s takes no arguments, got %q", rec.Name, rest)}
	case o.Since < 0:
		return usageError{"--since must be positive"}
	case o.Since > 0 && o.Resume:
		return usageError{"--since and --resume cannot be used together"}
	}
	for _, t := range strings.Split(types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Types = append(o.Types, t)
		}
	}
	if len(o.Types) > 20 {
		return usageError{"--types takes at most 20 types"}
	}

	specs := providers.All()
	cfg, err := config.Load(getenv, specs)
	if err != nil {
		return err
	}
	if why := rec.Unconfigured(cfg.Settings(rec.Source).Env); why != "" {
		return fmt.Errorf("reconcile %s: %s", rec.Name, why)
	}
	if missing := unconfigured(cfg); len(missing) > 0 && !o.DryRun && !*allow {
		return fmt.Errorf("reconcile runs the steps of the events it processes with this shell's configuration, which lacks the server's:\n  %s\n"+
			"set them as the server has them, or pass --allow-unconfigured to accept that", strings.Join(missing, "\n  "))
	}
	log := slog.New(reqlog.NewHandler(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	pool, err := db.Open(ctx, cfg.DatabaseURL, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
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
	on, _, err := server.Reconcilers(cfg, providers.Reconcilers(), pool, proc, provs, log)
	if err != nil {
		return err
	}
	o.Trigger, o.Out = reconcile.TriggerCLI, stdout
	sum, err := on[rec.Name].Run(ctx, o)
	if sum != nil {
		fmt.Fprintln(stdout, sum.String())
	}
	if errors.Is(err, reconcile.ErrBusy) {
		return fmt.Errorf("reconcile %s: another run (a replica's periodic run, or an operator's) holds the lock; try again later", rec.Name)
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
