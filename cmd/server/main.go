// Command server is the webhook receiver. With no arguments it serves HTTP;
// `server migrate`, `server events`, `server reconcile`, `server
// endpoints`, `server healthcheck` and `server version` are its operator commands, each with
// --help (which needs no configuration) and the exit statuses of cli.go.
//
// Configuration comes from the environment; see docs/configuration.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/version"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// gcPercent is the collector's target when GOGC is not set. The
// receiver's live heap is a few MB (about 3 under load), so at Go's default
// of 100 the collector runs each time a few MB are allocated, some 15 times
// a second at 1,500 new 5 KB events a second, and was the largest single
// difference between the receiver's CPU per event and the copied
// snippet's. At 200 it runs half as often: about 30 µs less CPU per new
// event (BENCHMARKS.md), for a heap that may grow to three times the live
// one between collections: the peak resident set at 256 deliveries in
// flight went from 56.7 to 68.6 MiB, inside the 100 MiB it keeps to. GOGC (and GOMEMLIMIT),
// when set, are the runtime's as usual.
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

const usage = `usage:
  server                            serve HTTP (configuration from the environment)
  server migrate up|down N|version  manage the schema (server migrate --help)
  server events COMMAND ...         list, show, replay, resolve and prune events (server events --help)
  server reconcile NAME ...         catch up on events the deliveries missed (server reconcile --help)
  server endpoints check [--fix]    check how each provider is set up to send here (server endpoints --help)
  server entitlements show SUBJECT  a subject's entitlements and what grants each (server entitlements --help)
  server healthcheck [--url URL]    exit 0 when the server on HTTP_ADDR answers GET /healthz
  server version [--json]           the version this binary was built as (also: server --version)
  server help COMMAND ...           a command's usage (also: server COMMAND ... --help)

Every command takes --help, and --json where it prints a result.
Exit status: 0 done; 1 failed (or left work that is retried); 2 usage error,
or a shell unlike the running receivers refused, nothing done; 3 done, but
something waits for an operator (an event left parked, a finding unresolved).
`

