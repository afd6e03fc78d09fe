package pglocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/supervise"
)

// Streaming replication, for tests of what a fail-over does: a standby made
// from a base backup of a running Cluster, promoted when its primary is
// stopped the way a crash stops it. The primary needs nothing special:
// PostgreSQL's defaults (wal_level replica, max_wal_senders 10) and the
// replication lines initdb writes in pg_hba.conf let the superuser stream.

// StartStandby makes a hot standby of primary: a base backup
// (pg_basebackup -R, which writes standby.signal and a primary_conninfo
// with the primary's address and password) into opts.Dir, which must not
// hold a cluster, then starts it, streaming from primary, and returns once
// it accepts (read-only) connections. opts.Port and opts.Settings apply to
// the standby; its password is the primary's (the backup copies
// PasswordFile).
//
// To make the primary wait for it, set synchronous_standby_names on the
// primary (ALTER SYSTEM and pg_reload_conf(), once the standby streams) and
// start the primary with synchronous_commit=on: a Cluster that is not
// Durable turns synchronous_commit off.
func StartStandby(ctx context.Context, primary *Cluster, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("start standby: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	c := &Cluster{
		bin:     primary.bin,
		dir:     dir,
		port:    opts.Port,
		durable: opts.Durable,
		extra:   opts.Settings,
		cred:    primary.cred,
		log:     supervise.NewTail(opts.Log, tailSize),
	}
	if c.initialised() {
		return nil, fmt.Errorf("start standby: %s already holds a cluster", dir)
	}
	if err := c.prepareDir(); err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	if err := c.baseBackup(ctx, primary, opts); err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	if c.pass, err = c.readPassword(); err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startLocked(ctx, opts.Port == 0); err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	return c, nil
}

// baseBackup copies primary into c.dir with pg_basebackup, as the user the
// server runs as, streaming the WAL it needs (-X stream) after a fast
// checkpoint (-c fast).
func (c *Cluster) baseBackup(ctx context.Context, primary *Cluster, opts Options) error {
	args := []string{"-D", c.dir, "-R", "-X", "stream", "-c", "fast", "-w",
		"-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port()), "-U", "postgres"}
	if !c.durable {
		args = append(args, "--no-sync")
	}
	bin, err := c.tool("pg_basebackup")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "PGPASSWORD="+primary.pass, "PGSSLMODE=disable")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	out, err := cmd.CombinedOutput()
	if opts.Log != nil {
		_, _ = opts.Log.Write(out)
	}
	if err != nil {
		return fmt.Errorf("pg_basebackup from 127.0.0.1:%d: %w\n%s", primary.Port(), err, out)
	}
	return nil
}

// tool finds another PostgreSQL program beside postgres: in the directory
// of the binaries, in the one a symbolic link there leads to (Debian's
// /usr/lib/postgresql/N/bin behind a link in /usr/local/bin), or on PATH.
func (c *Cluster) tool(name string) (string, error) {
	dirs := []string{c.bin}
	if real, err := filepath.EvalSymlinks(filepath.Join(c.bin, "postgres")); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found in %s or on PATH", name, strings.Join(dirs, ", "))
}

// Promote ends a standby's recovery (pg_promote) and returns once it takes
// writes: it is a primary on a new timeline.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	if !ok {
		return errors.New("promote: still in recovery after 60 s")
	}
	return nil
}

// StopImmediate stops the server as `pg_ctl stop -m immediate` does
// (SIGQUIT to the postmaster): every session is cut off at once, nothing is
// flushed or checkpointed, and the next start runs crash recovery. Commits
// the primary had not sent to a standby are only on this server. Stopping
// a stopped server does nothing.
func (c *Cluster) StopImmediate() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	if p.Stop(context.Background(), syscall.SIGQUIT, stopTimeout) {
		return nil
	}
	p.Kill()
	return errors.New("stop postgres: immediate shutdown timed out; killed it")
}

// StopWALReceiver makes a standby stop streaming from its primary (its
// primary_conninfo emptied, the configuration reloaded) and returns once
// its WAL receiver has stopped: from then on the primary's commits do not
// reach it, as if it lagged behind, and promoting it loses them. The
// primary must not wait for this standby (no synchronous_standby_names
// naming it), or its commits block.
func (c *Cluster) StopWALReceiver(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("stop the WAL receiver: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, sql := range []string{`ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("stop the WAL receiver: %s: %w", sql, err)
		}
	}
	for {
		var receiving bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)`).Scan(&receiving); err != nil {
			return fmt.Errorf("stop the WAL receiver: %w", err)
		}
		if !receiving {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("stop the WAL receiver: still receiving: %w", err)
		}
	}
}
