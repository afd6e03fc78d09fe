// Package pgbouncer runs a private PgBouncer in transaction pool mode in
// front of a PostgreSQL server, so that the benchmark (bench/cmd/benchrun)
// and tests can run the receiver behind the kind of pooler many deployments
// have (PgBouncer, RDS Proxy, the Supabase and Neon poolers).
//
// Start writes a configuration file and an auth file into a directory of its
// own, starts the pgbouncer binary installed on the machine
// (scripts/ensure-pgbouncer.sh installs Debian's package) listening on a
// free port of 127.0.0.1, and returns once it accepts connections. Every
// database of the upstream server is reachable through it under its own
// name, as the upstream URL's user; clients are trusted, so it must never be
// exposed beyond the machine. Stop shuts it down and removes the directory.
//
// PgBouncer refuses to run as root. When the current process is root, it
// runs as the `postgres` OS user instead, as internal/pglocal runs
// PostgreSQL (both through internal/supervise). On Linux it is sent SIGTERM
// when the process that started it dies, so that a test binary killed by a
// timeout or a Ctrl-C leaves no pooler behind.
//
// In transaction mode a server connection belongs to a client for one
// transaction only: session state (SET, session advisory locks, LISTEN,
// protocol-level prepared statements, which PgBouncer 1.18 does not track)
// does not survive from one transaction to the next. A pgx client through
// it needs default_query_exec_mode=exec, cache_describe (the receiver's,
// db.PoolerURL) or simple_protocol in its URL.
package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paywebhooks/receiver/internal/supervise"
)

// ErrNotInstalled is wrapped by the error Start returns when no pgbouncer
// binary is found.
var ErrNotInstalled = errors.New("pgbouncer not found (scripts/ensure-pgbouncer.sh installs it; Debian: apt-get install pgbouncer)")

const (
	readyTimeout = 15 * time.Second
	stopTimeout  = 10 * time.Second
	attempts     = 3       // starts tried when the port picked was taken meanwhile
	tailSize     = 8 << 10 // how much of the log is kept for error messages
)

// Options configure a PgBouncer.
type Options struct {
	// Upstream is the URL of the PostgreSQL server to pool, as pgx takes
	// it (postgres://user[:password]@host:port/any?…). Its host, port, user
	// and password are used; its database and parameters are not. Required.
	Upstream string
	// PoolSize is the number of server connections per database (PgBouncer's
	// default_pool_size); 0 means 20.
	PoolSize int
	// Log receives PgBouncer's log; nil discards it. Its last lines are
	// kept for error messages either way.
	Log io.Writer
}

// Bouncer is a running PgBouncer. Its methods are safe for concurrent use.
type Bouncer struct {
	dir  string
	port int
	user string
	log  *supervise.Tail

	mu   sync.Mutex
	proc *supervise.Process // nil once stopped
}

