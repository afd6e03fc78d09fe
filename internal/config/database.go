package config

import (
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/db"
)

// loadDatabase reads DATABASE_URL, DATABASE_POOLER, DATABASE_SESSION_URL
// and DB_MAX_CONNS, and checks the URLs together. Several hosts need
// target_session_attrs read-write (or primary), without which a standby
// listed first would take every write and refuse it. Behind a
// transaction-mode pooler, a session URL is required and DATABASE_URL gets
// a statement mode the pooler can carry (db.PoolerURL).
func (c *Config) loadDatabase(l *loader) {
	c.DatabaseURL = l.str("DATABASE_URL", "")
	c.DatabasePooler = db.Pooler(l.str("DATABASE_POOLER", string(db.PoolerNone)))
	c.DatabaseSessionURL = l.str("DATABASE_SESSION_URL", "")
	c.DBMaxConns = int32(l.integer("DB_MAX_CONNS", DefaultDBMaxConns))
	urls := []struct{ name, value string }{{"DATABASE_URL", c.DatabaseURL}, {"DATABASE_SESSION_URL", c.DatabaseSessionURL}}
	for _, u := range urls {
		if u.value == "" {
			continue
		}
		if _, err := pgx.ParseConfig(u.value); err != nil {
			l.fail(u.name, "is not a PostgreSQL connection URL")
			continue
		}
		if n, attrs := db.Hosts(u.value); n > 1 && attrs != "read-write" && attrs != "primary" {
			l.fail(u.name, fmt.Sprintf("names %d hosts: add target_session_attrs=read-write, so that only a primary is "+
				"written to and a promoted standby is followed (got %q)", n, attrs))
		}
	}
	if c.DatabaseURL == "" {
		l.fail("DATABASE_URL", "is required (for example postgres://user:pass@localhost:5432/receiver)")
	}
	switch c.DatabasePooler {
	case db.PoolerNone:
	case db.PoolerTransaction:
		if c.DatabaseSessionURL == "" {
			l.fail("DATABASE_SESSION_URL", "is required with DATABASE_POOLER=transaction: a direct (or session-mode pooler) "+
				"connection for migrations and the locks that let one replica run a job, which a transaction-mode pooler cannot hold")
		} else if c.DatabaseSessionURL == c.DatabaseURL {
			l.fail("DATABASE_SESSION_URL", "is DATABASE_URL, the transaction-mode pooler: it must reach PostgreSQL directly "+
				"(or through a session-mode pooler)")
		}
		if c.DatabaseURL != "" {
			u, err := db.PoolerURL(c.DatabaseURL)
			if err != nil {
				l.fail("DATABASE_URL", err.Error())
			} else {
				c.DatabaseURL = u
			}
		}
	default:
		l.fail("DATABASE_POOLER", fmt.Sprintf("must be none or transaction, got %q", c.DatabasePooler))
	}
	if c.DBMaxConns < 1 {
		l.fail("DB_MAX_CONNS", "must be at least 1")
	}
}

// SessionURL is where migrations and session locks go:
// DATABASE_SESSION_URL, else DATABASE_URL.
func (c Config) SessionURL() string {
	if c.DatabaseSessionURL != "" {
		return c.DatabaseSessionURL
	}
	return c.DatabaseURL
}

// DBOptions are the options of every pool opened on DATABASE_URL: its
// session URL, when DATABASE_SESSION_URL is set.
func (c Config) DBOptions(log *slog.Logger) []db.Option {
	opts := []db.Option{db.WithLogger(log)}
	if c.DatabaseSessionURL != "" {
		opts = append(opts, db.WithSession(c.DatabaseSessionURL))
	}
	return opts
}
