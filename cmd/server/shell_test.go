package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// shellWorld is a receiver whose fulfillment calls go unsigned (no
// FULFILLMENT_SECRET, which the server accepts with a warning), the whole
// environment it runs with, and a way to record it as running.
type shellWorld struct {
	r   *rt.Receiver
	api *stripetest.Server
	env map[string]string // the server's environment
}

func newShellWorld(t *testing.T) *shellWorld {
	r := rt.New(t, providers.List(), rt.Env("FULFILLMENT_SECRET", ""))
	api := stripetest.New(t, testStripeKey)
	env := map[string]string{
		"DATABASE_URL": r.Config.DatabaseURL, "SMTP_ADDR": r.Config.SMTPAddr, "FULFILLMENT_URL": r.Config.FulfillmentURL,
		"NOTIFY_EMAIL": r.Config.NotifyEmail, "MAIL_FROM": r.Config.MailFrom, "LEASE_DURATION": "5m",
		"STRIPE_WEBHOOK_SECRET": rt.Secret(stripe.Spec), "STRIPE_API_KEY": testStripeKey, "STRIPE_API_BASE": api.URL,
	}
	return &shellWorld{r: r, api: api, env: env}
}

// record records a receiver running with env, as its heartbeat does.
func (w *shellWorld) record(t *testing.T, env map[string]string) {
	t.Helper()
	cfg, err := wiring.Load(getenv(env), providers.All())
	if err != nil {
		t.Fatal(err)
	}
	if err := server.NewHeartbeat(w.r.Pool, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))).Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// shell is the server's environment with the changes kv (name, value, …).
