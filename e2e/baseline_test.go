package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// The baseline receiver is the snippet everyone copies, from the seed
// ("The webhook dedupe everyone copies has a hole in it"), translated to Go
// as it gets copied into production:
//
//	claimed = INSERT INTO processed_events … ON CONFLICT DO NOTHING RETURNING event_key
//	if not claimed: return 200   # already handled
//	fulfil_order(event)          # the actual work, committed separately
//	return 200
//
// The claim commits on its own, before the work. It runs as a child process
// (this test binary, re-executed with baselineEnv set) so that a test can
// SIGKILL it between the claim and the work, exactly like the receiver.

// baselineEnv, when set, makes TestMain run the baseline receiver instead
// of the tests.
const baselineEnv = "E2E_RUN_BASELINE_RECEIVER"

// startBaseline starts the baseline receiver on w's database and API.
func startBaseline(t *testing.T, name string, env map[string]string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{baselineEnv: "1"}
	for k, v := range env {
		e[k] = v
	}
	return startProc(t, name, exe, []string{"-test.run=^$"}, e)
}

// runBaseline serves the baseline receiver until it is killed. Its
// configuration comes from the same variables as the receiver's.
func runBaseline() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		return 1
	}
	defer pool.Close()
	verifier := stripe.New([]string{os.Getenv("STRIPE_WEBHOOK_SECRET")})
	api := fulfillment.New(os.Getenv("FULFILLMENT_URL"))
	// Signed as the receiver signs, so that the test's API takes its calls.
	api.Key, _ = standardwebhooks.ParseSecret(os.Getenv("FULFILLMENT_SECRET"))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := pool.Ping(r.Context()); err != nil {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /webhooks/stripe", func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		ev, err := verifier.Verify(r.Header, body, time.Now())
		if err != nil {
			http.Error(w, "rejected", http.StatusBadRequest)
			return
		}

		// The snippet: claim first, in a commit of its own.
		var key string
		err = pool.QueryRow(ctx, `INSERT INTO processed_events (event_key, source, status) VALUES ($1,'stripe','done') ON CONFLICT (event_key) DO NOTHING RETURNING event_key`, ev.ID).Scan(&key)
		if errors.Is(err, pgx.ErrNoRows) {
			fmt.Fprintln(w, `{"outcome":"duplicate"}`) // "already handled"
			return
		}
		if err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}

		// fulfil_order(event): the work, after the claim has committed.
		if ev.Type != "checkout.session.completed" {
			fmt.Fprintln(w, `{"outcome":"ignored"}`)
			return
		}
		var env struct {
			Data struct {
				Object struct {
					ID              string `json:"id"`
					AmountTotal     int64  `json:"amount_total"`
					Currency        string `json:"currency"`
					PaymentIntent   string `json:"payment_intent"`
					CustomerDetails struct {
						Email string `json:"email"`
					} `json:"customer_details"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		s := env.Data.Object
		var orderID int64
		err = pool.QueryRow(ctx, `
INSERT INTO orders (source, provider_event_id, external_id, payment_intent_id, status, amount_cents, currency, customer_email)
VALUES ('stripe', $1, $2, $3, 'paid', $4, $5, $6) RETURNING id`,
			ev.ID, s.ID, s.PaymentIntent, s.AmountTotal, s.Currency, s.CustomerDetails.Email).Scan(&orderID)
		if err != nil {
			http.Error(w, "order not written", http.StatusInternalServerError)
			return
		}
		err = api.Fulfill(ctx, fulfillment.IdempotencyKey(ev.ID+"/"+stepFulfillment), fulfillment.Request{
			OrderID: orderID, Source: "stripe", ExternalID: s.ID, AmountCents: s.AmountTotal,
			Currency: s.Currency, CustomerEmail: s.CustomerDetails.Email,
		})
		if err != nil {
			http.Error(w, "fulfillment failed", http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, `{"outcome":"processed"}`)
	})

	ln, err := net.Listen("tcp", os.Getenv("HTTP_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		return 1
	}
	line, _ := json.Marshal(map[string]string{"msg": "receiver listening", "addr": ln.Addr().String(), "receiver": "baseline"})
	fmt.Println(string(line))
	err = http.Serve(ln, mux)
	fmt.Fprintln(os.Stderr, "baseline:", err)
	return 1
}
