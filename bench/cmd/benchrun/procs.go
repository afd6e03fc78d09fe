package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paywebhooks/receiver/bench/pgbench"
)

// server is a receiver or the snippet, running for a whole phase.
type server struct {
	name    string
	url     string // base URL, http://127.0.0.1:port
	pid     int
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// stop sends SIGTERM and waits up to 30 s before killing.
func (s *server) stop() {
	if s == nil || s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// receiverEnv is the receiver's configuration in every phase; env adds to it.
func (b *bench) receiverEnv(dbname, addr string, env map[string]string) []string {
	base := map[string]string{
		"DATABASE_URL":          b.url(dbname),
		"HTTP_ADDR":             addr,
		"STRIPE_WEBHOOK_SECRET": stripeSecret,
		"GITHUB_WEBHOOK_SECRET": "",
		"LOG_LEVEL":             "warn",
		"MAIL_DIR":              filepath.Join(b.tmp, "mail-"+dbname),
		"FULFILLMENT_URL":       "",
		"SMTP_ADDR":             "",
		"DB_MAX_CONNS":          "",
	}
	for k, v := range env {
		base[k] = v
	}
	out := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, ours := base[k]
		return ours
	})
	for _, k := range sortedKeys(base) {
		out = append(out, k+"="+base[k])
	}
	return out
}

// startReceiver starts the receiver binary on dbname and waits for /healthz.
func (b *bench) startReceiver(ctx context.Context, name, dbname string, env map[string]string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(b.o.server)
	cmd.Env = b.receiverEnv(dbname, addr, env)
	return b.startServer(ctx, name, addr, cmd)
}

// startSnippet starts a copied snippet (binary bin: b.o.snippetNet or
// b.o.snippet) on the database at dbURL with a pool of conns; extra goes
// to its command line (-pprof).
func (b *bench) startSnippet(ctx context.Context, name, bin, dbURL string, conns int, extra ...string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	return b.startServer(ctx, name, addr, snippetCmd(bin, addr, dbURL, conns, extra...))
}

func snippetCmd(bin, addr, dbURL string, conns int, extra ...string) *exec.Cmd {
	args := append([]string{"-addr", addr, "-db", dbURL, "-secret", stripeSecret, "-max-conns", strconv.Itoa(conns)}, extra...)
	return exec.Command(bin, args...)
}

