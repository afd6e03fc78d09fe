package e2e

import (
	"context"
	"fmt"

	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
)

// runLogged runs an operator command and logs its whole output, stdout and
// stderr as they came, as an operator's terminal shows them.
func runLogged(t *testing.T, env map[string]string, args ...string) cmdResult {
	t.Helper()
	var terminal logWriter
	r := runServerCmdTo(t, env, &terminal, args...)
	t.Logf("$ server %s\n%s(exit %d)", strings.Join(args, " "), terminal.String(), r.Code)
	return r
}

// serverEnvironment is a receiver's whole environment, as production sets
// it, without FULFILLMENT_SECRET (which the server accepts, warning that
// its fulfillment calls go unsigned), and with the Stripe API key and base
// of the catch-up.
func serverEnvironment(w *world, stripeAPI *stripetest.Server, alertHook string) map[string]string {
	env := w.env(
		"STRIPE_API_KEY", stripeAPI.Key, "STRIPE_API_BASE", stripeAPI.URL,
		"PADDLE_WEBHOOK_SECRET", paddleSecret, "POLAR_WEBHOOK_SECRET", polarSecret,
		"ADMIN_ADDR", "127.0.0.1:0", "ADMIN_TOKEN", "e2e-admin-token-0123456789abcdef", "METRICS_ADDR", "127.0.0.1:0",
		"ALERT_WEBHOOK_URL", alertHook, "ALERT_EMAIL", "ops@example.test",
		"MAX_BODY_BYTES", "1048576", "MAX_INFLIGHT", "64", "TRUSTED_PROXIES", "10.0.0.0/8")
	delete(env, "FULFILLMENT_SECRET")
	return env
}

