// Package db opens the PostgreSQL pool and applies the embedded migrations.
//
// It is the one place that knows how the receiver talks to PostgreSQL as a
// whole; the SQL of each domain lives in that domain's package.
package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/migrations"
)

// Open connects a pool to databaseURL and checks that the server answers.
// The pool's statements are traced (see Tracer) whenever they run inside a
// recording span, which happens only while tracing is on.
//
// The pool follows a fail-over by itself: a connection the server closes
// (a crash, an immediate or fast shutdown, a lost network) is dropped, a
// connection idle for more than a second is pinged before it is handed out,
// and new connections go wherever databaseURL leads (with several hosts
// and target_session_attrs=read-write, to the one that is a primary). A
// connection on which the server answers that it is read-only (a standby
// reached through a name or address that used to be the primary's) is
// closed rather than kept. No query is cancelled by the server at pgx's
// request: a context that ends closes the connection (pgx's default), so a
// commit waiting for a synchronous standby is never turned into a local
// success; one the server cancels for another reason is logged (watchConn).
func Open(ctx context.Context, databaseURL string, maxConns int32, opts ...Option) (*pgxpool.Pool, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.Tracer = Tracer()
	watchConn(cfg.ConnConfig, o.log)
	var session *pgx.ConnConfig
	if o.sessionURL != "" {
		if session, err = pgx.ParseConfig(o.sessionURL); err != nil {
			return nil, fmt.Errorf("parse DATABASE_SESSION_URL: %w", err)
		}
		watchConn(session, o.log)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if session != nil {
		sessions.Store(pool, session)
	}
	return pool, nil
}

// Option changes what Open builds.
type Option func(*options)

type options struct {
	sessionURL string
	log        *slog.Logger
}

// WithSession gives the pool a session URL (DATABASE_SESSION_URL): a direct
// connection, or one through a session-mode pooler, where AcquireSession
// opens the connections that must keep session state. Without it, those
// are the pool's own.
func WithSession(sessionURL string) Option { return func(o *options) { o.sessionURL = sessionURL } }

// WithLogger is where the pool's connections report what the server warns
// of (nil: slog.Default()).
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// sessions holds the session configuration of the pools Open gave one.
var sessions sync.Map // *pgxpool.Pool → *pgx.ConnConfig

// Session is a connection on which session state (a session-level
// advisory lock, SET) lasts until it is given back.
type Session struct {
	conn   *pgx.Conn
	pooled *pgxpool.Conn // nil: a connection of its own
}

// AcquireSession returns a session beside pool: a connection of its own to
// the pool's session URL when the pool has one (WithSession), which is how
// a job that must hold a session works behind a transaction-mode pooler;
// otherwise one of the pool's own connections, which reach PostgreSQL
// directly.
func AcquireSession(ctx context.Context, pool *pgxpool.Pool) (*Session, error) {
	if s, ok := sessions.Load(pool); ok {
		conn, err := pgx.ConnectConfig(ctx, s.(*pgx.ConnConfig).Copy())
		if err != nil {
			return nil, err
		}
		return &Session{conn: conn}, nil
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &Session{conn: c.Conn(), pooled: c}, nil
}

// Conn is the session's connection.
func (s *Session) Conn() *pgx.Conn { return s.conn }

// Release gives back a session whose state was undone (the lock released):
// a pool's connection goes back to the pool, one of its own is closed.
func (s *Session) Release() {
	if s.pooled != nil {
		s.pooled.Release()
		return
	}
	closeConn(s.conn)
}

// Close ends the session, and whatever state it still holds with it: the
// connection is closed, a pool's included (the pool opens another).
func (s *Session) Close() {
	closeConn(s.conn)
	if s.pooled != nil {
		s.pooled.Release()
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// watchConn makes connections of cfg close themselves when the server says
// it is read-only (SQLSTATE 25006: a standby), on top of pgconn's own
// closing on FATAL errors, and log a commit whose wait for a synchronous
// standby was cancelled.
func watchConn(cfg *pgx.ConnConfig, log *slog.Logger) {
	onErr := cfg.OnPgError
	cfg.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if e.Code == pgerrcode.ReadOnlySQLTransaction {
			return false // close it: the next connection finds the primary
		}
		return onErr == nil || onErr(c, e)
	}
	onNotice := cfg.OnNotice
	cfg.OnNotice = func(c *pgconn.PgConn, n *pgconn.Notice) {
		if syncRepCancelled(n) {
			l := log
			if l == nil {
				l = slog.Default()
			}
			// PostgreSQL answers such a commit as a success: the
			// receiver cannot tell its caller otherwise (pgx itself
			// never asks for a cancel), but an operator must know
			// that a fail-over now could lose it.
			l.Error("a commit's wait for the synchronous standby was cancelled on the server: the transaction "+
				"is committed on the primary but may be missing on the standby; after a fail-over, reconcile "+
				"(server reconcile … --since) the minutes around it", "server_pid", c.PID(), "message", n.Message)
		}
		if onNotice != nil {
			onNotice(c, n)
		}
	}
}

// syncRepCancelled reports whether n is PostgreSQL's warning that a commit
// stopped waiting for its synchronous standby ("canceling wait for
// synchronous replication…", detail "The transaction has already committed
// locally…"), which has no SQLSTATE of its own: its message and detail are
// matched in English, the lc_messages of most servers.
func syncRepCancelled(n *pgconn.Notice) bool {
	return n.SeverityUnlocalized == "WARNING" && n.Code == pgerrcode.Warning &&
		(strings.Contains(n.Message, "synchronous replication") || strings.Contains(n.Detail, "committed locally"))
}

// newMigrate builds a golang-migrate instance over the embedded files. The
// pgx/v5 driver takes golang-migrate's advisory lock, so replicas that start
// at once migrate one after the other.
func newMigrate(databaseURL string) (*migrate.Migrate, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, migrateURL(databaseURL))
	if err != nil {
		return nil, fmt.Errorf("open migrations: %w", err)
	}
	return m, nil
}

// migrateURL turns a postgres:// URL into the pgx5:// scheme the driver
// registers under.
func migrateURL(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil || u.Scheme == "" {
		return databaseURL
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		u.Scheme = "pgx5"
	}
	return u.String()
}

func closeMigrate(m *migrate.Migrate, err error) error {
	srcErr, dbErr := m.Close()
	return errors.Join(err, srcErr, dbErr)
}

// Migrate applies every pending up migration. No change is not an error.
func Migrate(databaseURL string) (err error) {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return err
	}
	defer func() { err = closeMigrate(m, err) }()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// MigrateDown rolls back n migrations.
func MigrateDown(databaseURL string, n int) (err error) {
	if n <= 0 {
		return fmt.Errorf("migrate down: N must be a positive number of steps, got %d", n)
	}
	m, err := newMigrate(databaseURL)
	if err != nil {
		return err
	}
	defer func() { err = closeMigrate(m, err) }()
	if err := m.Steps(-n); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down %d: %w", n, err)
	}
	return nil
}

// Version reports the schema version and whether a failed migration left it dirty.
func Version(databaseURL string) (version uint, dirty bool, err error) {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return 0, false, err
	}
	defer func() { err = closeMigrate(m, err) }()
	version, dirty, err = m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	return version, dirty, err
}

