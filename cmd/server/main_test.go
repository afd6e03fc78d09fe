package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func getenv(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestConfigErrorsStopStartUp: a bad configuration stops the process at
// once with an error naming every variable at fault.
func TestConfigErrorsStopStartUp(t *testing.T) {
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := run(ctx, nil, getenv(map[string]string{"LEASE_DURATION": "forever", "STRIPE_WEBHOOK_SECRET": "oops"}), &out, &errOut)
	if err == nil {
		t.Fatal("started with a bad configuration")
	}
	for _, want := range []string{"DATABASE_URL is required", "LEASE_DURATION", "STRIPE_WEBHOOK_SECRET"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if exitCode(err) != 1 {
		t.Errorf("exit code %d, want 1", exitCode(err))
	}
}

func TestMigrateCommand(t *testing.T) {
	env := getenv(map[string]string{"DATABASE_URL": pgtest.NewDB(t)})
	cmd := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, env, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	latest, err := db.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	v := func(n uint) string { return fmt.Sprintf("schema version %d", n) }
	// The versions need not follow each other (a number can be taken by a
	// branch not merged yet): down N undoes N migrations.
	var versions []uint
	files, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		var n uint
		if _, err := fmt.Sscanf(f, "%d_", &n); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		versions = append(versions, n)
	}
	slices.Sort(versions)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "version"}, fmt.Sprintf("schema version %d (latest %d)", latest, latest)},
		{[]string{"migrate", "down", fmt.Sprint(len(versions))}, "schema version 0"},
		{[]string{"migrate", "up"}, v(latest)},
		{[]string{"migrate", "down", "1"}, v(versions[len(versions)-2])},
		{[]string{"migrate", "up"}, v(latest)},
	}
	for _, s := range steps {
		out, err := cmd(s.args...)
		if err != nil || !strings.Contains(out, s.want) {
			t.Fatalf("server %s: %q, %v; want %q", strings.Join(s.args, " "), out, err, s.want)
		}
	}
	out, err := cmd("migrate", "version", "--json")
	var mv struct {
		Version, Latest uint
		Dirty           bool
	}
	if err != nil || json.Unmarshal([]byte(out), &mv) != nil || mv.Version != latest || mv.Latest != latest || mv.Dirty {
		t.Fatalf("migrate version --json: %v, %q", err, out)
	}
	for _, bad := range [][]string{{"migrate"}, {"migrate", "down"}, {"migrate", "down", "x"}, {"migrate", "sideways"}, {"frobnicate"}} {
		if _, err := cmd(bad...); err == nil || exitCode(err) != 2 {
			t.Errorf("server %s: %v, want a usage error", strings.Join(bad, " "), err)
		}
	}
}
