// Package pgtest gives tests their own freshly migrated database on a real
// PostgreSQL server.
//
// A package that uses it runs pgtest.Main from its TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Main uses the server named by TEST_DATABASE_URL when it is set (a
// postgres:// URL, usually of the maintenance database `postgres`, of a
// user allowed to create databases). Otherwise it starts a private server
// with pglocal for the test binary and removes it afterwards, so that
// `go test ./...` runs each package's tests against a server of its own.
//
// Each NewDB call clones a template database that holds the embedded
// migrations, which takes milliseconds instead of a migration run. The
// template is named after a hash of the migration files, so changing them
// builds a new one.
//
// With TEST_DATABASE_POOLER=transaction, Main also starts a PgBouncer in
// transaction mode (internal/pgbouncer) in front of the server, and NewDB
// and NewPool give URLs through it, in the query exec mode a receiver
// behind such a pooler runs (DATABASE_POOLER=transaction): the same tests
// then prove that nothing the code under test does needs a session.
// SessionURL gives the direct URL of the same database, for what must hold
// a session (migrations, session locks).
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pgbouncer"
	"github.com/paywebhooks/receiver/internal/pglocal"
	"github.com/paywebhooks/receiver/migrations"
)

// EnvURL names the environment variable with the URL of an existing server
// to run the tests against.
const EnvURL = "TEST_DATABASE_URL"

// EnvPooler names the environment variable that runs the tests through a
// pooler: "transaction" (PgBouncer in transaction mode) or unset.
const EnvPooler = "TEST_DATABASE_POOLER"

// bouncer is the PgBouncer of a run with EnvPooler set.
var bouncer *pgbouncer.Bouncer

// setupTimeout bounds starting the private server and preparing a database.
const setupTimeout = 2 * time.Minute

// adminURL is the URL of the maintenance database of the server in use,
// set by Main.
var adminURL string

// templateCache caches the name of the migrated template database once this
// process has made sure it exists.
var templateCache struct {
	mu   sync.Mutex
	name string
}

// Main runs the tests of a package against a PostgreSQL server and exits
// with their result; once they pass and the server is stopped, a goroutine
// still running fails them (goleak, see LeakOptions). Call it from
// TestMain. It never skips: without
// TEST_DATABASE_URL and without PostgreSQL binaries to start a server of
// its own, it prints what to install and exits 1.
func Main(m *testing.M) {
	os.Exit(checkLeaks(run(m)))
}

func run(m *testing.M) int {
	if u := os.Getenv(EnvURL); u != "" {
		adminURL = u
		return runPooled(m)
	}
	if _, err := pglocal.FindBinDir(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\npgtest: or set %s to the URL of a server to use\n", err, EnvURL)
		return 1
	}
	// A short directory: a long one makes no difference to pglocal, but
	// is harder to read in error messages.
	dir, err := os.MkdirTemp("", "pgt")
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	cluster, err := startServer(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	defer stopServer(cluster)
	adminURL = cluster.URL("postgres")
	return runPooled(m)
}

// runPooled runs the tests, through a PgBouncer of their own when EnvPooler
// asks for one.
func runPooled(m *testing.M) int {
	switch p := os.Getenv(EnvPooler); p {
	case "":
		return m.Run()
	case "transaction":
	default:
		fmt.Fprintf(os.Stderr, "pgtest: %s=%q: want transaction or nothing\n", EnvPooler, p)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	b, err := pgbouncer.Start(ctx, pgbouncer.Options{Upstream: adminURL})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %s=transaction: %v\n", EnvPooler, err)
		return 1
	}
	defer func() {
		if err := b.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}()
	bouncer = b
	fmt.Fprintf(os.Stderr, "pgtest: databases through PgBouncer in transaction mode on 127.0.0.1:%d\n", b.Port())
	return m.Run()
}

func startServer(dir string) (*pglocal.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	return pglocal.Start(ctx, pglocal.Options{Dir: dir})
}

func stopServer(c *pglocal.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
}

// AdminURL returns the URL of the maintenance database of the server in use.
func AdminURL(tb testing.TB) string {
	tb.Helper()
	if adminURL != "" {
		return adminURL
	}
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	tb.Fatalf("pgtest: no PostgreSQL server: call pgtest.Main(m) from TestMain, or set %s", EnvURL)
	return ""
}

// NewDB creates an empty, fully migrated database for this test, dropped
// when the test ends, and returns its URL: through the pooler when the
// tests run behind one (EnvPooler).
func NewDB(tb testing.TB) string {
	tb.Helper()
	admin := AdminURL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	tmpl, err := templateDB(ctx, admin)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	name := "t_" + randomHex(8)
	if err := execSQL(ctx, admin, createFromTemplate(ctx, admin, name, tmpl)); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() { dropDB(tb, admin, name) })

	if bouncer != nil {
		// As a receiver given DATABASE_POOLER=transaction opens it: with
		// the query exec mode it adds to a URL that names none.
		u, err := db.PoolerURL(bouncer.PlainURL(name))
		if err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		return u
	}
	u, err := databaseURL(admin, name)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return u
}