// LatestVersion is the highest migration version embedded in the binary.
func LatestVersion() (uint, error) {
	vs, err := Versions()
	if err != nil || len(vs) == 0 {
		return 0, err
	}
	return vs[len(vs)-1], nil
}

// Versions are the migration versions embedded in the binary, ascending.
// Numbers may skip (each branch of work takes its own), so that migrating
// down N steps from the latest reaches Versions()[len-1-N], not latest-N.
func Versions() ([]uint, error) {
	entries, err := migrations.FS.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []uint
	for _, e := range entries {
		var v uint
		name := e.Name()
		if !strings.HasSuffix(name, ".up.sql") {
			continue
		}
		if _, err := fmt.Sscanf(name, "%d_", &v); err == nil {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Readiness is what Ready found.
type Readiness struct {
	Version  uint // the schema version in the database
	Want     uint // the latest version this binary embeds
	Dirty    bool // a migration failed half-way
	ReadOnly bool // the server is a standby (in recovery): it cannot take a write
}

// Current reports whether the schema is the one this binary embeds.
func (r Readiness) Current() bool { return !r.Dirty && r.Version == r.Want }

// Ready reads the schema version through pool (one short query): the
// database answers, and its schema is current or not, and the server is a
// primary or not. An error means the database did not answer.
func Ready(ctx context.Context, pool *pgxpool.Pool) (Readiness, error) {
	want, err := LatestVersion()
	if err != nil {
		return Readiness{}, fmt.Errorf("read embedded migrations: %w", err)
	}
	r := Readiness{Want: want}
	var version int64
	if err := pool.QueryRow(ctx, `SELECT version, dirty, pg_is_in_recovery() FROM schema_migrations LIMIT 1`).
		Scan(&version, &r.Dirty, &r.ReadOnly); err != nil {
		return Readiness{}, fmt.Errorf("read schema version: %w", err)
	}
	r.Version = uint(version)
	return r, nil
}
