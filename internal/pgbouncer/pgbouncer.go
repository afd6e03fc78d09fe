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
// PostgreSQL.
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
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled is wrapped by the error Start returns when no pgbouncer
// binary is found.
var ErrNotInstalled = errors.New("pgbouncer not found (scripts/ensure-pgbouncer.sh installs it; Debian: apt-get install pgbouncer)")

const (
	readyTimeout = 15 * time.Second
	stopTimeout  = 10 * time.Second
	attempts     = 3 // starts tried when the port picked was taken meanwhile
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
	log  *tailWriter

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
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
	cred, err := credential()
	if err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer")
	if err != nil {
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	b := &Bouncer{dir: dir, user: userName, log: &tailWriter{out: opts.Log}}
	for attempt := 1; ; attempt++ {
		if b.port, err = freePort(); err != nil {
			break
		}
		if err = b.writeConfig(host, port, userName, password, poolSize, cred); err != nil {
			break
		}
		err = b.start(ctx, bin, cred)
		if err == nil {
			return b, nil
		}
		if attempt == attempts || !strings.Contains(b.log.tail(), "bind") {
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
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Stop shuts PgBouncer down (SIGTERM: clients are disconnected at once),
// killing it after 10 s, and removes its directory. Stopping a stopped
// Bouncer does nothing.
func (b *Bouncer) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return nil
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-b.done:
	case <-time.After(stopTimeout):
		_ = b.cmd.Process.Kill()
		<-b.done
		err = errors.New("stop pgbouncer: no exit after SIGTERM; killed it")
	}
	b.cmd = nil
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	setParentDeathSignal(cmd.SysProcAttr)
	// Linux sends the parent-death signal when the thread that started the
	// child exits, and the Go runtime may end threads: the goroutine that
	// starts pgbouncer keeps its thread until pgbouncer exits.
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port))
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			b.mu.Lock()
			b.cmd, b.done = cmd, done
			b.mu.Unlock()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("pgbouncer exited during start-up:\n%s", b.log.tail())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("pgbouncer not accepting connections on %s: %w\n%s", addr, ctx.Err(), b.log.tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// credential returns the postgres user to run PgBouncer as when we are
// root, and nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PgBouncer refuses to: look up the `postgres` user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

// tailWriter copies PgBouncer's log to an optional writer and keeps its
// last 8 KB for error messages.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
	out io.Writer
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out != nil {
		_, _ = w.out.Write(p)
	}
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - 8<<10; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
