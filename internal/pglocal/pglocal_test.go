package pglocal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestFindBinDirMissingNamesPackage(t *testing.T) {
	t.Setenv("PATH", "")
	setSearchDirs(t, t.TempDir())

	_, err := FindBinDir()
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("FindBinDir() error = %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{"apt-get install postgresql", "brew install postgresql"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestFindBinDirPrefersHighestVersion(t *testing.T) {
	t.Setenv("PATH", "")
	root := t.TempDir()
	for _, v := range []string{"9.6", "16", "15"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	setSearchDirs(t, filepath.Join(root, "*", "bin"))

	got, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "16", "bin"); got != want {
		t.Errorf("FindBinDir() = %s, want %s", got, want)
	}
}

func setSearchDirs(t *testing.T, dirs ...string) {
	old := searchDirs
	searchDirs = dirs
	t.Cleanup(func() { searchDirs = old })
}

func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startCluster(t)
	if c.Port() == 0 || c.Dir() == "" {
		t.Fatalf("Port() = %d, Dir() = %q", c.Port(), c.Dir())
	}

	for range 2 { // the second call finds it exists
		if err := c.CreateDatabase(ctx, "app"); err != nil {
			t.Fatalf("CreateDatabase: %v", err)
		}
	}
	mustExec(t, c.URL("app"), "CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)")

	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := ping(ctx, c.URL("postgres")); err == nil {
		t.Fatal("server still accepts connections after Stop")
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}

	port := c.Port()
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if c.Port() != port {
		t.Errorf("port after Restart = %d, want %d", c.Port(), port)
	}
	if n := queryInt(t, c.URL("app"), "SELECT n FROM kept"); n != 42 {
		t.Errorf("row after restart = %d, want 42", n)
	}

	// Restart of a running server stops it first.
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart while running: %v", err)
	}
	if n := queryInt(t, c.URL("app"), "SELECT n FROM kept"); n != 42 {
		t.Errorf("row after second restart = %d, want 42", n)
	}
}

// TestStartAfterKill starts a new cluster on the data directory of a killed
// one, whose postmaster.pid names a live process that is not postgres: a PID
// reused since, as happens in containers.
func TestStartAfterKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := startCluster(t)
	c.Kill()

	pidFile := filepath.Join(c.Dir(), "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("killed server left no postmaster.pid: %v", err)
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	reused := strconv.Itoa(os.Getppid()) + "\n" + rest
	if err := os.WriteFile(pidFile, []byte(reused), 0o600); err != nil {
		t.Fatal(err)
	}

	again, err := Start(ctx, Options{Dir: c.Dir(), Port: c.Port()})
	if err != nil {
		t.Fatalf("Start after Kill: %v", err)
	}
	t.Cleanup(func() { _ = again.Stop(context.Background()) })
	if n := queryInt(t, again.URL("postgres"), "SELECT 1"); n != 1 {
		t.Errorf("SELECT 1 = %d", n)
	}
}

func startCluster(t *testing.T) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: t.TempDir(), Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c
}

func mustExec(t *testing.T, url, sql string) {
	t.Helper()
	conn := connect(t, url)
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInt(t *testing.T, url, sql string) int {
	t.Helper()
	var n int
	if err := connect(t, url).QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// testLog sends the server log to the test log, shown on failure or -v.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