func (w *shellWorld) shell(kv ...string) map[string]string {
	env := maps.Clone(w.env)
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// park delivers a paid checkout whose fulfillment call the API refuses:
// its fulfillment step is parked.
func (w *shellWorld) park(t *testing.T, id string) {
	t.Helper()
	w.r.API.SetStatus(422)
	mustOK(t, w.r.Deliver(t, stripe.Spec, checkout(id), nil))
	w.r.API.SetStatus(0)
}

func (w *shellWorld) parked(t *testing.T, id string) bool {
	return w.r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key = $1 AND status = 'parked'`, "evt_"+id+"/fulfillment") == 1
}

func runIn(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, getenv(env), &out, &out)
	t.Logf("$ server %s\n%s(exit %d)", strings.Join(args, " "), out.String(), exitCode(err))
	return out.String(), err
}

// TestReplayWithTheServersEnvironment: `events replay` run with exactly the
// server's environment, FULFILLMENT_SECRET unset as the server accepts it,
// runs and warns as the server does; a shell that differs from the running
// receiver is refused (exit 2) with each difference named, secrets as
// their masked form or "differs", and the receiver that differs; with no
// running receiver recorded, it warns and runs. (Before, the first was
// refused: "FULFILLMENT_SECRET is unset".)
func TestReplayWithTheServersEnvironment(t *testing.T) {
	w := newShellWorld(t)
	mustOK(t, w.r.Deliver(t, stripe.Spec, checkout("done"), nil))
	w.park(t, "bad")
	w.record(t, w.env)
	host, _ := os.Hostname()
	receiver := fmt.Sprintf("host %s pid %d (started ", host, os.Getpid())
	calls := len(w.r.API.Requests())

	out, err := runIn(t, w.shell("SMTP_ADDR", "127.0.0.1:1"), "events", "replay", "evt_bad")
	if exitCode(err) != exitUsage || !strings.Contains(out, "SMTP_ADDR: this shell: 127.0.0.1:1 / receivers: "+w.env["SMTP_ADDR"]) ||
		!strings.Contains(out, "receivers that differ: "+receiver) || !strings.Contains(out, "--allow-mismatch") {
		t.Errorf("a shell with another SMTP_ADDR: exit %d; want 2, naming SMTP_ADDR's two values and the receiver", exitCode(err))
	}
	secret := "whsec_" + "c2hlbGwgc2VjcmV0IG9mIDMyIGJ5dGVzLCBub3QgdGhlIHNlcnZlcidz"
	out, err = runIn(t, w.shell("FULFILLMENT_SECRET", secret), "events", "replay", "evt_bad")
	if exitCode(err) != exitUsage || !strings.Contains(out, "FULFILLMENT_SECRET: this shell: whsec_**** / receivers: unset") ||
		strings.Contains(out, secret[6:20]) {
		t.Errorf("a shell that signs where the receivers do not: exit %d; want 2, naming FULFILLMENT_SECRET and not its value", exitCode(err))
	}
	out, err = runIn(t, w.shell("STRIPE_API_KEY", testStripeKey+"x"), "reconcile", "stripe", "--since", "30m")
	if exitCode(err) != exitUsage || !strings.Contains(out, "STRIPE_API_KEY: differs (a secret: neither value is shown)") ||
		strings.Contains(out, testStripeKey) || len(w.api.Requests()) != 0 {
		t.Errorf("reconcile with another STRIPE_API_KEY: exit %d, %d API requests; want 2, naming it, and no request",
			exitCode(err), len(w.api.Requests()))
	}
	if !w.parked(t, "bad") || len(w.r.API.Requests()) != calls {
		t.Fatal("a refused command changed the parked step, or called the API")
	}

	// The server's own environment runs, and says what the server says.
	out, err = runIn(t, w.env, "events", "replay", "evt_bad")
	if err != nil || !strings.Contains(out, "evt_bad: processed") || !strings.Contains(out, "fulfillment calls are unsigned") ||
		!strings.Contains(out, "this shell's configuration is the running receivers' (1 receiver): "+receiver) {
		t.Errorf("replay with the server's environment: exit %d; want 0, processed, the unsigned warning and the receiver it matches", exitCode(err))
	}
	if w.parked(t, "bad") || len(w.r.API.Requests()) != calls+1 {
		t.Errorf("after the replay: still parked, or %d calls; want the one call", len(w.r.API.Requests())-calls)
	}
	w.api.Add("checkout.session.completed", time.Now().Add(-10*time.Minute), checkoutObject("cs_missed", "m@example.com", 700), false)
	out, err = runIn(t, w.env, "reconcile", "stripe", "--since", "30m")
	if err != nil || !strings.Contains(out, "1 processed") || !strings.Contains(out, "fulfillment calls are unsigned") {
		t.Errorf("reconcile stripe --since 30m with the server's environment: exit %d; want 0, one processed", exitCode(err))
	}

	// A webhook secret is only for verifying deliveries: told, not refused.
	out, err = runIn(t, w.shell("STRIPE_WEBHOOK_SECRET", rt.Secret(stripe.Spec)+"_other"), "events", "replay", "evt_done")
	if exitCode(err) == exitUsage || !strings.Contains(out, "note: STRIPE_WEBHOOK_SECRET: differs (a secret: neither value is shown), against "+receiver) {
		t.Errorf("a shell with another webhook secret: exit %d; want it run, with a note", exitCode(err))
	}
	// --allow-mismatch, and its former name, run all the same.
	for _, flag := range []string{"--allow-mismatch", "--allow-unconfigured"} {
		w.park(t, "bad_"+flag[8:])
		out, err := runIn(t, w.shell("SMTP_ADDR", "127.0.0.1:1"), "events", "replay", "evt_bad_"+flag[8:], flag)
		if err != nil || !strings.Contains(out, "warning (--allow-mismatch)") || !strings.Contains(out, "SMTP_ADDR: this shell") {
			t.Errorf("replay %s: exit %d; want it run, the difference said", flag, exitCode(err))
		}
	}

	// Two receivers: the refusal names the one that differs, and the one
	// the shell is like.
	w.record(t, w.shell("SMTP_ADDR", "127.0.0.1:2"))
	out, err = runIn(t, w.env, "events", "replay", "evt_done")
	if exitCode(err) != exitUsage || !strings.Contains(out, "SMTP_ADDR: this shell: "+w.env["SMTP_ADDR"]+" / receivers: 127.0.0.1:2") ||
		!strings.Contains(out, "receivers this shell is like: "+receiver) {
		t.Errorf("two receivers, one unlike the shell: exit %d; want 2, naming both", exitCode(err))
	}

	// No receiver seen for a while: warn and run, saying how the last one
	// differed.
	if _, err := w.r.Pool.Exec(context.Background(), `UPDATE receivers SET seen_at = now() - interval '10 minutes'`); err != nil {
		t.Fatal(err)
	}
	w.park(t, "bad2")
	out, err = runIn(t, w.shell("SMTP_ADDR", "127.0.0.1:3"), "events", "replay", "evt_bad2")
	if err != nil || !strings.Contains(out, "warning: no running receiver is recorded") ||
		!strings.Contains(out, "differed from this shell:\n  SMTP_ADDR: this shell: 127.0.0.1:3 / receivers: ") || w.parked(t, "bad2") {
		t.Errorf("no running receiver: exit %d; want it run with a warning", exitCode(err))
	}
}

// TestReplayWithoutReceiversWarnsOfLocalMail: with no receiver ever
// recorded, a shell without SMTP_ADDR runs, and is told where its mail goes.
func TestReplayWithoutReceiversWarnsOfLocalMail(t *testing.T) {
	w := newShellWorld(t)
	dir := t.TempDir()
	out, err := runIn(t, w.shell("SMTP_ADDR", "", "MAIL_DIR", dir, "FULFILLMENT_URL", ""), "events", "replay", "evt_none")
	if !strings.Contains(out, "warning: no running receiver is recorded") || !strings.Contains(out, "SMTP_ADDR is unset: emails are written to "+dir) ||
		!strings.Contains(out, "FULFILLMENT_URL is unset") || exitCode(err) != exitFailure || !strings.Contains(out, "evt_none: error") {
		t.Errorf("exit %d; want the warnings, then the missing event's failure (exit 1)", exitCode(err))
	}
}
