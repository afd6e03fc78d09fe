package db

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Pooler is what sits between the receiver and PostgreSQL
// (DATABASE_POOLER).
type Pooler string

const (
	// PoolerNone: DATABASE_URL reaches PostgreSQL directly, or through a
	// session-mode pooler: a connection is one server session.
	PoolerNone Pooler = "none"
	// PoolerTransaction: DATABASE_URL is a transaction-mode pooler
	// (PgBouncer pool_mode=transaction, RDS Proxy, the Supabase and Neon
	// poolers), which hands a server connection to a client for one
	// transaction only. The receiver then keeps no session state on it
	// (every setting and advisory lock it takes is transaction-scoped),
	// prepares no named statement, and runs migrations and the jobs that
	// hold a session lock over DATABASE_SESSION_URL.
	PoolerTransaction Pooler = "transaction"
)

// Poolers are the values DATABASE_POOLER takes.
var Poolers = []Pooler{PoolerNone, PoolerTransaction}

// ExecModeParam is the URL parameter with which pgx chooses how it sends
// statements.
const ExecModeParam = "default_query_exec_mode"

// DefaultPoolerExecMode is the mode PoolerURL gives a URL that names none:
// each statement (and each statement of a pipelined batch) goes as Parse,
// Bind, Describe and Execute of the unnamed statement, in the same round
// trip as the rest, so nothing outlives the transaction on the server; the
// connection keeps each statement's description (learnt in a round trip
// of its own at its first use), so its parameters go in binary as they do
// directly. In the exec mode they go as text: a stored body as hex, twice
// its size, encoded by pgx and decoded by PostgreSQL (through PgBouncer
// 1.18, about 40 µs more of the receiver's CPU per new 5.7 KB event:
// BENCHMARKS.md, "Changes of 2026-12-06").
const DefaultPoolerExecMode = "cache_describe"

// poolerExecModes are pgx's modes and whether each is safe through a
// transaction-mode pooler that does not track protocol-level prepared
// statements (PgBouncer before 1.21, or later with max_prepared_statements
// at 0), with the reason when it is not.
var poolerExecModes = map[string]string{
	// One round trip per statement or batch, the unnamed statement.
	"exec": "",
	// Parameters interpolated by pgx into the simple protocol.
	"simple_protocol": "",
	// A statement's first use on a connection describes it in a round
	// trip of its own, ending in its own Sync; every execution then sends
	// Parse again with the description it learnt: each round trip stands
	// alone, whichever server connection it lands on.
	"cache_describe": "",
	"cache_statement": "it prepares named statements (stmtcache_…) on the server connection of one transaction and " +
		"executes them in later ones, which a transaction-mode pooler may send to another server connection " +
		`("prepared statement … does not exist" / "already exists")`,
	"describe_exec": "it describes the unnamed statement in one round trip and executes it in the next, which a " +
		"transaction-mode pooler may send to another server connection",
}

// PoolerURL returns databaseURL ready for a transaction-mode pooler: with
// default_query_exec_mode=cache_describe added when it names no mode,
// unchanged when it names exec, simple_protocol or cache_describe, and an
// error when it names a mode that needs a server connection's state across
// round trips (cache_statement, pgx's default, or describe_exec).
// databaseURL is a postgres:// URL or a keyword/value connection string.
func PoolerURL(databaseURL string) (string, error) {
	mode, set := ExecMode(databaseURL)
	if !set {
		return withParam(databaseURL, ExecModeParam, DefaultPoolerExecMode), nil
	}
	why, known := poolerExecModes[mode]
	switch {
	case !known:
		return "", fmt.Errorf("%s=%s is not a mode pgx knows", ExecModeParam, mode)
	case why != "":
		return "", fmt.Errorf("%s=%s cannot work through a transaction-mode pooler: %s; use %s=exec (or leave it out)",
			ExecModeParam, mode, why, ExecModeParam)
	}
	return databaseURL, nil
}

// ExecMode returns the default_query_exec_mode a connection URL or
// keyword/value string names, and whether it names one.
func ExecMode(connString string) (mode string, set bool) {
	if u, ok := parseURL(connString); ok {
		q := u.Query()
		return q.Get(ExecModeParam), q.Has(ExecModeParam)
	}
	if m := dsnExecMode.FindStringSubmatch(connString); m != nil {
		return strings.Trim(m[1], `'`), true
	}
	return "", false
}

var dsnExecMode = regexp.MustCompile(`(?:^|\s)` + ExecModeParam + `\s*=\s*('[^']*'|\S+)`)

// parseURL parses a postgres:// or postgresql:// URL.
func parseURL(s string) (*url.URL, bool) {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return nil, false
	}
	u, err := url.Parse(s)
	return u, err == nil
}

// withParam adds key=value to a connection URL or keyword/value string.
func withParam(connString, key, value string) string {
	if u, ok := parseURL(connString); ok {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(connString) + " " + key + "=" + value
}

// Hosts returns how many hosts a connection URL or keyword/value string
// names (postgres://a:5432,b:5432/db names two), and its
// target_session_attrs ("" when unset).
func Hosts(connString string) (n int, targetSessionAttrs string) {
	if u, ok := parseURL(connString); ok {
		n = len(strings.Split(u.Host, ","))
		return n, u.Query().Get("target_session_attrs")
	}
	for _, f := range strings.Fields(connString) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "host":
			n = len(strings.Split(strings.Trim(v, `'`), ","))
		case "target_session_attrs":
			targetSessionAttrs = strings.Trim(v, `'`)
		}
	}
	return max(n, 1), targetSessionAttrs
}