// TestOperatorCommandsWithTheServersEnvironment: run with exactly the
// environment the receiver runs with (every variable set, FULFILLMENT_SECRET
// not, which the server accepts with a warning), `reconcile stripe --since
// 30m` and `events replay KEY` run, warning as the server does. The same
// command with another SMTP_ADDR than the running receiver's is refused,
// exit 2, naming the difference and the receiver; with no receiver running
// (its record stale) it warns and runs. (Before, the first two were
// refused: "FULFILLMENT_SECRET is unset".)
func TestOperatorCommandsWithTheServersEnvironment(t *testing.T) {
	u := newDatabase(t)
	// A fulfillment API that takes unsigned calls, as the API of a team
	// that has not adopted signed calls yet does.
	w := &world{DBURL: u, DB: openPool(t, u), SMTP: mailtest.NewServer(t), API: fulfillmenttest.NewServer(t)}
	stripeAPI := stripetest.New(t, "rk_test_e2e_opcmds_0123456789")
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	env := serverEnvironment(w, stripeAPI, hook.URL+"/alerts/T0000/B0000/hooktoken0123")
	p := startReceiver(t, "receiver", env)
	p.waitLog(t, "fulfillment calls are unsigned", time.Second)
	// (A binary from E2E_SERVER_BIN that predates the record of receivers
	// goes on to show what its commands do.)
	if !externalBin {
		p.waitLog(t, "receiver recorded", 30*time.Second)
		// What the receiver recorded holds none of its secrets.
		var recorded string
		if err := w.DB.QueryRow(context.Background(), `SELECT fingerprint::text FROM receivers`).Scan(&recorded); err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{stripeSecret, githubSecret, paddleSecret, polarSecret, stripeAPI.Key, env["ADMIN_TOKEN"], "hooktoken0123"} {
			if strings.Contains(recorded, secret) {
				t.Errorf("the receivers table holds %q", secret)
			}
		}
	}

	// An event whose fulfillment call the API refused (parked), and one
	// Stripe created that was never delivered.
	park := func(n int) delivery {
		t.Helper()
		w.API.SetStatus(422)
		defer w.API.SetStatus(0)
		d := checkout(n, "opcmds")
		mustPost(t, p.URL, d, 200)
		if s, _ := w.stepState(t, d.StepKey(stepFulfillment)); s != "parked" {
			t.Fatalf("the refused fulfillment step is %s, want parked", s)
		}
		return d
	}
	parked := park(1)
	missed := checkoutAt(2, "opcmds", time.Now().Add(-10*time.Minute))
	if _, err := stripeAPI.AddRaw(missed.Body, false); err != nil {
		t.Fatal(err)
	}
	calls := len(w.API.Requests())

	r := runLogged(t, env, "reconcile", "stripe", "--since", "30m")
	if r.Code != 0 || !strings.Contains(r.Stdout, "1 processed") ||
		!strings.Contains(r.Stderr, "this shell's configuration is the running receivers' (1 receiver)") ||
		!strings.Contains(r.Stderr, "fulfillment calls are unsigned") {
		t.Errorf("reconcile stripe --since 30m with the server's environment: exit %d; want 0, the missed event processed, "+
			"the receiver it matches and the server's warning", r.Code)
	}
	r = runLogged(t, env, "events", "replay", parked.Key)
	if r.Code != 0 || !strings.Contains(r.Stdout, parked.Key+": processed") {
		t.Errorf("events replay KEY with the server's environment: exit %d; want 0, processed", r.Code)
	}
	if s, _ := w.stepState(t, parked.StepKey(stepFulfillment)); s != "done" || len(w.API.Requests()) != calls+2 ||
		count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, missed.ID) != 1 {
		t.Errorf("after both: the parked step %s, %d fulfillment calls, the missed event's order %d; want done, 2 calls and 1 order",
			s, len(w.API.Requests())-calls, count(t, w.DB, `SELECT count(*) FROM orders WHERE provider_event_id = $1`, missed.ID))
	}

	// Another SMTP relay than the running receiver's: refused, and nothing
	// happens.
	other := mailtest.NewServer(t)
	shell := map[string]string{}
	for k, v := range env {
		shell[k] = v
	}
	shell["SMTP_ADDR"] = other.Addr()
	again := park(3)
	calls = len(w.API.Requests())
	r = runLogged(t, shell, "events", "replay", again.Key)
	want := fmt.Sprintf("SMTP_ADDR: this shell: %s / receivers: %s", other.Addr(), w.SMTP.Addr())
	if r.Code != 2 || !strings.Contains(r.Stderr, want) ||
		!strings.Contains(r.Stderr, fmt.Sprintf(" pid %d (started ", p.cmd.Process.Pid)) {
		t.Errorf("replay with another SMTP_ADDR: exit %d; want 2, %q and the receiver's pid %d", r.Code, want, p.cmd.Process.Pid)
	}
	if s, _ := w.stepState(t, again.StepKey(stepFulfillment)); s != "parked" || len(w.API.Requests()) != calls || len(other.Messages()) != 0 {
		t.Errorf("the refused replay: step %s, %d calls, %d emails to the other relay; want it left parked, nothing sent",
			s, len(w.API.Requests())-calls, len(other.Messages()))
	}
	r = runLogged(t, shell, "reconcile", "stripe", "--since", "30m")
	if r.Code != 2 || !strings.Contains(r.Stderr, want) {
		t.Errorf("reconcile with another SMTP_ADDR: exit %d; want 2, %q", r.Code, want)
	}

	// No receiver running: the record goes stale (as four missed
	// heartbeats make it); the command warns and runs.
	p.Kill()
	if !externalBin {
		if _, err := w.DB.Exec(context.Background(), `UPDATE receivers SET seen_at = now() - interval '10 minutes'`); err != nil {
			t.Fatal(err)
		}
	}
	r = runLogged(t, env, "events", "replay", again.Key)
	if r.Code != 0 || !strings.Contains(r.Stderr, "warning: no running receiver is recorded") ||
		!strings.Contains(r.Stderr, "ran with this shell's configuration") || !strings.Contains(r.Stdout, again.Key+": processed") {
		t.Errorf("replay with no receiver running: exit %d; want 0 with a warning", r.Code)
	}
	r = runLogged(t, env, "reconcile", "stripe", "--since", "30m")
	if r.Code != 0 || !strings.Contains(r.Stderr, "warning: no running receiver is recorded") || !strings.Contains(r.Stdout, "0 processed") {
		t.Errorf("reconcile with no receiver running: exit %d; want 0 with a warning", r.Code)
	}
}
