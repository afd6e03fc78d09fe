// Command snippet-nethttp is the dedupe snippet as it is most often copied
// into Go: a plain net/http ServeMux and a pgx pool, nothing else. It is the
// benchmark's honest baseline, the fastest form of what users write, not
// something to deploy: it has the hole the seed describes (the claim
// commits on its own, before the work, so a crash between the two
// statements loses the invoice for good).
//
// For each Stripe delivery it reads the body (at most 1 MiB), verifies the
// signature with stripe-go's webhook.ValidatePayloadWithTolerance, decodes
// the fields it needs with encoding/json, claims the event id with
// INSERT … ON CONFLICT DO NOTHING RETURNING in autocommit, and, if the claim
// was new, inserts the invoice in a second autocommit statement; then it
// answers 200 with no body. It stores no body. bench/snippet is the same on
// Echo, the receiver's HTTP stack.
//
// Its tables are the ones a user who copies it creates (bench/snippetdb,
// created at start where absent): processed_events keyed by the event,
// invoices unique by Stripe's id, nothing more. Pointed at a database
// migrated like the receiver's, it writes the receiver's tables instead
// (the benchmark's "receiver's schema" row).
//
// Its queries run under the request's values but not its cancellation
// (context.WithoutCancel, bounded by -query-timeout): a sender that hangs up
// does not cancel them, so pgx keeps its connections instead of closing
// them mid-query and reconnecting on the next request.
//
//	snippet-nethttp -addr 127.0.0.1:0 -db postgres://… -secret whsec_… [-max-conns N] [-pprof ADDR]
//
// The flags default to the receiver's variables (HTTP_ADDR, DATABASE_URL,
// STRIPE_WEBHOOK_SECRET, DB_MAX_CONNS), and it answers GET /healthz, so that
// the benchmark can also start it in the receiver's place. -pprof serves
// net/http/pprof and expvar's /debug/vars on a second address, for the
// benchmark's profiles and allocation counts; without it nothing more
// listens. It prints {"msg":"snippet listening","addr":"…"} on stdout once
// it listens.
package main

import (
	"context"
	"encoding/json"
	_ "expvar" // /debug/vars on -pprof's address: the allocation counters
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // on -pprof's address only (http.DefaultServeMux)
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/paywebhooks/receiver/bench/snippetdb"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "snippet-nethttp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("snippet-nethttp", flag.ContinueOnError)
	addr := fs.String("addr", envOr("HTTP_ADDR", "127.0.0.1:0"), "listen address")
	dbURL := fs.String("db", os.Getenv("DATABASE_URL"), "PostgreSQL URL (its tables are created if absent, bench/snippetdb; a database migrated like the receiver's keeps the receiver's)")
	secret := fs.String("secret", os.Getenv("STRIPE_WEBHOOK_SECRET"), "Stripe signing secret")
	defConns, _ := strconv.Atoi(os.Getenv("DB_MAX_CONNS"))
	maxConns := fs.Int("max-conns", defConns, "pool size (0: pgxpool's default)")
	queryTimeout := fs.Duration("query-timeout", 10*time.Second, "bound on a delivery's queries, which the sender hanging up does not cancel")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof and /debug/vars on this `address` (the benchmark's profiles); empty: not served")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(*dbURL)
	if err != nil {
		return err
	}
	if *maxConns > 0 {
		cfg.MaxConns = int32(*maxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := snippetdb.Create(ctx, pool); err != nil {
		return fmt.Errorf("create the tables: %w", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("POST /webhooks/stripe", func(w http.ResponseWriter, r *http.Request) {
		payload, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		sig := r.Header.Get("Stripe-Signature")
		if err := webhook.ValidatePayloadWithTolerance(payload, sig, *secret, 5*time.Minute); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var event struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				Object struct {
					ID            string  `json:"id"`
					AmountDue     int64   `json:"amount_due"`
					AmountPaid    int64   `json:"amount_paid"`
					Currency      string  `json:"currency"`
					CustomerEmail *string `json:"customer_email"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(payload, &event); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// The sender hanging up must not cancel the queries: pgx closes a
		// connection whose query is cancelled, and its replacement would be
		// paid for by a later request.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), *queryTimeout)
		defer cancel()

		var key string
		err = pool.QueryRow(ctx, `
INSERT INTO processed_events (event_key, source, status)
VALUES ($1, 'stripe', 'done')
ON CONFLICT (event_key) DO NOTHING
RETURNING event_key`, event.ID).Scan(&key)
		if err == pgx.ErrNoRows {
			w.WriteHeader(http.StatusOK) // already handled
			return
		}
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}

		if event.Type == "invoice.created" || event.Type == "invoice.finalized" {
			inv := event.Data.Object
			email := ""
			if inv.CustomerEmail != nil {
				email = *inv.CustomerEmail
			}
			_, err = pool.Exec(ctx, `
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
VALUES ($1, 'pending', $2, $3, $4, NULLIF($5, ''))
ON CONFLICT (stripe_invoice_id) DO NOTHING`, inv.ID, inv.AmountDue, inv.AmountPaid, inv.Currency, email)
			if err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})

	if *pprofAddr != "" {
		pln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return err
		}
		go func() { _ = http.Serve(pln, nil) }()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]string{"msg": "snippet listening", "addr": ln.Addr().String()})
	fmt.Println(string(line))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
