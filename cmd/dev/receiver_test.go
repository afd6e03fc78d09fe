package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// TestReceiverSetUp runs dev -receiver as make run does, with a command
// that checks what the receiver would get (TestHelperReceiver): the console
// on 127.0.0.1:8081 with the token kept in the secrets file, and a
// fulfillment API that answers the receiver's client and records the call.
// dev prints the console's URL and token, the fulfillment API, the routes,
// the event types to enable at each provider and the Stripe CLI recipe; a
// second run keeps the token.
func TestReceiverSetUp(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	secrets, calls := filepath.Join(dir, "dev-secrets.env"), filepath.Join(dir, "fulfillment.log")
	t.Setenv(helperEnv, "receiver")
	t.Setenv("DEV_TEST_SECRETS", secrets)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	noEnv := func(string) (string, bool) { return "", false }
	devRun := func() string {
		t.Helper()
		var stdout, stderr syncBuffer // the fulfillment API prints to stderr while the command writes
		args := []string{"-temp", "-receiver", "-secrets-file", secrets, "-fulfillment-log", calls, "--",
			os.Args[0], "-test.run=^TestHelperReceiver$"}
		if err := run(ctx, args, noEnv, &stdout, &stderr); err != nil {
			t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
		}
		if !strings.Contains(stdout.String(), "helper: ok") {
			t.Fatalf("the command did not report success:\n%s\n%s", &stdout, &stderr)
		}
		return stderr.String()
	}
	printed := devRun()
	kept, err := readEnvFile(secrets)
	if err != nil {
		t.Fatal(err)
	}
	token := kept["ADMIN_TOKEN"]
	if len(token) < 32 {
		t.Fatalf("ADMIN_TOKEN kept %q, want a long random token", token)
	}
	for _, want := range []string{
		"Console: http://127.0.0.1:8081/ (sign in with " + token,
		"Fulfillment API: FULFILLMENT_URL=http://127.0.0.1:",
		"fulfillment API: 201 order 42 (stripe cs_test_42, 2500 eur), Idempotency-Key dev-test-key, signature verified",
		"Webhook routes: http://localhost:8080/webhooks/stripe",
		providers.Enable(),
		"stripe listen --forward-to localhost:8080/webhooks/stripe",
		"STRIPE_WEBHOOK_SECRET=$(stripe listen --print-secret) make run",
		`eval "$(bin/dev env)"`,
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("dev did not print %q:\n%s", want, printed)
		}
	}
	if got := readCalls(t, calls); len(got) != 1 || got[0].Status != 201 || got[0].IdempotencyKey != "dev-test-key" {
		t.Errorf("calls recorded: %+v", got)
	}

	if again := devRun(); !strings.Contains(again, "sign in with "+token) {
		t.Errorf("the second run has another token:\n%s", again)
	}
}

