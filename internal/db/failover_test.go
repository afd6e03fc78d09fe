package db_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pglocal"
)

// startCluster starts a private PostgreSQL of the test's own (a fail-over
// or a synchronous standby is no thing to do to the shared one).
func startCluster(t *testing.T, settings ...string) *pglocal.Cluster {
	t.Helper()
	c, err := pglocal.Start(context.Background(), pglocal.Options{Dir: tempDir(t), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StopImmediate() }) // thrown away: no checkpoint needed
	return c
}

// tempDir is under os.TempDir(): as root the server runs as postgres, which
// cannot reach testing's TempDir.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "db-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// bothHosts is the URL of database postgres on a and b, primary first, as
// an operator writes it for a pair that fails over.
func bothHosts(a, b *pglocal.Cluster) string {
	u, _ := url.Parse(a.URL("postgres"))
	u.Host = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", a.Port(), b.Port())
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return u.String()
}

// TestPoolFollowsPromotion: a pool on both hosts of a primary and its
// standby writes to the primary; once the primary is stopped as a crash
// stops it, no write succeeds, nor does the pool say ready; once the
// standby is promoted, the same pool writes there, within a few attempts,
// and reads a new timeline of the same cluster. A pool that reaches the
// standby itself says it is read-only, and a connection on which a write
// was refused as read-only is not kept.
func TestPoolFollowsPromotion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary := startCluster(t)
	standby, err := pglocal.StartStandby(ctx, primary, pglocal.Options{Dir: tempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.StopImmediate() })
	pool, err := db.Open(ctx, bothHosts(primary, standby), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE TABLE t (n int); INSERT INTO t VALUES (1); CREATE TABLE schema_migrations (version bigint, dirty bool); INSERT INTO schema_migrations VALUES (1, false)`); err != nil {
		t.Fatal(err)
	}
	before, err := db.ReadPrimary(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := db.Ready(ctx, pool); err != nil || r.ReadOnly {
		t.Errorf("ready on the primary: %+v, %v; want a writable server", r, err)
	}

	t.Run("StandbyIsReadOnly", func(t *testing.T) {
		onStandby, err := db.Open(ctx, standby.URL("postgres"), 1)
		if err != nil {
			t.Fatal(err)
		}
		defer onStandby.Close()
		waitFor(t, "the table on the standby", func() bool {
			var n int
			return onStandby.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n) == nil && n == 1
		})
		if r, err := db.Ready(ctx, onStandby); err != nil || !r.ReadOnly {
			t.Errorf("ready on the standby: %+v, %v; want read-only", r, err)
		}
		var pid1, pid2 uint32
		if err := onStandby.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid1); err != nil {
			t.Fatal(err)
		}
		_, err = onStandby.Exec(ctx, `INSERT INTO t VALUES (2)`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.ReadOnlySQLTransaction {
			t.Fatalf("a write on the standby: %v, want SQLSTATE 25006", err)
		}
		if err := onStandby.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid2); err != nil {
			t.Fatal(err)
		}
		if pid1 == pid2 {
			t.Errorf("the connection that was refused as read-only (backend %d) was kept", pid1)
		}
	})

	if err := primary.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for range 3 {
		if err := exec(`INSERT INTO t VALUES (3)`); err == nil {
			t.Fatal("a write succeeded with the primary stopped and the standby not promoted")
		}
		if _, err := db.Ready(ctx, pool); err == nil {
			t.Error("ready with the primary stopped and the standby not promoted")
		}
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	attempts := 0
	waitFor(t, "a write after the promotion", func() bool {
		attempts++
		return exec(`INSERT INTO t VALUES (4)`) == nil
	})
	t.Logf("primary stopped; promoted %v later; first write %v after the promotion, attempt %d",
		promoted.Sub(stopped).Round(time.Millisecond), time.Since(promoted).Round(time.Millisecond), attempts)
	if attempts > 3 {
		t.Errorf("%d attempts to write after the promotion: the pool kept connections to the stopped primary", attempts)
	}
	after, err := db.ReadPrimary(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if after.SystemID != before.SystemID || after.Timeline != before.Timeline+1 {
		t.Errorf("primary before %v, after %v: want the same system on the next timeline", before, after)
	}
	if r, err := db.Ready(ctx, pool); err != nil || r.ReadOnly {
		t.Errorf("ready after the promotion: %+v, %v", r, err)
	}
}

// TestSynchronousCommitWait: a commit waits for its synchronous standby
// (here one that never comes). If the caller's context ends meanwhile, the
// caller gets an error, never a success: pgx closes the connection rather
// than asking the server to cancel, which would answer the commit as done
// while it is on the primary alone. If the server's wait is cancelled all
// the same (an operator's pg_cancel_backend), the commit is answered as a
// success with a warning, and the pool logs it as an error for operators.
func TestSynchronousCommitWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startCluster(t, "synchronous_commit=on", "synchronous_standby_names=ghost")
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, nil))
	pool, err := db.Open(ctx, c.URL("postgres"), 2, db.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `SET LOCAL synchronous_commit = local; CREATE TABLE t (n int)`); err != nil {
		t.Fatal(err)
	}

	t.Run("ContextEnds", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := pool.Exec(short, `INSERT INTO t VALUES (1)`)
		if err == nil {
			t.Fatal("a commit still waiting for its synchronous standby was answered as a success")
		}
		t.Logf("the commit whose context ended: %v", err)
	})

	t.Run("ServerCancels", func(t *testing.T) {
		admin := openAdmin(t, c)
		go func() {
			// Cancel the wait once the insert is in it.
			for ctx.Err() == nil {
				var n int
				_ = admin.QueryRow(ctx, `SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity
WHERE wait_event = 'SyncRep' AND query LIKE 'INSERT INTO t VALUES (2)%'`).Scan(&n)
				if n > 0 {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		if _, err := pool.Exec(ctx, `INSERT INTO t VALUES (2)`); err != nil {
			t.Fatalf("the cancelled wait: %v (PostgreSQL answers it as a success)", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "synchronous standby was cancelled") {
			t.Errorf("no error logged for a commit left on the primary alone:\n%s", logs.String())
		}
	})
}

func openAdmin(t *testing.T, c *pglocal.Cluster) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
