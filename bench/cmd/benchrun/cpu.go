package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clkTck is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const clkTck = 100

// cpuUse is where the CPU went during one measured window, in seconds. Only
// the benchmark's own processes are counted: the client (loadgen or
// pgbench), the server (receiver or snippet), the postgres processes of
// the benchmark's own cluster and its PgBouncer (phase 7). Busy is the
// whole machine's, so that Busy − ours is what other work on the machine
// took meanwhile.
type cpuUse struct {
	Client, Server, Postgres, Pooler float64
	Busy, Steal, Wall                float64 // machine busy CPU time over all cores; stolen by the hypervisor; elapsed time
}

func (u cpuUse) ours() float64 { return u.Client + u.Server + u.Postgres + u.Pooler }

func (u cpuUse) add(v cpuUse) cpuUse {
	return cpuUse{u.Client + v.Client, u.Server + v.Server, u.Postgres + v.Postgres, u.Pooler + v.Pooler,
		u.Busy + v.Busy, u.Steal + v.Steal, u.Wall + v.Wall}
}

// cpuSnap is the CPU counters at one instant.
type cpuSnap struct {
	at       time.Time
	server   float64 // the server process; 0 without one
	postgres float64 // the cluster's processes, see clusterCPU
	pooler   float64 // the PgBouncer process; 0 without one
	busy     float64 // the machine
	steal    float64 // the machine's time stolen by the hypervisor
}

// cpuMeter takes snapshots of the benchmark's own processes.
type cpuMeter struct {
	proc    string // /proc
	dataDir string // the cluster's data directory, which holds postmaster.pid
	pooler  int    // PgBouncer's pid while phase 7 runs it; 0 otherwise
}

func (m cpuMeter) snap(serverPid int) cpuSnap {
	s := cpuSnap{at: time.Now()}
	s.busy, s.steal = m.machine()
	if serverPid > 0 {
		s.server = m.procTotal(serverPid, false)
	}
	s.postgres = m.clusterCPU()
	if m.pooler > 0 {
		s.pooler = m.procTotal(m.pooler, false)
	}
	return s
}

// between is the CPU used from a to b; the client's share is the caller's.
func between(a, b cpuSnap) cpuUse {
	return cpuUse{
		Server:   max(b.server-a.server, 0),
		Postgres: max(b.postgres-a.postgres, 0),
		Pooler:   max(b.pooler-a.pooler, 0),
		Busy:     max(b.busy-a.busy, 0),
		Steal:    max(b.steal-a.steal, 0),
		Wall:     b.at.Sub(a.at).Seconds(),
	}
}

// clusterCPU is the CPU time of the benchmark's cluster so far: the
// postmaster named by the data directory's postmaster.pid, with the time of
// every child it has reaped (cutime, cstime), plus every live descendant's.
// The difference of two snapshots is then exactly the time the cluster used
// in between, however many backends started or exited meanwhile, and no
// other PostgreSQL on the machine is counted.
func (m cpuMeter) clusterCPU() float64 {
	pm := m.postmasterPID()
	if pm <= 0 {
		return 0
	}
	total := m.procTotal(pm, true)
	for _, pid := range m.descendants(pm) {
		total += m.procTotal(pid, true)
	}
	return total
}

func (m cpuMeter) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(m.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// descendants lists every process below pid, from each process's parent in
// /proc/<pid>/stat.
func (m cpuMeter) descendants(root int) []int {
	entries, _ := os.ReadDir(m.proc)
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := m.statFields(pid)
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1]) // field 4
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which may hold spaces and parentheses): field 3, state, is [0].
func (m cpuMeter) statFields(pid int) []string {
	b, err := os.ReadFile(filepath.Join(m.proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// procTotal is pid's user+system CPU time in seconds; with reaped, also
// that of the children it has waited for.
func (m cpuMeter) procTotal(pid int, reaped bool) float64 {
	f := m.statFields(pid)
	if len(f) < 15 {
		return 0
	}
	last := 12 // fields 14 utime, 15 stime
	if reaped {
		last = 14 // 16 cutime, 17 cstime
	}
	var t float64
	for i := 11; i <= last; i++ {
		n, _ := strconv.ParseFloat(f[i], 64)
		t += n
	}
	return t / clkTck
}

// machine is the machine's total CPU time in use (user, nice, system, irq,
// softirq) and stolen by the hypervisor, in seconds.
func (m cpuMeter) machine() (busy, steal float64) {
	b, err := os.ReadFile(filepath.Join(m.proc, "stat"))
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		switch {
		case i == 3 || i == 4: // idle, iowait
		case i == 7:
			steal = n
		case i < 7: // guest time (8, 9) is already in user
			busy += n
		}
	}
	return busy / clkTck, steal / clkTck
}
