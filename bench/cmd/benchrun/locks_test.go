package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/pgtest"
)

// TestLockSamplerSeesARowWait: a transaction waiting for another's row is
// sampled as waiting for a transactionid lock, and nothing is sampled
// outside a window.
func TestLockSamplerSeesARowWait(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDB(t)
	s, err := openLockSampler(ctx, url, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	holder, waiter := connect(t, url), connect(t, url)
	if _, err := holder.Exec(ctx, `CREATE TABLE hot (id int PRIMARY KEY, n int); INSERT INTO hot VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE hot SET n = n + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	s.start()
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(ctx, `UPDATE hot SET n = n + 1 WHERE id = 1`)
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		n := s.cur.waiting["transactionid"]
		s.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no wait sampled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w := s.finish()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.samples == 0 || w.active < w.total() || w.share() <= 0 || w.text() == "" {
		t.Errorf("window %+v: share %.2f, %q", w, w.share(), w.text())
	}
	if got := s.finish(); got.samples != w.samples {
		t.Errorf("sampled after the window: %d samples, then %d", w.samples, got.samples)
	}
	var none *lockSampler
	none.start()
	if got := none.finish(); got.samples != 0 {
		t.Errorf("a nil sampler sampled %+v", got)
	}
}

// TestQuietCounts: the commits of a database's connections, read once they
// are gone, count every commit they made (an exiting backend adds its
// counts after it leaves pg_stat_activity).
func TestQuietCounts(t *testing.T) {
	ctx := context.Background()
	b := testBench(t, "flushdb")
	b.urls["postgres"] = pgtest.NewDB(t)
	before := b.quietCounts(ctx, "flushdb")
	if !before.ok {
		t.Fatal("no counts")
	}
	conn := connect(t, b.url("flushdb"))
	if _, err := conn.Exec(ctx, `CREATE TABLE t (n int)`); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := conn.Exec(ctx, `INSERT INTO t VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	// (The test cluster runs without fsync: it counts no flushes.)
	g, ok := flushSpan("test", 20, before, b.quietCounts(ctx, "flushdb"))
	if !ok || g.commits < 21 {
		t.Errorf("%+v (ok %v): want at least 21 commits", g, ok)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
