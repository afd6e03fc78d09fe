// Command profserver is the receiver as `server` serves it (cmd/server:
// the same configuration from the environment, the same providers, the same
// GOGC default), plus net/http/pprof and expvar's /debug/vars on a second
// address, PPROF_ADDR. The benchmark (bench/cmd/benchrun) runs it only for
// its cost and profile windows, where it takes CPU and allocation profiles
// and counts allocations; every throughput it reports is of bin/server
// itself. The receiver keeps no profiling endpoint of its own: an operator
// who wants one runs this.
//
//	PPROF_ADDR=127.0.0.1:6060 DATABASE_URL=… STRIPE_WEBHOOK_SECRET=… profserver
//
// Keep serve in step with cmd/server's serve when that changes.
package main

import (
	"context"
	_ "expvar" // /debug/vars: memstats, the allocation counters
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // /debug/pprof on PPROF_ADDR (http.DefaultServeMux)
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// gcPercent is cmd/server's collector target when GOGC is unset.
const gcPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := serve(ctx, os.Getenv("PPROF_ADDR"))
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "profserver:", err)
		os.Exit(1)
	}
}

// serve is cmd/server's serve, with the profiling listener on pprofAddr.
func serve(ctx context.Context, pprofAddr string) error {
	if pprofAddr == "" {
		return fmt.Errorf("PPROF_ADDR is required (run bin/server when no profile is wanted)")
	}
	list := providers.List()
	cfg, err := wiring.Load(os.Getenv, registry.Specs(list))
	if err != nil {
		return err
	}
	log := slog.New(reqlog.NewHandler(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: cfg.LogLevel})))
	slog.SetDefault(log)

	ln, err := net.Listen("tcp", pprofAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() { _ = http.Serve(ln, nil) }()
	log.Info("profiling endpoints", "addr", ln.Addr().String())

	srv, err := server.New(ctx, cfg, list, wiring.StepKinds(cfg, list), log)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx, nil)
}
