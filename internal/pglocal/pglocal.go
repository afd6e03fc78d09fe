// Package pglocal runs a private PostgreSQL server from the server binaries
// installed on the machine (initdb, postgres), without Docker.
//
// Tests use it for a throw-away cluster in a temporary directory; the
// development tool (cmd/dev) uses it for a persistent cluster that survives
// restarts. The server listens on 127.0.0.1 only, over TCP (no Unix
// socket), and its superuser `postgres` signs in with scram-sha-256 and a
// random password made when the cluster is created: another user of the
// machine cannot connect without reading the data directory, which is
// private (0700). The password is kept in the data directory (see
// PasswordFile), so a persistent cluster opens again with it, and every URL
// the Cluster gives carries it.
//
// PostgreSQL refuses to run as root. When the current process is root, the
// cluster is initialised and run as the `postgres` OS user instead
// (internal/supervise, which internal/pgbouncer shares), and the data
// directory is handed over to that user. pglocal changes the
// permissions of the data directory only, never of its parents: these must
// already let `postgres` through, as os.TempDir() and the `postgres`
// user's home do, and Start says so when they do not.
package pglocal

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paywebhooks/receiver/internal/supervise"
)

const (
	// readyTimeout bounds how long Start waits for the server to accept
	// connections.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a fast shutdown before Stop escalates.
	stopTimeout = 30 * time.Second
	// startAttempts is how often Start tries when a failure looks transient.
	startAttempts = 5
	// tailSize is how much of the server log is kept for error messages,
	// and tailLines how many of its last lines they quote.
	tailSize  = 16 << 10
	tailLines = 30
)

// PasswordFile is the name of the file, in the data directory, that keeps
// the superuser's password (mode 0600, owned by the user the server runs
// as).
const PasswordFile = "pglocal.password"

// ErrNotInstalled is wrapped by the error FindBinDir (and so Start) returns
// when no PostgreSQL server binaries are found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// searchDirs are the glob patterns FindBinDir tries, in order, after PATH.
// Where a pattern matches several versions, the highest version wins. It is
// a variable so that tests can point it elsewhere.
var searchDirs = []string{
	"/usr/lib/postgresql/*/bin",         // Debian, Ubuntu
	"/usr/local/opt/postgresql*/bin",    // Homebrew on Intel macOS
	"/opt/homebrew/opt/postgresql*/bin", // Homebrew on Apple silicon
	"/opt/homebrew/bin",
	"/usr/local/bin",
}

// FindBinDir returns the directory holding the initdb and postgres binaries:
// the one on PATH, else the highest version found in the usual install
// locations of Debian, Ubuntu and Homebrew.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); hasServerBinaries(dir) {
			return dir, nil
		}
	}
	for _, pattern := range searchDirs {
		matches, _ := filepath.Glob(pattern) // the patterns are well-formed
		sortByVersionDesc(matches)
		for _, dir := range matches {
			if hasServerBinaries(dir) {
				return dir, nil
			}
		}
	}
	return "", fmt.Errorf("%w on PATH or in %s: install them with `apt-get install postgresql` (Debian/Ubuntu) or `brew install postgresql@15` (macOS)",
		ErrNotInstalled, strings.Join(searchDirs, ", "))
}

