package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clkTck is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const clkTck = 100

// cpuUse is where the CPU went during one measured window, in seconds.
type cpuUse struct {
	Client, Server, Postgres float64 // loadgen or pgbench; receiver or snippet; every postgres process
	Busy, Wall               float64 // the whole machine's busy CPU time; elapsed time
}

// cpuMeter measures the CPU of one server process and of every postgres
// process (backends come and go, so they are sampled every 200 ms) and the
// machine's busy time.
type cpuMeter struct {
	server    int
	start     time.Time
	busy0     float64
	srv0      float64
	mu        sync.Mutex
	pgFirst   map[int]float64
	pgLast    map[int]float64
	done      chan struct{}
	wg        sync.WaitGroup
	firstScan bool
}

func startCPU(serverPid int) *cpuMeter {
	m := &cpuMeter{server: serverPid, start: time.Now(), pgFirst: map[int]float64{}, pgLast: map[int]float64{},
		done: make(chan struct{}), firstScan: true}
	m.busy0 = machineBusy()
	if serverPid > 0 {
		m.srv0 = procCPU(serverPid)
	}
	m.scan()
	m.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
				m.scan()
			}
		}
	})
	return m
}

// scan reads every postgres process's CPU time. A process first seen after
// the start began during the window, so all of its time counts.
func (m *cpuMeter) scan() {
	entries, _ := os.ReadDir("/proc")
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		t := procCPU(pid)
		if _, ok := m.pgFirst[pid]; !ok {
			if m.firstScan {
				m.pgFirst[pid] = t
			} else {
				m.pgFirst[pid] = 0
			}
		}
		m.pgLast[pid] = t
	}
	m.firstScan = false
}

// stop ends the measurement; client is the client's CPU time, measured by
// the caller.
func (m *cpuMeter) stop(client float64) cpuUse {
	m.scan()
	close(m.done)
	m.wg.Wait()
	u := cpuUse{Client: client, Wall: time.Since(m.start).Seconds(), Busy: machineBusy() - m.busy0}
	if m.server > 0 {
		u.Server = procCPU(m.server) - m.srv0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, last := range m.pgLast {
		u.Postgres += last - m.pgFirst[pid]
	}
	return u
}

// procCPU is the user+system CPU time of pid, in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: fields are counted after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64) // field 14, utime
	st, _ := strconv.ParseFloat(f[12], 64) // field 15, stime
	return (ut + st) / clkTck
}

// machineBusy is the machine's total non-idle CPU time, in seconds.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user
			break
		}
		busy += n
	}
	return busy / clkTck
}
