// Package server wires the receiver together: configuration, the database
// pool, the providers, the processor and its redriver, and the Echo router
// with every route registered in one place. cmd/server calls Run; the
// end-to-end tests run the built binary.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/webhooks/githubhook"
	"github.com/paywebhooks/receiver/internal/webhooks/stripehook"
)

// Server is the running receiver.
type Server struct {
	cfg      config.Config
	log      *slog.Logger
	pool     *pgxpool.Pool
	registry *prometheus.Registry
	metrics  *webhooks.Metrics
	proc     *webhooks.Processor
	echo     *echo.Echo
	http     *http.Server
	// closed once Shutdown has closed the listener and logged it.
	listenerClosed chan struct{}
}

// provider is a webhook provider and whether it may be mounted.
type provider struct {
	webhooks.Provider
	mounted bool // it has a secret: the receiver never serves what it cannot verify
}

// allProviders is the registry of every provider the receiver knows. Adding
// a provider is one line here (see docs/adding-an-integration.md).
func allProviders(cfg config.Config) []provider {
	return []provider{
		{stripehook.New(cfg.StripeSecrets), len(cfg.StripeSecrets) > 0},
		{githubhook.New(cfg.GitHubSecrets, cfg.NotifyEmail), len(cfg.GitHubSecrets) > 0},
	}
}

// ProvidersBySource returns every provider by source name, mounted or not:
// a stored event is replayed by its provider even when its route is off.
func ProvidersBySource(cfg config.Config) map[string]webhooks.Provider {
	m := map[string]webhooks.Provider{}
	for _, p := range allProviders(cfg) {
		m[p.Source()] = p.Provider
	}
	return m
}

// New builds the receiver: it applies migrations, opens the pool and builds
// the router. The caller owns Close.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	if err := db.Migrate(cfg.DatabaseURL); err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, pool: pool, registry: prometheus.NewRegistry()}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = webhooks.NewMetrics(s.registry)
	s.registry.MustRegister(newClaimCollector(pool, cfg.LeaseDuration))

	s.proc = NewProcessor(cfg, pool, s.metrics)
	s.echo = s.router(allProviders(cfg))
	s.http = &http.Server{
		Addr:              cfg.HTTPAddr,
		Handler:           s.echo,
		ReadHeaderTimeout: 5 * time.Second,
		// A webhook body is at most MAX_BODY_BYTES; a sender slower than
		// this is cut off rather than holding a connection.
		ReadTimeout: 15 * time.Second,
		// Long enough for a delivery's whole processing.
		WriteTimeout: s.proc.DeliveryTimeout() + 15*time.Second,
		IdleTimeout:  60 * time.Second,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown runs this once its listener is closed: from here on a
	// sender gets connection refused and retries elsewhere or later.
	s.listenerClosed = make(chan struct{})
	s.http.RegisterOnShutdown(func() {
		log.Info("stopped accepting connections")
		close(s.listenerClosed)
	})
	return s, nil
}

// NewProcessor builds the processor the configuration describes: mail over
// SMTP or to files, the fulfillment API when its URL is set.
func NewProcessor(cfg config.Config, pool *pgxpool.Pool, metrics *webhooks.Metrics) *webhooks.Processor {
	runner := &webhooks.StepRunner{MailFrom: cfg.MailFrom, MailDomain: cfg.MailDomain()}
	if cfg.SMTPAddr != "" {
		runner.Mail = mail.SMTPSender{Addr: cfg.SMTPAddr, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword}
	} else {
		runner.Mail = mail.FileSender{Dir: cfg.MailDir}
	}
	if cfg.FulfillmentURL != "" {
		runner.Fulfiller = fulfillment.New(cfg.FulfillmentURL)
	}
	return webhooks.NewProcessor(pool, runner, metrics, webhooks.Options{
		Lease:       cfg.LeaseDuration,
		MaxAttempts: cfg.MaxStepAttempts,
		Backoff:     cfg.RedriveInterval,
	})
}

// Handler is the HTTP handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.echo }

// Run serves until ctx ends, then shuts down gracefully: it stops accepting,
// lets in-flight deliveries finish within SHUTDOWN_TIMEOUT, stops the
// redriver and closes the pool. ready, if not nil, receives the listening
// address once the server accepts connections.
func (s *Server) Run(ctx context.Context, ready func(addr net.Addr)) error {
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	s.log.Info("receiver listening", "addr", ln.Addr().String())
	if ready != nil {
		ready(ln.Addr())
	}

	redriveCtx, stopRedrive := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { s.proc.Redrive(redriveCtx, s.cfg.RedriveInterval) })

	serveErr := make(chan error, 1)
	go func() { serveErr <- s.http.Serve(ln) }()

	var runErr error
	select {
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		s.log.Info("shutting down: draining in-flight deliveries", "timeout", s.cfg.ShutdownTimeout)
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		if err := s.http.Shutdown(sctx); err != nil {
			runErr = fmt.Errorf("shutdown: %w", err)
		}
		cancel()
		// Shutdown runs its hooks on goroutines of their own: let the
		// log say "stopped accepting" before anything that follows.
		select {
		case <-s.listenerClosed:
		case <-time.After(time.Second):
		}
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
			runErr = fmt.Errorf("serve: %w", err)
		}
	}
	stopRedrive()
	wg.Wait()
	return runErr
}

// Close releases the pool.
func (s *Server) Close() {
	s.pool.Close()
}