func hasServerBinaries(dir string) bool {
	return isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres"))
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

var digitRuns = regexp.MustCompile(`\d+`)

// sortByVersionDesc orders paths such as /usr/lib/postgresql/15/bin by the
// numbers in them, highest first, so that 16 comes before 9.6.
func sortByVersionDesc(paths []string) {
	version := func(p string) []int {
		var v []int
		for _, d := range digitRuns.FindAllString(p, -1) {
			n, _ := strconv.Atoi(d)
			v = append(v, n)
		}
		return v
	}
	slices.SortStableFunc(paths, func(a, b string) int {
		return slices.Compare(version(b), version(a))
	})
}

// Options configure a cluster.
type Options struct {
	// Dir is the data directory. It is created if missing (mode 0700) and
	// initialised with initdb only if it does not hold a cluster yet, so a
	// persistent development cluster survives restarts. Required. When the
	// server runs as `postgres` (we are root), every parent of Dir must be
	// searchable by that user: a directory made by os.MkdirTemp("", …)
	// is, one made by testing's TempDir is not (its parent is private).
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Durable keeps PostgreSQL's crash-safety defaults (benchmarks, a
	// development database worth keeping). When false (tests), fsync,
	// synchronous_commit and full_page_writes are off: much faster, but a
	// crash of the machine can lose or corrupt data.
	Durable bool
	// Settings are more server settings, "name=value" each, given after
	// pglocal's own so that they win (synchronous_commit=on on a cluster
	// that is not Durable, for synchronous replication).
	Settings []string
	// Log receives the output of initdb and the server log; nil discards
	// them. The last part of the server log is always kept for error
	// messages.
	Log io.Writer
}

// Cluster is a running (or stopped) private PostgreSQL server. Its methods
// are safe for concurrent use.
type Cluster struct {
	bin     string
	dir     string
	port    int
	durable bool
	extra   []string            // Options.Settings
	cred    *syscall.Credential // nil unless we are root and run postgres as another user
	pass    string              // the superuser's password, from PasswordFile
	log     *supervise.Tail     // the server's output

	mu   sync.Mutex         // serialises start and stop
	proc *supervise.Process // the running postmaster; nil when stopped
}

// Start initialises the data directory if needed and starts the server,
// returning once it accepts connections. ctx bounds the start only; the
// server runs until Stop or Kill.
//
// The server runs in its own process group, so a Ctrl-C in the terminal
// does not reach it before its owner stops it cleanly. On Linux it is also
// shut down if the process that started it dies.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("start postgres: Options.Dir is required")
	}
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	cred, err := supervise.Credential("PostgreSQL")
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c := &Cluster{
		bin:     bin,
		dir:     dir,
		port:    opts.Port,
		durable: opts.Durable,
		extra:   opts.Settings,
		cred:    cred,
		log:     supervise.NewTail(opts.Log, tailSize),
	}
	if err := c.prepareDir(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := c.initdb(ctx, opts.Log); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if c.pass, err = c.readPassword(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startLocked(ctx, opts.Port == 0); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	return c, nil
}

// URL returns the connection URL of database dbname on this server, with
// the superuser's name and password.
func (c *Cluster) URL(dbname string) string { return URL(c.port, c.pass, dbname) }

// URL is the connection URL of database dbname on a server of this package
// listening on 127.0.0.1:port, as the superuser with password.
func URL(port int, password, dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword("postgres", password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the TCP port the server listens on, on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir returns the absolute path of the data directory.
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts the server down: a fast shutdown (open transactions are rolled
// back, then a checkpoint), escalating to an immediate shutdown and then
// SIGKILL if it takes longer than 30s or ctx ends. Stopping a stopped
// server does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(ctx)
}

// Kill stops the server with SIGKILL, as a crash would, and waits until all
// its processes have exited. The next start runs crash recovery.
func (c *Cluster) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		c.proc.Kill()
		c.proc = nil
	}
}

// Restart stops the server if it is running and starts it again on the same
// port and data directory.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.stopLocked(ctx); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	if err := c.startLocked(ctx, false); err != nil {
		return fmt.Errorf("restart postgres: %w", err)
	}
	return nil
}

// CreateDatabase creates database name unless it already exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DuplicateDatabase {
		return nil // created concurrently by someone else
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// prepareDir creates the data directory and, when postgres runs as another
// user, hands a fresh directory over to that user after making sure that
// user can reach it. No other directory's permissions change.
func (c *Cluster) prepareDir() error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if c.cred == nil {
		return nil
	}
	if err := searchable(filepath.Dir(c.dir), c.cred); err != nil {
		return fmt.Errorf("PostgreSQL runs as the postgres user (we are root), which cannot reach the data directory %s: %w; "+
			"put it under a directory that user can traverse, such as %s or its home, or run as another user "+
			"(pglocal changes no parent directory's permissions)", c.dir, err, os.TempDir())
	}
	if !c.initialised() {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("chown data directory: %w", err)
		}
		if err := os.Chmod(c.dir, 0o700); err != nil {
			return fmt.Errorf("chmod data directory: %w", err)
		}
	}
	return nil
}

