package pglocal

import (
	"context"
	"errors"
	"net/url"
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
	if again.URL("postgres") != c.URL("postgres") {
		t.Errorf("URL after a new Start = %s, want the first one's, %s", again.URL("postgres"), c.URL("postgres"))
	}
}

// TestPasswordRequired: the superuser signs in with the cluster's password
// only; without it, or with another, the server refuses. The password is
// kept in the data directory, readable by its owner only.
func TestPasswordRequired(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	u, err := url.Parse(c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	pass, ok := u.User.Password()
	if !ok || len(pass) < 20 {
		t.Fatalf("URL %s carries no password, or a short one", c.URL("postgres"))
	}
	for name, user := range map[string]*url.Userinfo{
		"NoPassword":    url.User("postgres"),
		"WrongPassword": url.UserPassword("postgres", pass+"x"),
		"OtherUser":     url.UserPassword("someone", pass),
	} {
		u := *u
		u.User = user
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgx.Connect(ctx, u.String())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			t.Errorf("%s: connected as %s", name, user)
		}
	}

	fi, err := os.Stat(filepath.Join(c.Dir(), PasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", PasswordFile, fi.Mode().Perm())
	}
	if fi, err := os.Stat(c.Dir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory: mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}

// TestParentsUntouched: a data directory whose parent is private (as
// testing's TempDir is) is used as it is when the server runs as the
// current user, and refused with an explanation when it runs as postgres
// (we are root); either way the parent keeps its permissions.
func TestParentsUntouched(t *testing.T) {
	t.Parallel()
	parent := tempDir(t)
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: filepath.Join(parent, "pg"), Log: testLog{t}})
	if err == nil {
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	switch root := os.Geteuid() == 0; {
	case root && err == nil:
		t.Errorf("as root, Start succeeded in a directory the postgres user cannot reach")
	case root && !strings.Contains(err.Error(), "cannot reach the data directory"):
		t.Errorf("as root, Start's error does not explain: %v", err)
	case !root && err != nil:
		t.Errorf("Start: %v", err)
	}
	if fi, err := os.Stat(parent); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("parent directory: mode %v (%v), want it left 0700", fi.Mode().Perm(), err)
	}
}

// TestClusterWithoutPassword: a data directory made by an earlier pglocal,
// whose server trusted every local connection, is refused rather than
// started as it was.
func TestClusterWithoutPassword(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte("15\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Dir: dir})
	if !errors.Is(err, ErrNoPassword) || !strings.Contains(err.Error(), "remove the directory") {
		t.Fatalf("Start = %v, want ErrNoPassword and what to do", err)
	}
}

func startCluster(t *testing.T) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: tempDir(t), Log: testLog{t}})
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

// tempDir returns a new directory under os.TempDir(), removed when the test
// ends. Not testing's TempDir: its parent is private, and as root the
// server (run as postgres) could not reach it.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pglocal-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
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