// Find returns the path of the pgbouncer binary: on PATH, else Debian's
// /usr/sbin/pgbouncer (not on a normal user's PATH).
func Find() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/opt/homebrew/bin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// Start starts a PgBouncer in transaction mode in front of opts.Upstream
// and returns once it accepts connections. ctx bounds the start only.
func Start(ctx context.Context, opts Options) (*Bouncer, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	up, err := url.Parse(opts.Upstream)
	if err != nil || up.Host == "" {
		return nil, fmt.Errorf("start pgbouncer: upstream %q is not a postgres:// URL with a host", redact(opts.Upstream))
	}
	host, port := up.Hostname(), up.Port()
	if port == "" {
		port = "5432"
	}
	userName := up.User.Username()
	if userName == "" {
		userName = "postgres"
	}
	password, _ := up.User.Password()
	poolSize := opts.PoolSize
	if poolSize <= 0 {
		poolSize = 20
	}
	cred, err := supervise.Credential("PgBouncer")
	if err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer")
	if err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	b := &Bouncer{dir: dir, user: userName, log: supervise.NewTail(opts.Log, tailSize)}
	for attempt := 1; ; attempt++ {
		if b.port, err = supervise.FreePort(); err != nil {
			break
		}
		if err = b.writeConfig(host, port, userName, password, poolSize, cred); err != nil {
			break
		}
		err = b.start(ctx, bin, cred)
		if err == nil {
			return b, nil
		}
		if attempt == attempts || !strings.Contains(b.log.String(), "bind") {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("start pgbouncer: %w", err)
}

// URL returns the URL of database dbname through the pooler, with
// default_query_exec_mode=exec so that pgx prepares no named statements
// (which a transaction-mode PgBouncer 1.18 cannot keep).
func (b *Bouncer) URL(dbname string) string {
	return b.PlainURL(dbname) + "&default_query_exec_mode=exec"
}

// PlainURL is URL without a query exec mode: what a receiver is given
// with DATABASE_POOLER=transaction, which adds its own (db.PoolerURL).
func (b *Bouncer) PlainURL(dbname string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", url.PathEscape(b.user), b.port, url.PathEscape(dbname))
}

// Port returns the port PgBouncer listens on, on 127.0.0.1.
func (b *Bouncer) Port() int { return b.port }

// PID returns PgBouncer's process id (0 once stopped).
func (b *Bouncer) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return 0
	}
	return b.proc.PID()
}

// Stop shuts PgBouncer down (SIGTERM: clients are disconnected at once),
// killing it after 10 s, and removes its directory. Stopping a stopped
// Bouncer does nothing.
func (b *Bouncer) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return nil
	}
	var err error
	if !b.proc.Stop(context.Background(), syscall.SIGTERM, stopTimeout) {
		b.proc.Kill()
		err = errors.New("stop pgbouncer: no exit after SIGTERM; killed it")
	}
	b.proc = nil
	return errors.Join(err, os.RemoveAll(b.dir))
}

// writeConfig writes pgbouncer.ini and the auth file, readable by the user
// PgBouncer runs as.
func (b *Bouncer) writeConfig(host, port, userName, password string, poolSize int, cred *syscall.Credential) error {
	conn := fmt.Sprintf("host=%s port=%s user=%s", host, port, userName)
	if password != "" {
		conn += " password=" + quoteValue(password)
	}
	ini := fmt.Sprintf(`[databases]
* = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
admin_users = %s
stats_users = %s
ignore_startup_parameters = extra_float_digits
pidfile = %s
log_connections = 0
log_disconnections = 0
`, conn, b.port, filepath.Join(b.dir, "userlist.txt"), poolSize, userName, userName, filepath.Join(b.dir, "pgbouncer.pid"))
	users := fmt.Sprintf("%q %q\n", userName, "")
	for name, text := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": users} {
		p := filepath.Join(b.dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return err
		}
		if cred != nil {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
	}
	if cred != nil {
		return os.Chown(b.dir, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

// start runs pgbouncer in the foreground and waits until it accepts
// connections or exits.
func (b *Bouncer) start(ctx context.Context, bin string, cred *syscall.Credential) error {
	cmd := exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.Dir = b.dir
	cmd.Stdout, cmd.Stderr = b.log, b.log
	cmd.WaitDelay = 5 * time.Second
	p, err := supervise.Start(cmd, cred, syscall.SIGTERM)
	if err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	err = p.WaitReady(ctx, 20*time.Millisecond, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})
	switch {
	case errors.Is(err, supervise.ErrExited):
		return fmt.Errorf("pgbouncer exited during start-up:\n%s", b.log.String())
	case err != nil:
		p.Kill()
		return fmt.Errorf("pgbouncer not accepting connections on %s: %w\n%s", addr, err, b.log.String())
	}
	b.mu.Lock()
	b.proc = p
	b.mu.Unlock()
	return nil
}

// quoteValue quotes a libpq connection-string value.
func quoteValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// redact hides a URL's password in error messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