// searchable reports, as an error naming the first directory in the way,
// whether the user of cred may search dir and each of its parents, by
// their owner, group and mode bits. ACLs are not read: a directory that
// grants search only by an ACL is reported as in the way.
func searchable(dir string, cred *syscall.Credential) error {
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !canSearch(fi, cred) {
			return fmt.Errorf("%s (mode %v) is not searchable by it", dir, fi.Mode().Perm())
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// canSearch reports whether the owner, group and mode bits of a directory
// let the user of cred search it.
func canSearch(fi os.FileInfo, cred *syscall.Credential) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // no owner to compare: let the server try
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == cred.Uid:
		return perm&0o100 != 0
	case st.Gid == cred.Gid || slices.Contains(cred.Groups, st.Gid):
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

// initialised reports whether the data directory already holds a cluster.
func (c *Cluster) initialised() bool {
	_, err := os.Stat(filepath.Join(c.dir, "PG_VERSION"))
	return err == nil
}

// initdb creates the cluster unless the data directory already holds one:
// the superuser `postgres`, signing in with scram-sha-256 and a random
// password, which is then kept in PasswordFile.
func (c *Cluster) initdb(ctx context.Context, log io.Writer) error {
	if c.initialised() {
		return nil
	}
	pass := rand.Text()
	pwfile, err := c.tempPasswordFile(pass)
	if err != nil {
		return err
	}
	defer os.Remove(pwfile)
	args := []string{"-D", c.dir, "-U", "postgres", "--auth=scram-sha-256", "--pwfile=" + pwfile, "-E", "UTF8", "--locale=C"}
	if !c.durable {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "initdb"), args...)
	cmd.Dir = c.dir // the postgres user may not be able to reach our working directory
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	out, err := cmd.CombinedOutput()
	if log != nil {
		_, _ = log.Write(out)
	}
	if err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", c.dir, err, out)
	}
	return c.writeFile(filepath.Join(c.dir, PasswordFile), pass+"\n")
}

// tempPasswordFile writes pass to a new file under os.TempDir() that only
// the user initdb runs as can read, for initdb's --pwfile.
func (c *Cluster) tempPasswordFile(pass string) (string, error) {
	f, err := os.CreateTemp("", "pglocal-pw-*")
	if err != nil {
		return "", fmt.Errorf("write initdb's password file: %w", err)
	}
	_, err = f.WriteString(pass + "\n")
	if err == nil && c.cred != nil {
		err = f.Chown(int(c.cred.Uid), int(c.cred.Gid))
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write initdb's password file: %w", err)
	}
	return f.Name(), nil
}