// TestHelperReceiver is the command TestReceiverSetUp has dev run.
func TestHelperReceiver(t *testing.T) {
	if os.Getenv(helperEnv) != "receiver" {
		t.Skip("run by TestReceiverSetUp")
	}
	kept, err := readEnvFile(os.Getenv("DEV_TEST_SECRETS"))
	if err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("ADMIN_ADDR"); got != "127.0.0.1:8081" {
		t.Errorf("ADMIN_ADDR = %q, want the loopback console", got)
	}
	if got := os.Getenv("ADMIN_TOKEN"); got == "" || got != kept["ADMIN_TOKEN"] {
		t.Errorf("ADMIN_TOKEN = %q, want the one kept: %q", got, kept["ADMIN_TOKEN"])
	}
	if got := os.Getenv("STRIPE_WEBHOOK_SECRET"); !strings.HasPrefix(got, "whsec_dev_") || got != kept["STRIPE_WEBHOOK_SECRET"] {
		t.Errorf("STRIPE_WEBHOOK_SECRET = %q, want the development one kept", got)
	}
	if got := os.Getenv(config.DevEnv); got != "1" {
		t.Errorf("%s = %q", config.DevEnv, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key, err := standardwebhooks.ParseSecret(os.Getenv("FULFILLMENT_SECRET"))
	if err != nil || os.Getenv("FULFILLMENT_SECRET") != kept["FULFILLMENT_SECRET"] {
		t.Fatalf("FULFILLMENT_SECRET = %q (%v), want the one kept", os.Getenv("FULFILLMENT_SECRET"), err)
	}
	order := fulfillment.Request{OrderID: 42, Source: "stripe", ExternalID: "cs_test_42", AmountCents: 2500, Currency: "eur"}
	client := fulfillment.New(os.Getenv("FULFILLMENT_URL"))
	client.Key = key // as the receiver signs with FULFILLMENT_SECRET
	if err := client.Fulfill(ctx, "dev-test-key", order); err != nil {
		t.Errorf("the fulfillment API at FULFILLMENT_URL=%q: %v", os.Getenv("FULFILLMENT_URL"), err)
	}
	if !t.Failed() {
		fmt.Println("helper: ok")
	}
}

// TestEnvAndAttach: while one dev runs a server in a data directory (make
// run), `dev env` prints the exports of its DATABASE_URL, password
// included, and of the development secrets, and another dev runs its
// command against that server and leaves it running
// (TestHelperAttach). Once the first dev has stopped, `dev env` says
// nothing runs.
func TestEnvAndAttach(t *testing.T) {
	skipShort(t)
	// Not t.TempDir: as root, the server runs as postgres, which must
	// reach the directory (see pglocal.Options.Dir).
	dir, err := os.MkdirTemp("", "pgenv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir); os.Remove(dir + ".log") })
	secrets := filepath.Join(t.TempDir(), "dev-secrets.env")
	if err := writeEnvFile(secrets, map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_dev_it's_0123456789abcdef0123456789abcdef", "ADMIN_TOKEN": "tok"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(helperEnv, "attach")
	t.Setenv("DEV_TEST_DIR", dir)
	t.Setenv("DEV_TEST_SECRETS", secrets)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	err = run(ctx, []string{"-dir", dir, "--", os.Args[0], "-test.run=^TestHelperAttach$", "-test.v"}, noEnv, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), "helper: ok") {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}

	var out, errOut bytes.Buffer
	err = run(ctx, []string{"env", "-dir", dir}, noEnv, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "no development PostgreSQL is running in "+dir) || out.Len() != 0 {
		t.Errorf("dev env with nothing running: %v, printed %q", err, out.String())
	}
}

// TestHelperAttach is the command TestEnvAndAttach has dev run.
func TestHelperAttach(t *testing.T) {
	if os.Getenv(helperEnv) != "attach" {
		t.Skip("run by TestEnvAndAttach")
	}
	dir, secrets := os.Getenv("DEV_TEST_DIR"), os.Getenv("DEV_TEST_SECRETS")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	noEnv := func(string) (string, bool) { return "", false }

	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"env", "-dir", dir, "-secrets-file", secrets}, noEnv, &out, &errOut); err != nil {
		t.Fatalf("dev env: %v\n%s", err, &errOut)
	}
	// What `eval "$(bin/dev env)"` does, by a shell.
	var sh bytes.Buffer
	cmd := exec.Command("sh", "-c", `eval "$(cat)"; printf '%s\n%s\n%s\n' "$DATABASE_URL" "$STRIPE_WEBHOOK_SECRET" "$ADMIN_TOKEN"`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(out.Bytes()), &sh, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSpace(sh.String()), "\n")
	if len(got) != 3 || got[0] != os.Getenv("DATABASE_URL") || got[1] != "whsec_dev_it's_0123456789abcdef0123456789abcdef" || got[2] != "tok" {
		t.Fatalf("dev env printed\n%s\nwhich a shell reads as %q; want DATABASE_URL %q and the kept secrets", &out, got, os.Getenv("DATABASE_URL"))
	}
	ping := func(what string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, got[0])
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		conn.Close(ctx)
	}
	ping("DATABASE_URL of dev env")

	out.Reset()
	errOut.Reset()
	if err := run(ctx, []string{"-dir", dir, "--", "sh", "-c", `test "$DATABASE_URL" = "$0"`, got[0]}, noEnv, &out, &errOut); err != nil {
		t.Fatalf("a second dev in the same directory: %v\n%s", err, &errOut)
	}
	if !strings.Contains(errOut.String(), "already running") {
		t.Errorf("the second dev did not say it used the running server:\n%s", &errOut)
	}
	ping("after the second dev exited")
	fmt.Println("helper: ok")
}

// TestEmptySecretRefused: a secret dev would fill in that is set but empty
// (STRIPE_WEBHOOK_SECRET=$(stripe listen --print-secret) with a CLI that is
// not logged in) stops dev before it starts anything, saying so, naming
// `stripe login` and how to use the development value instead; unset, or
// where dev fills in nothing, it is no reason to stop.
func TestEmptySecretRefused(t *testing.T) {
	env := func(vars ...string) func(string) (string, bool) {
		return func(key string) (string, bool) {
			for i := 0; i < len(vars); i += 2 {
				if vars[i] == key {
					return vars[i+1], true
				}
			}
			return "", false
		}
	}
	for _, c := range []struct {
		args []string
		env  func(string) (string, bool)
		want []string
	}{
		{[]string{"-temp", "-receiver", "--", "true"}, env("STRIPE_WEBHOOK_SECRET", ""), []string{
			"STRIPE_WEBHOOK_SECRET is set but empty: not starting",
			"STRIPE_WEBHOOK_SECRET=$(stripe listen --print-secret) make run, that command printed nothing",
			"`stripe login`", "leave it unset: env -u STRIPE_WEBHOOK_SECRET make run"}},
		{[]string{"-temp", "-dev-secrets", "--", "true"}, env("STRIPE_WEBHOOK_SECRET", " ", "PADDLE_WEBHOOK_SECRET", ""), []string{
			"STRIPE_WEBHOOK_SECRET, PADDLE_WEBHOOK_SECRET are set but empty", "env -u STRIPE_WEBHOOK_SECRET -u PADDLE_WEBHOOK_SECRET make run"}},
		{[]string{"-temp", "-receiver", "--", "true"}, env("ADMIN_TOKEN", ""), []string{"ADMIN_TOKEN is set but empty"}},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), c.args, c.env, &stdout, &stderr)
		if err == nil {
			t.Fatalf("dev %q ran", c.args)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("dev %q: %v\nwant %q in it", c.args, err, w)
			}
		}
		if stderr.Len() != 0 || stdout.Len() != 0 {
			t.Errorf("dev %q started something: %s%s", c.args, &stdout, &stderr)
		}
	}
	for _, c := range []struct {
		cfg options
		env func(string) (string, bool)
	}{
		{options{devSecrets: true}, env("STRIPE_WEBHOOK_SECRET", "whsec_set")}, // set
		{options{devSecrets: true}, env()},                                     // unset: the development one
		{options{}, env("STRIPE_WEBHOOK_SECRET", "")},                          // not dev's to fill: the receiver says no route
	} {
		if err := refuseEmpty(c.cfg, c.env); err != nil {
			t.Errorf("refuseEmpty(%+v): %v", c.cfg, err)
		}
	}
}

