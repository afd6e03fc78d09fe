package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/config"
)

// helperEnv makes the test binary, run as dev's COMMAND, act as
// TestHelperCommand instead of running the tests.
const helperEnv = "DEV_TEST_HELPER"

// TestRunTemp runs dev -temp with a command that checks what it was given:
// DATABASE_URL and TEST_DATABASE_URL carry the cluster's password and
// connect, the same URL without the password is refused, and the
// development marker is set. dev prints the URL it set, password included.
func TestRunTemp(t *testing.T) {
	skipShort(t)
	t.Setenv(helperEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	err := run(ctx, []string{"-temp", "--", os.Args[0], "-test.run=^TestHelperCommand$"}, noEnv, &stdout, &stderr)
	if err != nil {
		t.Fatalf("dev: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "helper: ok") {
		t.Errorf("the command did not report success:\n%s\n%s", &stdout, &stderr)
	}
	var printed string
	for line := range strings.Lines(stderr.String()) {
		if v, ok := strings.CutPrefix(line, "DATABASE_URL="); ok {
			printed = strings.TrimSpace(v)
		}
	}
	u, err := url.Parse(printed)
	if err != nil || u.User == nil {
		t.Fatalf("printed DATABASE_URL %q: %v", printed, err)
	}
	if _, ok := u.User.Password(); !ok {
		t.Errorf("printed DATABASE_URL %q has no password", printed)
	}
}

// skipShort skips a test that starts PostgreSQL servers of its own under
// -short (make check): make test runs it.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts PostgreSQL servers of its own: make test runs it")
	}
}

// TestHelperCommand is the command TestRunTemp has dev run.
func TestHelperCommand(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestRunTemp")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := os.Getenv(config.DevEnv); got != "1" {
		t.Errorf("%s = %q, want 1", config.DevEnv, got)
	}
	for _, key := range []string{"DATABASE_URL", "TEST_DATABASE_URL"} {
		raw := os.Getenv(key)
		conn, err := pgx.Connect(ctx, raw)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		conn.Close(ctx)

		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(u.User.Username())
		if conn, err := pgx.Connect(ctx, u.String()); err == nil {
			conn.Close(ctx)
			t.Errorf("%s without its password connects", key)
		}
	}
	if !t.Failed() {
		fmt.Println("helper: ok")
	}
}

func TestDefaultDir(t *testing.T) {
	if dir, err := defaultDir(false); err != nil || dir != filepath.Join("var", "pgdata") {
		t.Errorf("defaultDir(false) = %q, %v; want var/pgdata", dir, err)
	}
	dir, err := defaultDir(true)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(dir) || !strings.HasPrefix(filepath.Base(dir), "paywebhooks-dev-") {
		t.Errorf("defaultDir(true) = %q, want an absolute paywebhooks-dev-<hash>", dir)
	}
	if again, _ := defaultDir(true); again != dir {
		t.Errorf("defaultDir(true) = %q, then %q: not stable", dir, again)
	}
}

// TestUsageErrors: a command line dev does not understand is a usageError
// (exit status 2), before anything is started.
func TestUsageErrors(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"-frobnicate", "--", "true"}, {"-temp"}, {"-fulfillment-status", "42", "--", "true"}, {"env", "extra"}, {"env", "-frobnicate"}} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, noEnv, &stdout, &stderr)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(stderr.String(), "usage: dev") {
			t.Errorf("dev %q: %v (%T), stderr %q; want a usage error and the usage", args, err, err, stderr.String())
		}
	}
}
