package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// fakeProc is a /proc with the processes the test puts in it.
type fakeProc struct {
	t    *testing.T
	root string
}

// set writes pid's stat: its parent, user and system ticks, and the ticks of
// the children it has reaped.
func (f fakeProc) set(pid, ppid int, comm string, utime, stime, cutime, cstime int) {
	dir := filepath.Join(f.root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (%s) S %d %d %d 0 -1 4194560 100 0 0 0 %d %d %d %d 20 0 1 0 100 1000 100\n",
		pid, comm, ppid, pid, pid, utime, stime, cutime, cstime)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f fakeProc) exit(pid int) { _ = os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))) }

func (f fakeProc) machine(busy int) {
	line := fmt.Sprintf("cpu  %d 0 0 5000 10 0 0 %d 7 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n", busy, busy/10)
	if err := os.WriteFile(filepath.Join(f.root, "stat"), []byte(line), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestClusterCPUCountsOnlyOurCluster: the postmaster of our data directory
// and its descendants count, including a backend that exits between two
// snapshots (its time moves into the postmaster's cutime); another
// cluster's postgres processes do not.
func TestClusterCPUCountsOnlyOurCluster(t *testing.T) {
	f := fakeProc{t, t.TempDir()}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte("100\n/data\n1700000000\n5432\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := cpuMeter{proc: f.root, dataDir: data}
	f.machine(1000)
	f.set(100, 1, "postgres", 10, 5, 0, 0)    // our postmaster
	f.set(101, 100, "postgres", 50, 20, 0, 0) // a backend that will exit
	f.set(102, 100, "postgres", 30, 10, 0, 0) // a backend that stays
	f.set(103, 102, "postgres", 1, 1, 0, 0)   // a grandchild
	f.set(200, 1, "postgres", 500, 500, 0, 0) // another cluster's postmaster
	f.set(201, 200, "postgres", 900, 900, 0, 0)
	f.set(300, 1, "receiver", 70, 30, 0, 0)
	a := m.snap(300)
	if want := (10 + 5 + 50 + 20 + 30 + 10 + 1 + 1) / 100.0; !near(a.postgres, want) {
		t.Fatalf("postgres %.2fs, want %.2fs", a.postgres, want)
	}
	if !near(a.server, 1.0) {
		t.Fatalf("server %.2fs, want 1s", a.server)
	}

	// 101 runs 40 more ticks and exits, reaped by the postmaster; 102 runs
	// 25 more; a new backend 104 starts and runs 7; the other cluster
	// runs 1000 more ticks.
	f.exit(101)
	f.set(100, 1, "postgres", 12, 5, 50+40, 20)
	f.set(102, 100, "postgres", 45, 20, 0, 0)
	f.set(104, 100, "postgres", 4, 3, 0, 0)
	f.set(201, 200, "postgres", 1400, 1400, 0, 0)
	f.set(300, 1, "receiver", 170, 30, 0, 0)
	f.machine(1600)
	time.Sleep(10 * time.Millisecond)
	u := between(a, m.snap(300))
	if want := (2 + 40 + 25 + 7) / 100.0; !near(u.Postgres, want) {
		t.Errorf("postgres used %.2fs, want %.2fs", u.Postgres, want)
	}
	if !near(u.Server, 1.0) || !near(u.Busy, 6.0) || !near(u.Steal, 0.6) || u.Wall <= 0 {
		t.Errorf("server %.2fs, busy %.2fs, steal %.2fs, wall %.3fs", u.Server, u.Busy, u.Steal, u.Wall)
	}
}

// TestProcTotalOfARealChild: a child that burns CPU and exits is counted in
// its parent's reaped time.
func TestProcTotalOfARealChild(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	m := cpuMeter{proc: "/proc"}
	before := m.procTotal(os.Getpid(), true)
	// A fixed amount of work, not of time: the machine may be busy.
	start := time.Now()
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`)
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	used := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	after := m.procTotal(os.Getpid(), true)
	if got := after - before; got < used-0.05 || got > used+0.05+time.Since(start).Seconds() {
		t.Errorf("a child that used %.2fs of CPU added %.2fs to its parent's reaped time", used, got)
	}
}