func (b *bench) startServer(ctx context.Context, name, addr string, cmd *exec.Cmd) (*server, error) {
	logPath := filepath.Join(b.tmp, "server-"+fileSafe.ReplaceAllString(name, "-")+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	s := &server{name: name, url: "http://" + addr, pid: cmd.Process.Pid, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(s.done) }()
	if err := waitHealthy(ctx, s, 60*time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s did not start (log %s):\n%s\n%w", name, logPath, tail(logPath), err)
	}
	return s, nil
}

func waitHealthy(ctx context.Context, s *server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if s.exited() {
			return errors.New("it exited")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %s: %v", s.url, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// --- loadgen ---

type loadArgs struct {
	event       string
	concurrency int
	rate        float64
	pool        int
	seed        uint64
	prime       int
	customers   int           // loadgen -customers
	warmup      time.Duration // loadgen's own warm-up, not measured

	// Called when loadgen's measured window starts and ends (the cost
	// windows' counters and profiles).
	onMeasuring, onMeasured func()
}

// loadReport is the part of loadgen's -json report benchrun reads.
type loadReport struct {
	Deliveries int            `json:"deliveries"`
	OK         int            `json:"ok"`
	Seconds    float64        `json:"seconds"`
	LatencyMS  latency        `json:"latency_ms"`
	Status     map[string]int `json:"status"`
	Errors     map[string]int `json:"errors"`
	Dropped    int            `json:"dropped"`
	BodyBytes  float64        `json:"body_bytes_mean"`
	CPUSeconds float64        `json:"cpu_seconds"`
}

// loadgen runs loadgen against s for d and measures the window: loadgen's
// report (with its own CPU), and the CPU of the server and of the cluster
// between loadgen's marks: after its warm-up, until every delivery in
// flight has finished.
func (b *bench) loadgen(ctx context.Context, s *server, a loadArgs, d time.Duration) (sample, error) {
	args := []string{"-url", s.url + "/webhooks/stripe", "-secret", stripeSecret, "-event", a.event,
		"-duration", d.String(), "-json", "-progress=false", "-marks"}
	if a.rate > 0 {
		args = append(args, "-rate", strconv.FormatFloat(a.rate, 'f', 1, 64), "-max-inflight", "2000")
	} else {
		args = append(args, "-concurrency", strconv.Itoa(a.concurrency))
	}
	if a.pool > 0 {
		args = append(args, "-pool", strconv.Itoa(a.pool), "-seed", strconv.FormatUint(a.seed, 10))
	}
	if a.prime > 0 {
		args = append(args, "-prime", strconv.Itoa(a.prime))
	}
	if a.customers > 0 {
		args = append(args, "-customers", strconv.Itoa(a.customers))
	}
	if a.warmup > 0 {
		args = append(args, "-warmup", a.warmup.String())
	}
	cmd := exec.CommandContext(ctx, b.o.loadgen, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return sample{}, err
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	var s0, s1 cpuSnap
	var w0, w1 uint64
	var w0ok, w1ok bool
	var locks lockWaits
	var other []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		switch line := sc.Text(); line {
		case "loadgen: measuring":
			b.locks.start()
			w0, w0ok = b.wal.lsn()
			s0 = b.cpu.snap(s.pid)
			if a.onMeasuring != nil {
				a.onMeasuring()
			}
		case "loadgen: measured":
			s1 = b.cpu.snap(s.pid)
			w1, w1ok = b.wal.lsn()
			locks = b.locks.finish()
			if a.onMeasured != nil {
				a.onMeasured()
			}
		default:
			other = append(other, line)
		}
	}
	// loadgen exits 1 when a measured delivery failed, after its report:
	// the sample counts only what was answered 2xx, and its failures are
	// in the report (r.Status, r.Errors), so that exit is a sample too.
	// Any other failure, or no report, stops the phase.
	var r loadReport
	werr := cmd.Wait()
	var exit *exec.ExitError
	if werr != nil && (!errors.As(werr, &exit) || exit.ExitCode() != 1 || json.Unmarshal([]byte(stdout.String()), &r) != nil) {
		return sample{}, fmt.Errorf("loadgen %s: %w\n%s", strings.Join(args, " "), werr, strings.Join(other, "\n"))
	}
	if werr == nil {
		if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
			return sample{}, fmt.Errorf("loadgen report: %w", err)
		}
	}
	smp := sample{n: r.Deliveries, ok: r.OK, secs: r.Seconds, lat: r.LatencyMS, bodyBytes: r.BodyBytes,
		status: r.Status, errors: r.Errors, dropped: r.Dropped, wal: walSpan(w0, w1, w0ok, w1ok), locks: locks}
	if r.Seconds > 0 {
		smp.rate = float64(r.OK) / r.Seconds
	}
	if !s0.at.IsZero() && !s1.at.IsZero() {
		smp.cpu = between(s0, s1)
	}
	smp.cpu.Client = r.CPUSeconds
	return smp, nil
}

// printBody asks loadgen for the body of one event.
func (b *bench) printBody(ctx context.Context, event string) (string, error) {
	out, err := exec.CommandContext(ctx, b.o.loadgen, "-event", event, "-print-body").Output()
	if err != nil {
		return "", fmt.Errorf("loadgen -print-body: %w", err)
	}
	return string(out), nil
}

// --- pgbench ---

var fileSafe = regexp.MustCompile(`[^A-Za-z0-9.]+`)

var (
	tpsRe  = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	txnsRe = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
	latRe  = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
)

// pgbenchArgs is pgbench's command line for script on the database at url
// in query mode (prepared, as pgx runs statements; extended, the unnamed
// statements a transaction-mode PgBouncer 1.18 allows); extra goes before
// the connection's arguments.
func (b *bench) pgbenchArgs(url, mode string, sc pgbench.Script, clients int, d time.Duration, body string, extra ...string) []string {
	args := []string{"-n", "-M", mode, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, runtime.NumCPU())),
		"-T", strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))), "-f", b.scriptPath(sc)}
	if sc.Body {
		args = append(args, "-D", "body="+body)
	}
	args = append(args, extra...)
	return append(args, url)
}

// scriptPath writes the script where pgbench reads it, once.
func (b *bench) scriptPath(sc pgbench.Script) string {
	p := filepath.Join(b.tmp, "pgbench-"+sc.File)
	if _, err := os.Stat(p); err != nil {
		_ = os.WriteFile(p, []byte(sc.Text()), 0o644)
	}
	return p
}

// pgbench runs script for d (whole seconds) at clients clients and measures
// it: tps without connection time, and the CPU of pgbench and of the
// cluster over the run.
func (b *bench) pgbench(ctx context.Context, dbname string, sc pgbench.Script, clients int, d time.Duration) (sample, error) {
	return b.pgbenchOn(ctx, b.url(dbname), "prepared", sc, clients, d)
}

