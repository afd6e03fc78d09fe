package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A cost window measures what one delivery costs a server beyond its
// throughput: the round trips and bytes it exchanges with PostgreSQL, the
// allocations it makes, and where its CPU and allocations go (pprof
// profiles). It runs the profiling builds (bench/cmd/profserver for the
// receiver, the snippets with -pprof), each started afresh on its phase's
// database through a counting proxy, for one loadgen window at the phase's
// concurrency. Its throughput is not reported: the proxy adds a hop to
// every round trip.

// memProfileRate is the cost windows' runtime.MemProfileRate (GODEBUG
// memprofilerate): one allocation profiled per this many bytes allocated.
// Each sample costs a stack unwind: at 8 KB the unwinder took a tenth of
// the receiver's CPU profile; at 64 KB about one sample in two deliveries,
// thousands in a window, for about 1 %.
const memProfileRate = 64 << 10

func joinGODEBUG(cur, add string) string {
	if cur == "" {
		return add
	}
	return cur + "," + add
}

// serverKind is which server a cost window runs.
type serverKind int

const (
	kindReceiver serverKind = iota
	kindNet
	kindEcho
)

// costSpec is one server's cost window.
type costSpec struct {
	side   string
	kind   serverKind
	dbname string
	a      loadArgs
}

// costResult is what one cost window measured; per-delivery figures are
// over the deliveries of the window.
type costResult struct {
	side, phase string
	n           int
	roundTrips  float64 // client-to-server flights on the PostgreSQL connections
	sent, recvd float64 // bytes to and from PostgreSQL
	mallocs     float64 // heap allocations (runtime.MemStats.Mallocs)
	allocBytes  float64 // bytes allocated (TotalAlloc)
	serverCPU   float64 // seconds over the window, the profiling build's
	cpuProfile  string  // pprof files
	allocProf   string
	cpuCats     []share     // the CPU profile by category
	allocCats   []share     // the allocation profile (objects) by category
	flush       groupCommit // over the server's life; zero when not counted
	err         error
}

func (c costResult) per(x float64) float64 {
	if c.n == 0 {
		return 0
	}
	return x / float64(c.n)
}