// TestEnvExportsTheReceiversSecrets: while make run's receiver runs with a
// secret of the developer's (STRIPE_WEBHOOK_SECRET from the Stripe CLI),
// `dev env` exports that one, not the development one, and says so; the
// other variables stay the development ones (TestHelperReceiverEnv). Once
// dev has stopped, its record is gone.
func TestEnvExportsTheReceiversSecrets(t *testing.T) {
	skipShort(t)
	dir, err := os.MkdirTemp("", "pgenv") // not t.TempDir: see TestEnvAndAttach
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir); os.Remove(dir + ".log") })
	tmp := t.TempDir()
	secrets := filepath.Join(tmp, "dev-secrets.env")
	const cli = "whsec_fromTheStripeCLI0123456789abcdef0123456789abcdef"
	t.Setenv("STRIPE_WEBHOOK_SECRET", cli) // what the receiver gets
	t.Setenv(helperEnv, "receiver-env")
	t.Setenv("DEV_TEST_DIR", dir)
	t.Setenv("DEV_TEST_SECRETS", secrets)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lookup := func(key string) (string, bool) { // what dev sees
		if key == "STRIPE_WEBHOOK_SECRET" {
			return cli, true
		}
		return "", false
	}
	var stdout, stderr syncBuffer
	args := []string{"-dir", dir, "-receiver", "-secrets-file", secrets, "-fulfillment-log", filepath.Join(tmp, "calls.log"), "--",
		os.Args[0], "-test.run=^TestHelperReceiverEnv$", "-test.v"}
	if err := run(ctx, args, lookup, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "helper: ok") {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	if _, err := os.Stat(receiverFile(secrets)); !os.IsNotExist(err) {
		t.Errorf("the receiver's record outlived dev: %v", err)
	}
}

// TestHelperReceiverEnv is the command TestEnvExportsTheReceiversSecrets
// has dev run.
func TestHelperReceiverEnv(t *testing.T) {
	if os.Getenv(helperEnv) != "receiver-env" {
		t.Skip("run by TestEnvExportsTheReceiversSecrets")
	}
	dir, secrets := os.Getenv("DEV_TEST_DIR"), os.Getenv("DEV_TEST_SECRETS")
	noEnv := func(string) (string, bool) { return "", false }
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"env", "-dir", dir, "-secrets-file", secrets}, noEnv, &out, &errOut); err != nil {
		t.Fatalf("dev env: %v\n%s", err, &errOut)
	}
	var sh bytes.Buffer
	cmd := exec.Command("sh", "-c", `eval "$(cat)"; printf '%s\n%s\n%s\n%s\n' "$STRIPE_WEBHOOK_SECRET" "$PADDLE_WEBHOOK_SECRET" "$ADMIN_TOKEN" "$FULFILLMENT_URL"`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // nothing but what dev env exports
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(out.Bytes()), &sh, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sh: %v", err)
	}
	kept, err := readEnvFile(secrets)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(sh.String()), "\n")
	want := []string{os.Getenv("STRIPE_WEBHOOK_SECRET"), kept["PADDLE_WEBHOOK_SECRET"], os.Getenv("ADMIN_TOKEN"), os.Getenv("FULFILLMENT_URL")}
	if !slices.Equal(got, want) || !strings.HasPrefix(want[1], "pdl_") || want[2] != kept["ADMIN_TOKEN"] ||
		!strings.HasPrefix(want[3], "http://127.0.0.1:") {
		t.Errorf("dev env printed\n%s\nwhich a shell reads as %q; want the receiver's %q", &out, got, want)
	}
	if !strings.Contains(errOut.String(), "STRIPE_WEBHOOK_SECRET as make run's receiver runs with it") {
		t.Errorf("dev env did not say whose STRIPE_WEBHOOK_SECRET it exports: %q", errOut.String())
	}
	if fi, err := os.Stat(receiverFile(secrets)); err != nil {
		t.Errorf("the receiver's record: %v", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("the receiver's record has mode %v, want 0600", fi.Mode().Perm())
	}
	fmt.Println("helper: ok")
}
