// Package db opens the PostgreSQL pool and applies the embedded migrations.
//
// It is the one place that knows how the receiver talks to PostgreSQL as a
// whole; the SQL of each domain lives in that domain's package.
package db

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/migrations"
)

// Open connects a pool to databaseURL and checks that the server answers.
// The pool's statements are traced (see Tracer) whenever they run inside a
// recording span, which happens only while tracing is on.
func Open(ctx context.Context, databaseURL string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.Tracer = Tracer()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
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
	entries, err := migrations.FS.ReadDir(".")
	if err != nil {
		return 0, err
	}
	var latest uint
	for _, e := range entries {
		var v uint
		name := e.Name()
		if !strings.HasSuffix(name, ".up.sql") {
			continue
		}
		if _, err := fmt.Sscanf(name, "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}

// Readiness is what Ready found.
type Readiness struct {
	Version uint // the schema version in the database
	Want    uint // the latest version this binary embeds
	Dirty   bool // a migration failed half-way
}

// Current reports whether the schema is the one this binary embeds.
func (r Readiness) Current() bool { return !r.Dirty && r.Version == r.Want }

// Ready reads the schema version through pool (one short query): the
// database answers, and its schema is current or not. An error means the
// database did not answer.
func Ready(ctx context.Context, pool *pgxpool.Pool) (Readiness, error) {
	want, err := LatestVersion()
	if err != nil {
		return Readiness{}, fmt.Errorf("read embedded migrations: %w", err)
	}
	r := Readiness{Want: want}
	var version int64
	if err := pool.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&version, &r.Dirty); err != nil {
		return Readiness{}, fmt.Errorf("read schema version: %w", err)
	}
	r.Version = uint(version)
	return r, nil
}
