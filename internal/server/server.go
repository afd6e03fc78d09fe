// Package server wires the receiver together: the setup (internal/wiring),
// the database pool, the providers and the step kinds it is handed, the
// processor and its redriver, and the Echo router with every route
// registered in one place. cmd/server builds the step kinds, hands them
// and the registry's providers to New, and calls Run; the end-to-end tests
// run the built binary. Nothing in this package names a provider or a
// kind.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/checkout"
	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/version"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// Server is the running receiver.
type Server struct {
	cfg       wiring.Setup
	log       *slog.Logger
	pool      *pgxpool.Pool
	registry  *prometheus.Registry
	metrics   *webhooks.Metrics
	proc      *webhooks.Processor
	providers []mounted
	// provs are the providers built, by source, mounted or not.
	provs map[string]webhooks.Provider
	echo  *echo.Echo
	http  *http.Server
	// side are the listeners beside the public one: /metrics on
	// METRICS_ADDR, the console on ADMIN_ADDR. None is ever served on
	// HTTP_ADDR.
	side []sideServer
	// background runs beside the server until it stops (the redriver, the
	// periodic reconciler).
	background []func(ctx context.Context)
	// monitor is the operator alerts' monitor, told of a fail-over.
	monitor *alerts.Monitor
	// heartbeat records the receiver for the operator commands, poked
	// after a fail-over.
	heartbeat *Heartbeat
	// reconcilers are the configured catch-up capabilities, by name.
	reconcilers map[string]reconcile.Instance
	// closers run when the server closes, after the pool's last use
	// (flushing traces).
	closers []func(context.Context) error
	// closed once Shutdown has closed the listener and logged it.
	listenerClosed chan struct{}
	// webhookRoutes are the mounted webhook routes, which a 404 under
	// /webhooks/ names.
	webhookRoutes []string
	// conns are HTTP_ADDR's listener's series (the listener comes with
	// Run; the alerts count them from New on).
	conns *connMetrics
	// buyer are the GET routes a buyer's browser reaches (buyer.go).
	buyer []buyerRoute
}

// headerTimeout is how long a request's headers may take to arrive on
// HTTP_ADDR, and maxHeaderBytes how large they may be (a delivery's are a
// kilobyte or two; 64 KiB leaves room for a proxy's additions).
const (
	headerTimeout  = 5 * time.Second
	maxHeaderBytes = 64 << 10
)

// sideServer is a listener of its own beside HTTP_ADDR.
type sideServer struct {
	name string
	addr string
	srv  *http.Server
}

// addSide serves h on addr, beside the public listener.
func (s *Server) addSide(name, addr string, h http.Handler) {
	s.side = append(s.side, sideServer{name: name, addr: addr, srv: &http.Server{
		Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 60 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}})
}

// mounted is a provider and whether its route is served.
type mounted struct {
	spec webhooks.Spec
	prov webhooks.Provider
	on   bool // it has a secret: the receiver never serves what it cannot verify
}

// Option changes what New builds.
type Option func(*options)

type options struct {
	kinds webhooks.StepKinds
}

// WithStepKind adds (or replaces) a step kind: what a fork registers for a
// kind of work of its own.
func WithStepKind(name string, k webhooks.StepKind) Option {
	return func(o *options) { o.kinds[name] = k }
}

// Providers builds every provider of specs with its settings of cfg, by
// source, mounted or not: a stored event is replayed by its provider even
// when its route is off.
func Providers(cfg wiring.Setup, specs []webhooks.Spec) (map[string]webhooks.Provider, error) {
	m := map[string]webhooks.Provider{}
	for _, s := range specs {
		p, err := s.New(cfg.Settings(s.Source))
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", s.Source, err)
		}
		m[s.Source] = p
	}
	return m, nil
}

// ProviderWarnings logs what the settings of the providers of specs should
// not be: said by the server at start-up, and by the commands that run
// steps.
func ProviderWarnings(cfg wiring.Setup, specs []webhooks.Spec, log *slog.Logger) {
	for _, spec := range specs {
		if spec.Warnings != nil {
			for _, w := range spec.Warnings(cfg.Settings(spec.Source)) {
				log.Warn(w, "provider", spec.Source)
			}
		}
	}
}