// pgbenchOn is pgbench on the database at url (through a pooler, say) in
// query mode mode.
func (b *bench) pgbenchOn(ctx context.Context, url, mode string, sc pgbench.Script, clients int, d time.Duration) (sample, error) {
	args := b.pgbenchArgs(url, mode, sc, clients, d, b.invoiceBody)
	cmd := exec.CommandContext(ctx, b.pgbenchBin, args...)
	b.locks.start()
	w0, w0ok := b.wal.lsn()
	s0 := b.cpu.snap(0)
	out, err := cmd.CombinedOutput()
	locks := b.locks.finish()
	// Backends exit once pgbench has hung up: let the postmaster reap them,
	// so that their last CPU lands in this window.
	time.Sleep(30 * time.Millisecond)
	s1 := b.cpu.snap(0)
	w1, w1ok := b.wal.lsn()
	if err != nil {
		return sample{}, fmt.Errorf("pgbench %s: %w\n%s", sc.File, err, out)
	}
	res := sample{pgbench: true, cpu: between(s0, s1), wal: walSpan(w0, w1, w0ok, w1ok), locks: locks}
	res.cpu.Client = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if mn := txnsRe.FindSubmatch(out); mn != nil {
		res.n, _ = strconv.Atoi(string(mn[1]))
		res.ok = res.n
	}
	m := tpsRe.FindSubmatch(out)
	switch {
	case m == nil && res.n == 0 && txnsRe.Match(out):
		// Nothing committed in the run (a machine so busy that the
		// connections took all of it): a slot of 0/s.
		return res, nil
	case m == nil:
		return sample{}, fmt.Errorf("pgbench output has no tps:\n%s", out)
	}
	res.rate, _ = strconv.ParseFloat(string(m[1]), 64)
	if ml := latRe.FindSubmatch(out); ml != nil {
		res.lat.P50, _ = strconv.ParseFloat(string(ml[1]), 64)
	}
	if res.rate > 0 {
		res.secs = float64(res.n) / res.rate
	}
	return res, nil
}

// pgbenchRateP99 runs script at a fixed rate for d and returns the p99
// latency in milliseconds, counted from each transaction's scheduled start
// as loadgen counts it (pgbench's time plus schedule lag, from its
// per-transaction log).
func (b *bench) pgbenchRateP99(ctx context.Context, dbname string, sc pgbench.Script, clients int, rate float64, d time.Duration) (float64, error) {
	prefix := filepath.Join(b.tmp, "ratelog")
	args := b.pgbenchArgs(b.url(dbname), "prepared", sc, clients, d, b.invoiceBody,
		"-R", strconv.FormatFloat(rate, 'f', 1, 64), "-l", "--log-prefix", prefix)
	cmd := exec.CommandContext(ctx, b.pgbenchBin, args...)
	cmd.Dir = b.tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench -R: %w\n%s", err, out)
	}
	logs, _ := filepath.Glob(prefix + ".*")
	var lat []float64
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 {
				continue
			}
			us, _ := strconv.ParseFloat(f[2], 64)
			if len(f) >= 7 {
				lag, _ := strconv.ParseFloat(f[6], 64)
				us += lag
			}
			lat = append(lat, us/1000)
		}
		_ = os.Remove(l)
	}
	if len(lat) == 0 {
		return 0, errors.New("pgbench wrote no transaction log")
	}
	sort.Float64s(lat)
	return lat[min(len(lat)-1, int(float64(len(lat))*0.99))], nil
}

// --- memory ---

// sampleMemory reads /proc/<pid>/status every 100 ms; the returned function
// stops sampling and returns the peak resident set size (the larger of the
// sampled VmRSS and the kernel's VmHWM high-water mark), in bytes.
func sampleMemory(pid int) func() int64 {
	done := make(chan struct{})
	var peak int64
	var mu sync.Mutex
	read := func() {
		rss, hwm := procStatus(pid)
		mu.Lock()
		peak = max(peak, rss, hwm)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		read()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func procStatus(pid int) (rss, hwm int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) < 1 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "VmHWM":
			hwm = n * 1024
		}
	}
	return rss, hwm
}

// --- perf ---

// startPerf records pid's CPU profile until the returned function is
// called, which returns the top of perf's report ("" without perf).
func startPerf(pid int, out string) func() string {
	if _, err := exec.LookPath("perf"); err != nil {
		return func() string { return "" }
	}
	rec := exec.Command("perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", out+".data")
	rec.Stdout, rec.Stderr = io.Discard, io.Discard
	if err := rec.Start(); err != nil {
		return func() string { return "" }
	}
	return func() string {
		_ = rec.Process.Signal(os.Interrupt)
		_ = rec.Wait()
		rep, _ := exec.Command("perf", "report", "-i", out+".data", "--stdio", "--no-children",
			"--percent-limit", "1.5", "-g", "none", "--sort", "symbol").Output()
		_ = os.WriteFile(out+".txt", rep, 0o644)
		return string(rep)
	}
}

// --- helpers ---

// findPgbench looks next to the server binaries, then on PATH, then in
// Debian's versioned directories.
func findPgbench(serverBin string) (string, error) {
	if p := filepath.Join(serverBin, "pgbench"); fileExists(p) {
		return p, nil
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench"); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", errors.New("pgbench not found (install postgresql-client or the contrib package)")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
