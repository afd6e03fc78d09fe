// Command server is the webhook receiver. With no arguments it serves HTTP;
// `server migrate up|down N|version` manages the schema.
//
// Configuration comes from the environment; see the README.
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
	"syscall"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
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
	if err != nil {
		var u usageError
		if !errors.As(err, &u) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError is a command line the binary does not understand.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

const usage = `usage:
  server                      serve HTTP (configuration from the environment)
  server migrate up           apply every pending migration
  server migrate down N       roll back N migrations
  server migrate version      print the schema version
  server events ...           list, show, replay and prune events (server events for help)
  server reconcile NAME ...   catch up on events the providers' deliveries missed (server reconcile for help)
`

// run is the whole program, with its inputs passed in so that tests can
// drive it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "serve" {
		return serve(ctx, getenv, stdout)
	}
	switch args[0] {
	case "migrate":
		return migrateCmd(args[1:], getenv, stdout, stderr)
	case "events":
		return eventsCmd(ctx, args[1:], getenv, stdout, stderr)
	case "reconcile":
		return reconcileCmd(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return usageError{"unknown command"}
}

func serve(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := config.Load(getenv, providers.All())
	if err != nil {
		return err
	}
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel})))
	slog.SetDefault(log)
	log.Info("starting receiver", "config", cfg)

	srv, err := server.New(ctx, cfg, providers.Registry(), log)
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

func migrateCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	url := getenv("DATABASE_URL")
	if url == "" {
		return errors.New("DATABASE_URL is required")
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"migrate needs up, down N or version"}
	}
	switch args[0] {
	case "up":
		if err := db.Migrate(url); err != nil {
			return err
		}
	case "down":
		if len(args) != 2 {
			fmt.Fprint(stderr, usage)
			return usageError{"migrate down needs N"}
		}
		n, err := strconv.Atoi(args[1])
		if err != nil || n <= 0 {
			fmt.Fprintf(stderr, "migrate down: N must be a positive number, got %q\n", args[1])
			return usageError{"bad N"}
		}
		if err := db.MigrateDown(url, n); err != nil {
			return err
		}
	case "version":
	default:
		fmt.Fprintf(stderr, "unknown migrate command %q\n%s", args[0], usage)
		return usageError{"unknown migrate command"}
	}
	v, dirty, err := db.Version(url)
	if err != nil {
		return err
	}
	latest, _ := db.LatestVersion()
	fmt.Fprintf(stdout, "schema version %d (latest %d)%s\n", v, latest, map[bool]string{true: ", dirty", false: ""}[dirty])
	return nil
}