// NewProcessor builds the processor the configuration describes.
func NewProcessor(cfg wiring.Setup, pool *pgxpool.Pool, kinds webhooks.StepKinds, metrics *webhooks.Metrics, log *slog.Logger) *webhooks.Processor {
	// Said wherever steps run: the server, and the commands that replay
	// or catch up (an operator's shell without the server's secret sends
	// calls the API refuses).
	if cfg.FulfillmentURL != "" && cfg.FulfillmentKey == nil {
		log.Warn("fulfillment calls are unsigned: set FULFILLMENT_SECRET so that the fulfillment API can tell the receiver's calls from anybody's",
			"variable", "FULFILLMENT_SECRET")
	}
	return webhooks.NewProcessor(pool, kinds, metrics, log, cfg.Processor())
}

// New builds the receiver from cfg, the providers of list (the registry's,
// internal/providers, whose variables cfg was loaded with) and the step
// kinds it runs (wiring.StepKinds): it applies migrations, opens the pool
// and builds the router. The caller owns Close.
func New(ctx context.Context, cfg wiring.Setup, list []registry.Provider, kinds webhooks.StepKinds, log *slog.Logger,
	opts ...Option) (*Server, error) {
	o := options{kinds: maps.Clone(kinds)}
	if o.kinds == nil {
		o.kinds = webhooks.StepKinds{}
	}
	for _, f := range opts {
		f(&o)
	}
	specs := registry.Specs(list)
	for _, spec := range specs {
		if _, ok := cfg.Provider(spec.Source); !ok {
			return nil, fmt.Errorf("provider %s: its variables were not loaded: load the configuration with the providers the server is given", spec.Source)
		}
	}
	checkouts := registry.Checkouts(list)
	if len(checkouts) > 1 {
		return nil, fmt.Errorf("providers %s and %s both offer the checkout return (GET %s): one may", checkouts[0].Source, checkouts[1].Source,
			checkout.Route)
	}
	provs, err := Providers(cfg, specs)
	if err != nil {
		return nil, err
	}
	ProviderWarnings(cfg, specs, log)
	// Over the session URL: golang-migrate's lock is a session lock.
	if err := db.Migrate(cfg.SessionURL()); err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	s := &Server{cfg: cfg, log: log, registry: prometheus.NewRegistry(), provs: provs}
	if err := s.setupTracing(ctx); err != nil {
		return nil, err
	}
	if s.pool, err = db.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns, cfg.DBOptions(log)...); err != nil {
		return nil, err
	}
	pool := s.pool
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.registry.MustRegister(buildInfo())
	s.metrics = webhooks.NewMetrics(s.registry)
	s.conns = newConnMetrics(s.registry)
	s.registry.MustRegister(webhooks.NewClaimGauges(pool, cfg.LeaseDuration, 5*time.Second, log))
	s.proc = NewProcessor(cfg, pool, o.kinds, s.metrics, log)
	for _, spec := range specs {
		vars, _ := cfg.Provider(spec.Source)
		s.providers = append(s.providers, mounted{spec: spec, prov: provs[spec.Source], on: len(vars.Secrets) > 0})
	}

	if len(checkouts) == 1 {
		if err := s.setupCheckout(checkouts[0]); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if err := s.setupPortal(registry.Portals(list)); err != nil {
		pool.Close()
		return nil, err
	}
	s.echo = s.router()
	s.http = &http.Server{
		Addr:    cfg.HTTPAddr,
		Handler: s.traced(s.echo),
		// Until its headers are in, a request is a connection that costs
		// a goroutine, buffers and up to MaxHeaderBytes, for nothing yet.
		ReadHeaderTimeout: headerTimeout,
		// The webhook routes hold a body to BODY_TIMEOUT after its
		// headers themselves (webhooks.Limits); this is the backstop for
		// every route.
		ReadTimeout: headerTimeout + cfg.BodyTimeout,
		// Long enough for a delivery's whole processing.
		WriteTimeout:   s.proc.DeliveryTimeout() + 15*time.Second,
		IdleTimeout:    60 * time.Second,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// The listener of Run follows each connection (connLimit).
		ConnContext: withConn,
	}
	if cfg.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.metricsHandler())
		s.addSide("metrics", cfg.MetricsAddr, mux)
	}
	s.background = append(s.background, func(ctx context.Context) { s.proc.Redrive(ctx, cfg.RedriveInterval) })
	if err := s.setupEntitlements(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.setupHeartbeat()
	s.setupAlerts()
	reconcilers := registry.Reconcilers(list)
	if err := s.setupReconcile(reconcilers, provs); err != nil {
		pool.Close()
		return nil, err
	}
	s.setupFailoverWatch(reconcilers)
	s.setupEndpoints(specs, registry.Endpoints(list))
	if cfg.AdminAddr != "" {
		if err := s.setupConsole(specs, wiring.Owners(list), provs); err != nil {
			pool.Close()
			return nil, err
		}
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

// buildInfo is paywebhooks_build_info{version,goversion} 1: which build
// each replica runs, for dashboards and for joining onto other series.
func buildInfo() prometheus.Collector {
	v := version.Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "paywebhooks_build_info",
		Help:        "Always 1; its labels are the version the receiver was built as and the Go it was built with.",
		ConstLabels: prometheus.Labels{"version": v.Version, "goversion": v.GoVersion},
	}, func() float64 { return 1 })
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Handler is the HTTP handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Processor is the receiver's processor, for tests.
func (s *Server) Processor() *webhooks.Processor { return s.proc }

// Providers are the receiver's providers, built, by source, mounted or not:
// what an operator's replay runs an event through.
func (s *Server) Providers() map[string]webhooks.Provider { return s.provs }

// Metrics are the receiver's delivery and step series, for tests.
func (s *Server) Metrics() *webhooks.Metrics { return s.metrics }

// Addrs are the addresses the server listens on, once it does.
type Addrs struct {
	HTTP net.Addr
	Side map[string]net.Addr // "metrics", "admin": the listeners beside HTTP, when configured
}

// Run serves until ctx ends, then shuts down gracefully: it stops accepting,
// lets in-flight deliveries finish within SHUTDOWN_TIMEOUT, stops the
// redriver and closes the pool. ready, if not nil, receives the listening
// addresses once the server accepts connections.
func (s *Server) Run(ctx context.Context, ready func(Addrs)) error {
	tcp, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	ln := limitConns(tcp, s.cfg.MaxConnections, s.conns, s.registry)
	s.http.ConnState = ln.connState
	bound := s.cfg.MemoryBound()
	if !s.cfg.MemoryLimitSet {
		debug.SetMemoryLimit(bound)
	}
	s.log.Info("memory bound", "bytes", bound, "strangers_bytes", s.cfg.StrangerMemoryBound(), "soft_limit", !s.cfg.MemoryLimitSet,
		"formula", fmt.Sprintf("%d MiB + UNVERIFIED_BODY_BYTES + MAX_INFLIGHT × %d × MAX_BODY_BYTES + MAX_CONNECTIONS × %d KiB",
			config.BaseMemory>>20, config.DeliveryBodies, config.ConnectionMemory>>10))
	addrs := Addrs{HTTP: ln.Addr(), Side: map[string]net.Addr{}}
	var sideLns []net.Listener
	for _, side := range s.side {
		sl, err := net.Listen("tcp", side.addr)
		if err != nil {
			ln.Close()
			for _, l := range sideLns {
				l.Close()
			}
			return fmt.Errorf("listen on %s (%s): %w", side.addr, side.name, err)
		}
		sideLns = append(sideLns, sl)
		addrs.Side[side.name] = sl.Addr()
		s.log.Info(side.name+" listening", "addr", sl.Addr().String())
	}
	s.log.Info("receiver listening", "addr", ln.Addr().String())
	if ready != nil {
		ready(addrs)
	}

	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, f := range s.background {
		wg.Go(func() { f(bg) })
	}

	serveErr := make(chan error, 1+len(s.side))
	go func() { serveErr <- s.http.Serve(ln) }()
	for i, side := range s.side {
		go func() {
			if err := side.srv.Serve(sideLns[i]); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("%s: %w", side.name, err)
			}
		}()
	}

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
	for _, side := range s.side {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = side.srv.Shutdown(sctx)
		cancel()
	}
	stopBackground()
	wg.Wait()
	return runErr
}

// Close releases the pool, then runs the closers (flushing traces).
func (s *Server) Close() {
	s.pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range s.closers {
		if err := c(ctx); err != nil {
			s.log.Warn("close", "error", err)
		}
	}
}