// costWindows runs each spec's cost window in turn; a failed window is
// recorded, not fatal.
func (b *bench) costWindows(ctx context.Context, phase string, specs []costSpec) []costResult {
	if err := os.MkdirAll(b.o.profiles, 0o755); err != nil {
		logf("cost windows: %v", err)
		return nil
	}
	var out []costResult
	for _, sp := range specs {
		r := b.costWindow(ctx, phase, sp)
		if r.err != nil {
			logf("  %s cost %-30s failed: %v", phase, sp.side, r.err)
		} else {
			logf("  %s cost %-30s %d deliveries: %.2f round trips, %.0f B sent, %.0f allocations, %.1f KB allocated, %.0f µs server CPU per delivery",
				phase, sp.side, r.n, r.per(r.roundTrips), r.per(r.sent), r.per(r.mallocs), r.per(r.allocBytes)/1024, r.per(r.serverCPU)*1e6)
		}
		out = append(out, r)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

func (b *bench) costWindow(ctx context.Context, phase string, sp costSpec) (r costResult) {
	r = costResult{side: sp.side, phase: phase}
	proxy, err := startCountingProxy(fmt.Sprintf("127.0.0.1:%d", b.cluster.Port()))
	if err != nil {
		r.err = err
		return r
	}
	defer proxy.close()
	// The database's own URL (its password too: the receiver's migrations
	// log in with it), through the proxy.
	u, err := url.Parse(b.url(sp.dbname))
	if err != nil {
		r.err = err
		return r
	}
	u.Host = proxy.addr()
	dbURL := u.String()
	port, err := freePort()
	if err != nil {
		r.err = err
		return r
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := freePort()
	if err != nil {
		r.err = err
		return r
	}
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	var cmd *exec.Cmd
	switch sp.kind {
	case kindReceiver:
		cmd = exec.Command(b.o.profserver)
		cmd.Env = b.receiverEnv(sp.dbname, addr, map[string]string{
			"DATABASE_URL": dbURL, "DB_MAX_CONNS": strconv.Itoa(b.o.concurrency), "PPROF_ADDR": pprofAddr})
	case kindNet:
		cmd = snippetCmd(b.o.snippetNet, addr, dbURL, b.o.concurrency, "-pprof", pprofAddr)
	case kindEcho:
		cmd = snippetCmd(b.o.snippet, addr, dbURL, b.o.concurrency, "-pprof", pprofAddr)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	// Go samples one allocation per 512 KB by default: a few hundred
	// samples in a window.
	cmd.Env = append(cmd.Env, "GODEBUG="+joinGODEBUG(os.Getenv("GODEBUG"), fmt.Sprintf("memprofilerate=%d", memProfileRate)))
	before := b.quietCounts(ctx, sp.dbname)
	srv, err := b.startServer(ctx, sp.side+" (cost "+phase+")", addr, cmd)
	if err != nil {
		r.err = err
		return r
	}
	defer srv.stop()
	if err := b.warm(ctx, srv, sp.a); err != nil {
		r.err = err
		return r
	}

	base := filepath.Join(b.o.profiles, fmt.Sprintf("phase%s-%s", phase, fileSafe.ReplaceAllString(strings.TrimSpace(sp.side), "-")))
	r.cpuProfile, r.allocProf = base+".cpu.pb.gz", base+".allocs.pb.gz"
	secs := int(b.o.costTime.Round(time.Second) / time.Second)
	var m0, m1 memStats
	var p0, p1 proxyCounts
	var wg sync.WaitGroup
	var profErr [2]error
	a := sp.a
	a.warmup = b.o.slotWarmup
	a.onMeasuring = func() {
		m0, _ = readMemStats(pprofAddr)
		p0 = proxy.counts()
		wg.Go(func() {
			profErr[0] = fetch(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, secs), r.cpuProfile)
		})
		wg.Go(func() {
			profErr[1] = fetch(fmt.Sprintf("http://%s/debug/pprof/allocs?seconds=%d", pprofAddr, secs), r.allocProf)
		})
	}
	a.onMeasured = func() {
		p1 = proxy.counts()
		m1, _ = readMemStats(pprofAddr)
	}
	s, err := b.loadgen(ctx, srv, a, time.Duration(secs)*time.Second)
	wg.Wait()
	if err != nil {
		r.err = err
		return r
	}
	r.n = s.n
	r.roundTrips = float64(p1.roundTrips - p0.roundTrips)
	r.sent, r.recvd = float64(p1.sent-p0.sent), float64(p1.recvd-p0.recvd)
	r.mallocs, r.allocBytes = float64(m1.Mallocs-m0.Mallocs), float64(m1.TotalAlloc-m0.TotalAlloc)
	r.serverCPU = s.cpu.Server
	// The server's whole life (its warm-up too) at one concurrency: its
	// commits and the cluster's WAL flushes, read once its connections
	// are gone.
	srv.stop()
	if g, ok := flushSpan(sp.side, 0, before, b.quietCounts(ctx, sp.dbname)); ok {
		r.flush = g
	}
	for i, e := range profErr {
		if e != nil {
			r.err = fmt.Errorf("profile %d: %w", i, e)
			return r
		}
	}
	r.cpuCats, err = profileShares(ctx, r.cpuProfile, "")
	if err != nil {
		logf("  %s cost %s: CPU profile not read: %v", phase, sp.side, err)
	}
	r.allocCats, err = profileShares(ctx, r.allocProf, "alloc_objects")
	if err != nil {
		logf("  %s cost %s: allocation profile not read: %v", phase, sp.side, err)
	}
	return r
}

// memStats are the counters of runtime.MemStats that a cost window reads
// from expvar's /debug/vars.
type memStats struct {
	Mallocs, TotalAlloc uint64
}

func readMemStats(addr string) (memStats, error) {
	resp, err := http.Get("http://" + addr + "/debug/vars")
	if err != nil {
		return memStats{}, err
	}
	defer resp.Body.Close()
	var v struct {
		MemStats memStats `json:"memstats"`
	}
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v.MemStats, err
}

// fetch writes url's body to path.
func fetch(url, path string) error {
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("%s: %s %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// countingProxy forwards TCP connections to PostgreSQL and counts, over
// all of them, the bytes each way and the round trips: a round trip starts
// each time the client sends after the server last did (or first), so that
// a pipelined batch, however many messages and writes it takes, counts as
// one.
type countingProxy struct {
	ln       net.Listener
	upstream string
	rt       atomic.Int64
	up, down atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

type proxyCounts struct{ roundTrips, sent, recvd int64 }

func startCountingProxy(upstream string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

func (p *countingProxy) counts() proxyCounts {
	return proxyCounts{p.rt.Load(), p.up.Load(), p.down.Load()}
}

func (p *countingProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = true, true
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, u) })
	}
}

// pipe copies both ways until either side closes.
func (p *countingProxy) pipe(client, server net.Conn) {
	var mu sync.Mutex
	clientLast := false // the client sent last
	copyDir := func(dst, src net.Conn, fromClient bool) {
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				mu.Lock()
				if fromClient && !clientLast {
					p.rt.Add(1)
				}
				clientLast = fromClient
				mu.Unlock()
				if fromClient {
					p.up.Add(int64(n))
				} else {
					p.down.Add(int64(n))
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		client.Close()
		server.Close()
	}
	var wg sync.WaitGroup
	wg.Go(func() { copyDir(server, client, true) })
	copyDir(client, server, false)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

func (p *countingProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