// run is the whole program, with its inputs passed in so that tests can
// drive it. It writes what an error means to stderr (report) and returns
// it; exitCode turns it into the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	report(err, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return serve(ctx, getenv, stdout)
	}
	switch args[0] {
	case "serve":
		c := newCommand("serve", "server [serve]",
			"Serves HTTP: the webhook routes, /healthz, /readyz, /metrics, and the console on ADMIN_ADDR.\n"+
				"Configuration comes from the environment (see docs/configuration.md); DATABASE_URL is required.")
		rest, err := c.parse(args[1:], stdout)
		if err != nil {
			return err
		}
		if len(rest) > 0 {
			return c.fail("takes no arguments, got %q", rest)
		}
		return serve(ctx, getenv, stdout)
	case "migrate":
		return migrateCmd(args[1:], getenv, stdout)
	case "events":
		return eventsCmd(ctx, args[1:], getenv, stdout, stderr)
	case "reconcile":
		return reconcileCmd(ctx, args[1:], getenv, stdout, stderr)
	case "endpoints":
		return endpointsCmd(ctx, args[1:], getenv, stdout)
	case "entitlements":
		return entitlementsCmd(ctx, args[1:], getenv, stdout, stderr)
	case "healthcheck":
		return healthcheckCmd(ctx, args[1:], getenv, stdout)
	case "version", "-version", "--version":
		return versionCmd(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		if args[0] == "help" && len(args) > 1 {
			// server help events list: server events list --help.
			return dispatch(ctx, append(args[1:len(args):len(args)], "--help"), getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return errHelp
	}
	return usageError{msg: fmt.Sprintf("server: unknown command %q", args[0]) +
		didYouMean(args[0], []string{"serve", "migrate", "events", "reconcile", "endpoints", "entitlements", "healthcheck", "version", "help"}), usage: usage}
}

func serve(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	list := providers.List()
	cfg, err := wiring.Load(getenv, registry.Specs(list))
	if err != nil {
		return err
	}
	log := newLogger(cfg.Config, stdout)
	slog.SetDefault(log)
	v := version.Get()
	log.Info("starting receiver", "version", v.Version, "go", v.GoVersion, "config", cfg)
	logWeak(cfg.Config, log)

	srv, err := server.New(ctx, cfg, list, wiring.StepKinds(cfg, list), log)
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Run(ctx, nil); err != nil {
		return err
	}
	log.Info("receiver stopped")
	return nil
}

// newLogger writes cfg's log lines to w: JSON objects (LOG_FORMAT=json,
// the default) or key=value text (LOG_FORMAT=text, the default under the
// development tool), with a request's attributes added (reqlog).
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if cfg.LogFormat == config.LogText {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(reqlog.NewHandler(h))
}

// versionCmd is `server version`: the version this binary was built as.
func versionCmd(args []string, stdout io.Writer) error {
	c := newCommand("version", "server version [--json]",
		"Prints the version this binary was built as (stamped by make build and the Dockerfile\n"+
			"from git describe; else the source revision Go recorded), and the Go it was built with.")
	asJSON := c.fs.Bool("json", false, "print the version, Go version, platform and source revision as JSON")
	rest, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return c.fail("takes no arguments, got %q", rest)
	}
	v := version.Get()
	if *asJSON {
		return printJSON(stdout, v)
	}
	_, err = fmt.Fprintf(stdout, "paywebhooks receiver %s (%s %s)\n", v.Version, v.GoVersion, v.Platform)
	return err
}

var migrateGroup = group{name: "migrate", usage: `usage:
  server migrate up [--json]        apply every pending migration
  server migrate down N [--json]    roll back N migrations
  server migrate version [--json]   print the schema version

Each prints the schema version it leaves (and the latest this binary embeds).
DATABASE_SESSION_URL names the database when it is set (migrations hold a
session lock, which a transaction-mode pooler cannot keep), else DATABASE_URL.
`}

func migrateCmd(args []string, getenv func(string) string, stdout io.Writer) error {
	sub, err := migrateGroup.subcommand(args, stdout)
	if err != nil {
		return err
	}
	var c *command
	switch sub {
	case "up":
		c = newCommand("migrate up", "server migrate up [--json]",
			"Applies every pending migration, under golang-migrate's advisory lock.")
	case "down":
		c = newCommand("migrate down", "server migrate down N [--json]", "Rolls back the last N migrations.")
	case "version":
		c = newCommand("migrate version", "server migrate version [--json]",
			"Prints the schema version, and the latest this binary embeds.")
	default:
		return migrateGroup.unknown(sub, "up", "down", "version")
	}
	asJSON := c.fs.Bool("json", false, `print {"version", "latest", "dirty"} as JSON`)
	rest, err := c.parse(args[1:], stdout)
	if err != nil {
		return err
	}
	var n int
	switch {
	case sub == "down" && len(rest) != 1:
		return c.fail("needs N, the number of migrations to roll back")
	case sub == "down":
		if n, err = strconv.Atoi(rest[0]); err != nil || n <= 0 {
			return c.fail("N must be a positive number, got %q", rest[0])
		}
	case len(rest) > 0:
		return c.fail("takes no arguments, got %q", rest)
	}
	url := strings.TrimSpace(getenv("DATABASE_SESSION_URL"))
	if url == "" {
		url = getenv("DATABASE_URL")
	}
	if url == "" {
		return errors.New("DATABASE_URL is required")
	}
	switch sub {
	case "up":
		err = db.Migrate(url)
	case "down":
		err = db.MigrateDown(url, n)
	}
	if err != nil {
		return err
	}
	v, dirty, err := db.Version(url)
	if err != nil {
		return err
	}
	latest, _ := db.LatestVersion()
	if *asJSON {
		return printJSON(stdout, struct {
			Version uint `json:"version"`
			Latest  uint `json:"latest"`
			Dirty   bool `json:"dirty"`
		}{v, latest, dirty})
	}
	fmt.Fprintf(stdout, "schema version %d (latest %d)%s\n", v, latest, map[bool]string{true: ", dirty", false: ""}[dirty])
	return nil
}