// SessionURL returns the URL of the database dbURL (one of NewDB's) on a
// connection that keeps session state: dbURL itself, unless the tests run
// through a pooler, whose client connections do not.
func SessionURL(tb testing.TB, dbURL string) string {
	tb.Helper()
	if bouncer == nil {
		return dbURL
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	direct, err := databaseURL(AdminURL(tb), strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return direct
}

// NewPool returns a pool on a new database made by NewDB. The pool is
// closed, and the database dropped, when the test ends. Behind a pooler
// (EnvPooler), it is opened as the receiver opens its own, with the
// database's SessionURL for what must hold a session (db.AcquireSession).
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	u := NewDB(tb)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	var pool *pgxpool.Pool
	var err error
	if bouncer != nil {
		pool, err = db.Open(ctx, u, 0, db.WithSession(SessionURL(tb, u)))
	} else {
		pool, err = pgxpool.New(ctx, u)
	}
	if err != nil {
		tb.Fatalf("pgtest: open pool: %v", err)
	}
	tb.Cleanup(pool.Close) // runs before the drop registered by NewDB
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("pgtest: ping: %v", err)
	}
	return pool
}

func dropDB(tb testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := execSQL(ctx, admin, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
		tb.Errorf("pgtest: drop database %s: %v", name, err)
	}
}

// templateDB returns the name of the migrated template database, building
// it on first use in this process.
func templateDB(ctx context.Context, admin string) (string, error) {
	templateCache.mu.Lock()
	defer templateCache.mu.Unlock()
	if templateCache.name != "" {
		return templateCache.name, nil
	}
	name, err := ensureTemplate(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("prepare template database: %w", err)
	}
	templateCache.name = name
	return name, nil
}

// ensureTemplate makes sure the template database for the current
// migrations exists, building it if needed. Other test binaries sharing the
// server may try the same at the same moment: an advisory lock lets one
// build it while the others wait and then find it ready.
//
// A template is marked ready with IS_TEMPLATE only once migrated, so one
// left half-built by a killed test run is recognised and rebuilt. It also
// refuses connections, which would make cloning it fail.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "tmpl_" + hex.EncodeToString(sum[:])[:12]

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	// Closing the session releases the advisory lock.
	defer conn.Close(context.WithoutCancel(ctx))
	lockKey := int64(binary.BigEndian.Uint64(sum[:8]))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}

	var ready bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	switch {
	case err == nil && ready:
		return name, nil
	case err == nil: // half-built
		if _, err := conn.Exec(ctx, "DROP DATABASE "+ident(name)+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("drop half-built %s: %w", name, err)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return "", err
	}
	return name, buildTemplate(ctx, conn, admin, name)
}

// buildTemplate creates database name, migrates it and marks it a template.
func buildTemplate(ctx context.Context, conn *pgx.Conn, admin, name string) error {
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	u, err := databaseURL(admin, name)
	if err != nil {
		return err
	}
	if err := db.Migrate(u); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("mark %s a template: %w", name, err)
	}
	return nil
}

// migrationsHash hashes the names and contents of the embedded migrations.
func migrationsHash() ([sha256.Size]byte, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	var sum [sha256.Size]byte
	if err != nil {
		return sum, fmt.Errorf("hash migrations: %w", err)
	}
	h.Sum(sum[:0])
	return sum, nil
}

// databaseURL returns admin with its database replaced by name.
func databaseURL(admin, name string) (string, error) {
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s must be a postgres:// URL", EnvURL)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// execSQL runs one statement on a connection of its own.
func execSQL(ctx context.Context, dbURL, sql string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