// writeFile writes a file of the data directory, mode 0600, owned by the
// user the server runs as.
func (c *Cluster) writeFile(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.WriteString(content)
	if err == nil && c.cred != nil {
		err = f.Chown(int(c.cred.Uid), int(c.cred.Gid))
	}
	if err == nil && c.durable {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ErrNoPassword is wrapped by the error Start returns for a data directory
// that holds a cluster but no PasswordFile: one made by an earlier version
// of pglocal, whose server trusted every local connection.
var ErrNoPassword = errors.New("the cluster has no password file")

// readPassword returns the superuser's password kept in the data directory.
func (c *Cluster) readPassword() (string, error) {
	path := filepath.Join(c.dir, PasswordFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %w (%s): it was made by an earlier version, which let any local user connect "+
			"without a password; remove the directory to start a new, password-protected cluster", c.dir, ErrNoPassword, PasswordFile)
	}
	if err != nil {
		return "", fmt.Errorf("read the cluster's password: %w", err)
	}
	pass := strings.TrimSpace(string(b))
	if pass == "" {
		return "", fmt.Errorf("read the cluster's password: %s is empty", path)
	}
	return pass, nil
}

// startLocked starts the server, retrying failures that look transient: the
// port picked was taken in the meantime (only when pickPort), or processes
// of a previous, killed server still hold its shared memory.
func (c *Cluster) startLocked(ctx context.Context, pickPort bool) error {
	for attempt := 1; ; attempt++ {
		if pickPort {
			port, err := supervise.FreePort()
			if err != nil {
				return err
			}
			c.port = port
		}
		err := c.startOnce(ctx)
		if err == nil {
			return nil
		}
		var exit *earlyExitError
		if !errors.As(err, &exit) || attempt == startAttempts {
			return err
		}
		portTaken, busy := exit.transient()
		if !busy && !(portTaken && pickPort) {
			return err
		}
		if err := sleep(ctx, time.Duration(attempt)*200*time.Millisecond); err != nil {
			return err
		}
	}
}

// startOnce starts postgres and waits until it accepts connections.
func (c *Cluster) startOnce(ctx context.Context) error {
	if err := clearStalePID(ctx, c.dir); err != nil {
		return err
	}
	c.log.Reset()
	// SIGINT is a fast shutdown. Where there is no parent-death signal
	// (not Linux), a server whose parent was killed keeps running until
	// stopped; clearStalePID reports it on the next start.
	p, err := supervise.Start(c.serverCommand(), c.cred, syscall.SIGINT)
	if err != nil {
		return fmt.Errorf("run %s: %w", filepath.Join(c.bin, "postgres"), err)
	}
	if err := c.waitReady(ctx, p); err != nil {
		p.Kill()
		return err
	}
	c.proc = p
	return nil
}

// serverCommand builds the postgres command line. Settings are given as
// flags rather than written to postgresql.conf, so the data directory keeps
// no trace of how it was last started.
func (c *Cluster) serverCommand() *exec.Cmd {
	args := []string{
		"-D", c.dir,
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=", // TCP only: no socket path length limits, no lock files elsewhere
		"-c", "max_connections=200",
		"-c", "lc_messages=C", // English log lines, which startLocked inspects
	}
	if !c.durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, kv := range c.extra {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	cmd.Dir = c.dir
	// The same writer for both makes exec use one pipe, held by the
	// postmaster and every child: Wait returns once all of them are gone.
	cmd.Stdout = c.log
	cmd.Stderr = c.log
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// waitReady polls the server until it accepts connections, it exits, or
// readyTimeout passes.
func (c *Cluster) waitReady(ctx context.Context, p *supervise.Process) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	err := p.WaitReady(ctx, 50*time.Millisecond, func(ctx context.Context) (bool, error) {
		err := ping(ctx, c.URL("postgres"))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InvalidPassword {
			return false, fmt.Errorf("the server refuses the password in %s: %w", filepath.Join(c.dir, PasswordFile), err)
		}
		return err == nil, nil
	})
	switch {
	case errors.Is(err, supervise.ErrExited):
		return &earlyExitError{err: p.Err(), log: c.log.Lines(tailLines)}
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("not accepting connections on 127.0.0.1:%d: %w\nserver log:\n%s", c.port, err, c.log.Lines(tailLines))
	}
	return err
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// stopLocked stops the running server, if any.
func (c *Cluster) stopLocked(ctx context.Context) error {
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	return stop(ctx, p)
}

// earlyExitError reports a server that exited while starting up.
type earlyExitError struct {
	err error // from Wait
	log string
}

func (e *earlyExitError) Error() string {
	return fmt.Sprintf("postgres exited during start-up (%v)\nserver log:\n%s", e.err, e.log)
}

// transient reports whether the server log shows a failure worth retrying:
// the port is taken, or a previous server's processes are still exiting.
func (e *earlyExitError) transient() (portTaken, busy bool) {
	portTaken = strings.Contains(e.log, "could not bind") ||
		strings.Contains(e.log, "could not create any TCP/IP sockets")
	busy = strings.Contains(e.log, "pre-existing shared memory block") ||
		strings.Contains(e.log, `lock file "postmaster.pid" already exists`)
	return portTaken, busy
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clearStalePID removes the postmaster.pid a killed server left behind.
// PostgreSQL copes with most of those itself, but not when the PID has been
// reused by another process, or belongs to a zombie nobody reaps (as in
// containers without an init). If the PID is a live postgres, it may be a
// server shutting down because its parent died: clearStalePID waits a while
// for it to exit, then gives up.
func clearStalePID(ctx context.Context, dir string) error {
	path := filepath.Join(dir, "postmaster.pid")
	pid, err := readPID(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		deadline := time.Now().Add(10 * time.Second)
		for isPostgres(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("PostgreSQL (PID %d) is already running in %s: stop it first (kill -INT %d)", pid, dir, pid)
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	// A garbled file was cut short by the kill: stale as well.
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale postmaster.pid: %w", err)
	}
	return nil
}

// readPID returns the PID on the first line of a postmaster.pid file.
func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// isPostgres reports whether pid is a live (not zombie) postgres process.
// Where /proc is missing (macOS), any live process is assumed to be one.
func isPostgres(pid int) bool {
	if pid <= 0 || pid == os.Getpid() {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) || !procMounted()
	}
	// The format is "pid (comm) state ...", and comm may contain spaces.
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || len(s) < end+3 {
		return true
	}
	comm, state := s[open+1:end], s[end+2]
	return state != 'Z' && (comm == "postgres" || comm == "postmaster")
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// stop shuts the server down, escalating from a fast shutdown (SIGINT) to
// an immediate one (SIGQUIT) to SIGKILL.
func stop(ctx context.Context, p *supervise.Process) error {
	if p.Exited() {
		return nil
	}
	if p.Stop(ctx, syscall.SIGINT, stopTimeout) {
		return nil
	}
	if p.Stop(context.Background(), syscall.SIGQUIT, 5*time.Second) {
		return errors.New("stop postgres: fast shutdown timed out; did an immediate shutdown")
	}
	p.Kill()
	return errors.New("stop postgres: shutdown timed out; killed it")
}
