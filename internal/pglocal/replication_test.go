package pglocal

import (
	"context"
	"testing"
	"time"
)

// TestStandbyPromote: a standby made by StartStandby streams the primary's
// commits; once its WAL receiver is stopped it misses the next ones; the
// primary stopped as a crash stops it and the standby promoted, it takes
// writes, with what it had received and without what it had not.
func TestStandbyPromote(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary := startCluster(t)
	mustExec(t, primary.URL("postgres"), "CREATE TABLE t (n int); INSERT INTO t VALUES (1)")

	standby, err := StartStandby(ctx, primary, Options{Dir: tempDir(t), Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop(context.Background()) })
	if standby.URL("postgres") == primary.URL("postgres") || standby.Dir() == primary.Dir() {
		t.Fatalf("the standby is the primary: %s", standby.Dir())
	}
	waitFor(t, "the standby's WAL receiver to stream", func() bool {
		return queryInt(t, standby.URL("postgres"), "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'") == 1
	})
	mustExec(t, primary.URL("postgres"), "INSERT INTO t VALUES (2)")
	waitFor(t, "the second row on the standby", func() bool {
		return queryInt(t, standby.URL("postgres"), "SELECT count(*) FROM t") == 2
	})

	if err := standby.StopWALReceiver(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, primary.URL("postgres"), "INSERT INTO t VALUES (3)") // committed on the primary alone
	if err := primary.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	if err := ping(ctx, primary.URL("postgres")); err == nil {
		t.Fatal("the primary still accepts connections after StopImmediate")
	}
	if err := primary.StopImmediate(); err != nil {
		t.Errorf("a second StopImmediate: %v", err)
	}

	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, standby.URL("postgres"), "INSERT INTO t VALUES (4)")
	if got := queryInt(t, standby.URL("postgres"), "SELECT sum(n) FROM t"); got != 1+2+4 {
		t.Errorf("after promotion the rows sum to %d, want 7: 1 and 2 streamed, 3 lost with the primary, 4 written after", got)
	}
	if tl := queryInt(t, standby.URL("postgres"), "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int"); tl != 2 {
		t.Errorf("the promoted standby writes timeline %d, want 2", tl)
	}
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
