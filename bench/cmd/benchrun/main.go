// Command benchrun measures the receiver against two baselines on a fresh
// private PostgreSQL cluster with PostgreSQL's default durability, in one
// run, and writes the ratios to BENCHMARKS.md. scripts/bench.sh (make bench)
// builds the binaries and runs it.
//
// Phases (each: a warm-up, then a measured window):
//
//	1  new invoice.created events: the receiver, pgbench running the
//	   receiver's own transaction, the copied snippet
//	2  replays of finished events: the receiver, pgbench running the
//	   receiver's duplicate check
//	3  checkout.session.completed (paid) with a 200 ms fulfillment API,
//	   64 concurrent deliveries, DB_MAX_CONNS=8
//	5  256 concurrent deliveries (peak RSS), then half the peak throughput
//	   at a fixed arrival rate (p99)
//	4  5 million rows bulk-loaded into processed_events (and webhook_events)
//	   of a database of their own, then phase 1's receiver load on it and on
//	   phase 1's database, in two interleaved rounds
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/pglocal"
)

const (
	stripeSecret = "whsec_benchrun_0123456789abcdef"
	mib          = 1 << 20
)

type options struct {
	server, loadgen, snippet string
	out                      string
	phase, warmup            time.Duration
	concurrency              int
	rows                     int
	keep                     bool
	perf                     bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var o options
	flag.StringVar(&o.server, "server", "bin/server", "receiver binary")
	flag.StringVar(&o.loadgen, "loadgen", "bin/loadgen", "loadgen binary")
	flag.StringVar(&o.snippet, "snippet", "bin/snippet", "snippet binary")
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "report file")
	flag.DurationVar(&o.phase, "phase", 15*time.Second, "measured window of each phase")
	flag.DurationVar(&o.warmup, "warmup", 4*time.Second, "warm-up before each measured window")
	flag.IntVar(&o.concurrency, "concurrency", 16, "concurrency of phases 1, 2 and 4 (loadgen, pgbench clients, pool sizes)")
	flag.IntVar(&o.rows, "rows", 5_000_000, "rows bulk-loaded into processed_events for phase 4")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory and logs")
	flag.BoolVar(&o.perf, "perf", false, "record a perf CPU profile of the receiver in phase 1 and 4 (needs perf)")
	flag.Parse()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

// bench holds what every phase needs.
type bench struct {
	o       options
	cluster *pglocal.Cluster
	tmp     string
	pgbench string
	rep     *report
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchrun %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	for _, p := range []string{o.server, o.loadgen, o.snippet} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %w (run make bench, which builds it)", p, err)
		}
	}
	bin, err := pglocal.FindBinDir()
	if err != nil {
		return err
	}
	b := &bench{o: o, rep: newReport(o)}
	if b.pgbench, err = findPgbench(bin); err != nil {
		return err
	}
	b.tmp, err = os.MkdirTemp("", "benchrun")
	if err != nil {
		return err
	}
	if o.keep {
		logf("keeping %s", b.tmp)
	} else {
		defer os.RemoveAll(b.tmp)
	}
	pglog, err := os.Create(filepath.Join(b.tmp, "postgres.log"))
	if err != nil {
		return err
	}
	defer pglog.Close()

	start := time.Now()
	logf("starting a durable PostgreSQL cluster in %s", b.tmp)
	b.cluster, err = pglocal.Start(ctx, pglocal.Options{Dir: filepath.Join(b.tmp, "pg"), Durable: true, Log: pglog})
	if err != nil {
		return err
	}
	defer b.cluster.Stop(context.Background())
	if err := b.setup(ctx); err != nil {
		return err
	}

	phases := []func(context.Context) error{b.phase1, b.phase2, b.phase3, b.phase5, b.phase4}
	for _, ph := range phases {
		if err := ph(ctx); err != nil {
			return err
		}
	}
	b.rep.total = time.Since(start)
	text := b.rep.render()
	fmt.Print("\n" + b.rep.ratioTable())
	if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
		return err
	}
	logf("wrote %s in %s", o.out, b.rep.total.Round(time.Second))
	return nil
}

// setup enables pg_stat_statements when it is installed, creates and
// migrates one database per phase, and records the versions.
func (b *bench) setup(ctx context.Context) error {
	admin := b.cluster.URL("postgres")
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	_ = conn.QueryRow(ctx, `SELECT version()`).Scan(&b.rep.pgVersion)
	var avail bool
	_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_stat_statements')`).Scan(&avail)
	if avail {
		if _, err := conn.Exec(ctx, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`); err != nil {
			return err
		}
		_, _ = conn.Exec(ctx, `ALTER SYSTEM SET pg_stat_statements.track = 'all'`)
	}
	conn.Close(ctx)
	if avail {
		if err := b.cluster.Restart(ctx); err != nil {
			return err
		}
		b.rep.statements = true
	}
	for _, name := range []string{"recv", "pgb", "snip", "steps", "mem", "grown"} {
		if err := b.cluster.CreateDatabase(ctx, name); err != nil {
			return err
		}
		if err := db.Migrate(b.cluster.URL(name)); err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
		if avail {
			if err := b.exec(ctx, name, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) exec(ctx context.Context, dbname, sql string) error {
	conn, err := pgx.Connect(ctx, b.cluster.URL(dbname))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	if err != nil {
		return fmt.Errorf("%s: %w", firstLine(sql), err)
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// --- phases ---

func (b *bench) phase1(ctx context.Context) error {
	c := b.o.concurrency
	logf("phase 1: new invoice events at concurrency %d, two interleaved rounds", c)
	// Two rounds of receiver, pgbench, snippet, so that a slow minute of
	// the shared machine weighs on all three alike; each figure is the
	// mean of its two windows.
	for round := 1; round <= 2; round++ {
		suffix := fmt.Sprintf(" (round %d)", round)
		r, err := b.receiverLoad(ctx, "recv", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)}, "1 receiver"+suffix,
			loadArgs{event: "invoice", concurrency: c}, round == 1)
		if err != nil {
			return err
		}
		p, err := b.runPgbench(ctx, "pgb", "1 pgbench: receiver's transaction"+suffix, invoiceScript(), c)
		if err != nil {
			return err
		}
		s, err := b.snippetLoad(ctx, c, "1 copied snippet"+suffix)
		if err != nil {
			return err
		}
		b.rep.recvNew = merge(b.rep.recvNew, r)
		b.rep.snippet = merge(b.rep.snippet, s)
		b.rep.pgbNew.tps += p.tps / 2
		b.rep.pgbNew.latency += p.latency / 2
	}
	return nil
}

// merge pools two measured windows of the same load: deliveries and
// seconds add up, so its rate is the mean over both.
func merge(a, m measured) measured {
	if a.load.Seconds == 0 {
		return m
	}
	a.load.OK += m.load.OK
	a.load.Seconds += m.load.Seconds
	return a
}

func (b *bench) phase2(ctx context.Context) error {
	c := b.o.concurrency
	logf("phase 2: replays of finished events at concurrency %d", c)
	const events = 10000
	r, err := b.receiverLoad(ctx, "recv", map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)}, "2 receiver: replays",
		loadArgs{event: "invoice", concurrency: c, duplicates: 1, prime: 500}, true)
	if err != nil {
		return err
	}
	b.rep.recvReplay = r
	if err := b.exec(ctx, "pgb", fmt.Sprintf(`
INSERT INTO processed_events (event_key, source, status, kind, completed_at)
SELECT 'evt_rep' || g, 'stripe', 'done', 'event', now() FROM generate_series(1, %d) g`, events)); err != nil {
		return err
	}
	_ = b.exec(ctx, "pgb", `ANALYZE processed_events`)
	p, err := b.runPgbench(ctx, "pgb", "2 pgbench: receiver's duplicate check", replayScript(events), c)
	if err != nil {
		return err
	}
	b.rep.pgbReplay = p
	return nil
}

func (b *bench) phase3(ctx context.Context) error {
	const conc, conns, delay = 64, 8, 200 * time.Millisecond
	logf("phase 3: checkout events, fulfillment API answering in %s, concurrency %d, DB_MAX_CONNS=%d", delay, conc, conns)
	api, err := startFulfillmentAPI(delay)
	if err != nil {
		return err
	}
	defer api.close()
	sink, err := startSMTPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	env := map[string]string{
		"DB_MAX_CONNS":    strconv.Itoa(conns),
		"FULFILLMENT_URL": "http://" + api.addr,
		"SMTP_ADDR":       sink.addr,
	}
	r, err := b.receiverLoad(ctx, "steps", env, "3 receiver: checkout with steps",
		loadArgs{event: "checkout", concurrency: conc}, false)
	if err != nil {
		return err
	}
	b.rep.steps = r
	b.rep.stepsCalls, b.rep.stepsMails, b.rep.stepsConns = api.calls(), sink.count(), api.conns()
	return nil
}

func (b *bench) phase5(ctx context.Context) error {
	const conc = 256
	c := b.o.concurrency
	logf("phase 5: %d concurrent deliveries, then a fixed rate at half the peak", conc)
	env := map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)}
	r, err := b.receiverLoad(ctx, "mem", env, "5 receiver: 256 concurrent",
		loadArgs{event: "invoice", concurrency: conc}, false)
	if err != nil {
		return err
	}
	b.rep.conc256 = r
	peak := max(r.load.Throughput, b.rep.recvNew.load.Throughput)
	rate := peak / 2
	r2, err := b.receiverLoad(ctx, "mem", env, fmt.Sprintf("5 receiver: fixed %.0f/s", rate),
		loadArgs{event: "invoice", rate: rate}, false)
	if err != nil {
		return err
	}
	b.rep.halfRate = r2
	// The control: can the database itself commit the same transactions at
	// that rate with a p99 under 25 ms on this machine?
	if b.rep.pgbRateP99, err = b.pgbenchRateP99(ctx, "pgb", invoiceScript(), c, rate); err != nil {
		return err
	}
	logf("  %-42s p99 %.1fms", fmt.Sprintf("5 pgbench: receiver's transaction at %.0f/s", rate), b.rep.pgbRateP99)
	return nil
}

// pgbenchRateP99 runs script at a fixed rate for the measured window and
// returns the p99 latency in milliseconds, counted from each transaction's
// scheduled start as loadgen counts it (pgbench's time plus schedule lag,
// from its per-transaction log).
func (b *bench) pgbenchRateP99(ctx context.Context, dbname, script string, clients int, rate float64) (float64, error) {
	path := filepath.Join(b.tmp, "rate-"+dbname+".sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return 0, err
	}
	prefix := filepath.Join(b.tmp, "ratelog")
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(runtime.NumCPU()),
		"-R", strconv.FormatFloat(rate, 'f', 1, 64), "-T", strconv.Itoa(int(b.o.phase.Round(time.Second) / time.Second)),
		"-l", "--log-prefix", prefix, "-f", path,
		"-h", "127.0.0.1", "-p", strconv.Itoa(b.cluster.Port()), "-U", "postgres", dbname}
	cmd := exec.CommandContext(ctx, b.pgbench, args...)
	cmd.Dir = b.tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench %s: %w\n%s", strings.Join(args, " "), err, out)
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

func (b *bench) phase4(ctx context.Context) error {
	c := b.o.concurrency
	logf("bulk-loading %d rows into processed_events and webhook_events of a database of their own", b.o.rows)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	// Keys spread over the whole key space (md5), loaded in key order so
	// that the load itself is fast; new events then land all over the index,
	// as real ids do.
	wg.Go(func() {
		errs[0] = b.exec(ctx, "grown", fmt.Sprintf(`
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at)
SELECT 'evt_' || md5(g::text), 'stripe', 'done', 'event', now(), now()
FROM generate_series(1, %d) g ORDER BY 1`, b.o.rows))
	})
	wg.Go(func() {
		errs[1] = b.exec(ctx, "grown", fmt.Sprintf(`
INSERT INTO webhook_events (event_key, source, event_id, event_type, api_version, body, outcome)
SELECT 'evt_' || md5(g::text), 'stripe', 'evt_' || md5(g::text), 'invoice.created', '2023-10-16', '\x7b7d'::bytea, 'processed'
FROM generate_series(1, %d) g ORDER BY 1`, b.o.rows))
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b.rep.loadTime = time.Since(t0)
	t1 := time.Now()
	// Both databases start the rounds vacuumed, analysed and checkpointed.
	for _, st := range []struct{ db, sql string }{
		{"recv", `VACUUM ANALYZE`},
		{"grown", `VACUUM ANALYZE processed_events`},
		{"grown", `VACUUM ANALYZE webhook_events`},
		{"grown", `CHECKPOINT`},
	} {
		if err := b.exec(ctx, st.db, st.sql); err != nil {
			return err
		}
	}
	b.rep.vacuumTime = time.Since(t1)
	logf("loaded in %s, vacuumed and checkpointed in %s", b.rep.loadTime.Round(time.Second), b.rep.vacuumTime.Round(time.Second))
	b.rep.baseRows = b.countRows(ctx, "recv")
	b.rep.grownRows = b.countRows(ctx, "grown")

	// Phase 1's load on the table as the earlier phases left it and on the
	// grown one, in two interleaved rounds, so that a slow minute of the
	// shared machine weighs on both alike.
	logf("phase 4: growth; phase 1's load on %d rows and on %d rows, two interleaved rounds", b.rep.baseRows, b.rep.grownRows)
	env := map[string]string{"DB_MAX_CONNS": strconv.Itoa(c)}
	for round := 1; round <= 2; round++ {
		suffix := fmt.Sprintf(" (round %d)", round)
		base, err := b.receiverLoad(ctx, "recv", env, fmt.Sprintf("4 receiver: %d rows%s", b.rep.baseRows, suffix),
			loadArgs{event: "invoice", concurrency: c}, false)
		if err != nil {
			return err
		}
		grown, err := b.receiverLoad(ctx, "grown", env, fmt.Sprintf("4 receiver: %d rows%s", b.rep.grownRows, suffix),
			loadArgs{event: "invoice", concurrency: c}, round == 1)
		if err != nil {
			return err
		}
		b.rep.grownBase = merge(b.rep.grownBase, base)
		b.rep.grown = merge(b.rep.grown, grown)
	}
	conn, err := pgx.Connect(ctx, b.cluster.URL("grown"))
	if err == nil {
		_ = conn.QueryRow(ctx, `SELECT pg_size_pretty(pg_relation_size('processed_events_pkey'))`).Scan(&b.rep.grownIndex)
		conn.Close(ctx)
	}
	return nil
}

// countRows returns processed_events' row count in dbname (0 on error).
func (b *bench) countRows(ctx context.Context, dbname string) int64 {
	var n int64
	conn, err := pgx.Connect(ctx, b.cluster.URL(dbname))
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM processed_events`).Scan(&n)
	return n
}

// --- the receiver, the snippet and loadgen ---

type loadArgs struct {
	event       string
	concurrency int
	rate        float64
	duplicates  float64
	prime       int
}

// loadReport is the part of loadgen's -json report benchrun reads.
type loadReport struct {
	Deliveries int                                  `json:"deliveries"`
	OK         int                                  `json:"ok"`
	Seconds    float64                              `json:"seconds"`
	Throughput float64                              `json:"throughput"`
	LatencyMS  struct{ P50, P90, P99, Max float64 } `json:"latency_ms"`
	Status     map[string]int                       `json:"status"`
	Errors     map[string]int                       `json:"errors"`
	Dropped    int                                  `json:"dropped"`
	Rate       float64                              `json:"rate"`
}

// measured is one measured load against a receiver.
type measured struct {
	name       string
	load       loadReport
	peakRSS    int64 // bytes, VmHWM of the receiver at the end of the phase
	cpu        cpuUse
	statements string
	perf       string
}

func (b *bench) loadgen(ctx context.Context, url string, a loadArgs, d time.Duration) (loadReport, float64, error) {
	args := []string{"-url", url, "-secret", stripeSecret, "-event", a.event,
		"-duration", d.String(), "-json", "-progress=false"}
	if a.rate > 0 {
		args = append(args, "-rate", strconv.FormatFloat(a.rate, 'f', 1, 64))
	} else {
		args = append(args, "-concurrency", strconv.Itoa(a.concurrency))
	}
	if a.duplicates > 0 {
		args = append(args, "-duplicates", strconv.FormatFloat(a.duplicates, 'f', -1, 64))
	}
	if a.prime > 0 {
		args = append(args, "-prime", strconv.Itoa(a.prime))
	}
	cmd := exec.CommandContext(ctx, b.o.loadgen, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return loadReport{}, 0, fmt.Errorf("loadgen %s: %w", strings.Join(args, " "), err)
	}
	cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	var r loadReport
	if err := json.Unmarshal(out, &r); err != nil {
		return loadReport{}, 0, fmt.Errorf("loadgen report: %w", err)
	}
	return r, cpu, nil
}

// measure warms the server up with one loadgen run, then measures a second
// one, with the CPU of every process involved. before runs between the two.
func (b *bench) measure(ctx context.Context, url string, a loadArgs, serverPid int, before func()) (loadReport, int64, cpuUse, error) {
	if _, _, err := b.loadgen(ctx, url, a, b.o.warmup); err != nil {
		return loadReport{}, 0, cpuUse{}, err
	}
	if before != nil {
		before()
	}
	meter := startCPU(serverPid)
	sampler := sampleMemory(serverPid)
	r, client, err := b.loadgen(ctx, url, a, b.o.phase)
	peak := sampler()
	return r, peak, meter.stop(client), err
}

// receiverLoad starts the receiver on dbname with env, runs loadgen against
// it while sampling its memory, and stops it. With stats, the database's
// statement statistics for the measured run are kept.
func (b *bench) receiverLoad(ctx context.Context, dbname string, env map[string]string, name string, a loadArgs, stats bool) (measured, error) {
	m := measured{name: name}
	port, err := freePort()
	if err != nil {
		return m, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(b.tmp, "receiver-"+dbname+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return m, err
	}
	defer logFile.Close()
	cmd := exec.Command(b.o.server)
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+b.cluster.URL(dbname),
		"HTTP_ADDR="+addr,
		"STRIPE_WEBHOOK_SECRET="+stripeSecret,
		"GITHUB_WEBHOOK_SECRET=",
		"LOG_LEVEL=warn",
		"MAIL_DIR="+filepath.Join(b.tmp, "mail-"+dbname),
		"FULFILLMENT_URL=", "SMTP_ADDR=", "DB_MAX_CONNS=",
	)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return m, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	defer stop()
	if err := waitHealthy(ctx, "http://"+addr+"/healthz", 30*time.Second); err != nil {
		return m, fmt.Errorf("receiver did not start (log: %s): %w", tail(logPath), err)
	}

	var perfDone func() string
	m.load, m.peakRSS, m.cpu, err = b.measure(ctx, "http://"+addr+"/webhooks/stripe", a, cmd.Process.Pid, func() {
		if stats && b.rep.statements {
			_ = b.exec(ctx, dbname, `SELECT pg_stat_statements_reset()`)
		}
		if b.o.perf && stats {
			perfDone = startPerf(ctx, cmd.Process.Pid, b.o.phase, filepath.Join(b.tmp, "perf-"+strings.Fields(name)[0]+"-"+dbname))
		}
	})
	if err != nil {
		return m, err
	}
	if perfDone != nil {
		m.perf = perfDone()
	}
	if stats && b.rep.statements {
		m.statements = b.topStatements(ctx, dbname)
	}
	b.rep.add(m)
	logf("  %-42s %8.1f/s  p50 %6.1fms  p99 %7.1fms  rss %3d MiB  status %v",
		name, m.load.Throughput, m.load.LatencyMS.P50, m.load.LatencyMS.P99, m.peakRSS/mib, m.load.Status)
	return m, nil
}

func (b *bench) snippetLoad(ctx context.Context, c int, name string) (measured, error) {
	m := measured{name: name}
	port, err := freePort()
	if err != nil {
		return m, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(b.o.snippet, "-addr", addr, "-db", b.cluster.URL("snip"), "-secret", stripeSecret,
		"-max-conns", strconv.Itoa(c))
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return m, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	if err := waitListening(ctx, addr, 30*time.Second); err != nil {
		return m, fmt.Errorf("snippet did not start: %w", err)
	}
	m.load, m.peakRSS, m.cpu, err = b.measure(ctx, "http://"+addr+"/webhooks/stripe", loadArgs{event: "invoice", concurrency: c}, cmd.Process.Pid, nil)
	if err != nil {
		return m, err
	}
	b.rep.add(m)
	logf("  %-42s %8.1f/s  p50 %6.1fms  p99 %7.1fms  rss %3d MiB  status %v",
		m.name, m.load.Throughput, m.load.LatencyMS.P50, m.load.LatencyMS.P99, m.peakRSS/mib, m.load.Status)
	return m, nil
}

// topStatements is the statements that took the most database time since
// the last reset, as a Markdown table.
func (b *bench) topStatements(ctx context.Context, dbname string) string {
	conn, err := pgx.Connect(ctx, b.cluster.URL(dbname))
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
SELECT calls, round(total_exec_time::numeric, 0), round(mean_exec_time::numeric, 3),
       shared_blks_hit, shared_blks_read, wal_bytes, regexp_replace(query, '\s+', ' ', 'g')
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC LIMIT 8`)
	if err != nil {
		return ""
	}
	defer rows.Close()
	var sb strings.Builder
	sb.WriteString("| calls | total ms | mean ms | blks hit | blks read | WAL bytes | statement |\n|---:|---:|---:|---:|---:|---:|---|\n")
	for rows.Next() {
		var calls, hit, read int64
		var total, mean, wal float64
		var q string
		if err := rows.Scan(&calls, &total, &mean, &hit, &read, &wal, &q); err != nil {
			return ""
		}
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		fmt.Fprintf(&sb, "| %d | %.0f | %.3f | %d | %d | %.0f | `%s` |\n", calls, total, mean, hit, read, wal, strings.ReplaceAll(q, "|", "\\|"))
	}
	return sb.String()
}

// --- pgbench ---

type pgbenchResult struct {
	name    string
	tps     float64
	latency float64 // ms, average
	script  string
	clients int
	out     string
	cpu     cpuUse
	txns    int
}

var tpsRe = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
var txnsRe = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
var latRe = regexp.MustCompile(`latency average = ([0-9.]+) ms`)

func (b *bench) runPgbench(ctx context.Context, dbname, name, script string, clients int) (pgbenchResult, error) {
	res := pgbenchResult{name: name, script: script, clients: clients}
	path := filepath.Join(b.tmp, strings.Fields(name)[0]+"-"+dbname+"-"+strconv.Itoa(len(script))+".sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return res, err
	}
	var client float64
	pgbenchRun := func(d time.Duration) (string, error) {
		args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(runtime.NumCPU()),
			"-T", strconv.Itoa(int(d.Round(time.Second) / time.Second)), "-f", path,
			"-h", "127.0.0.1", "-p", strconv.Itoa(b.cluster.Port()), "-U", "postgres", dbname}
		cmd := exec.CommandContext(ctx, b.pgbench, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("pgbench %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		client = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
		return string(out), nil
	}
	if _, err := pgbenchRun(b.o.warmup); err != nil {
		return res, err
	}
	meter := startCPU(0)
	out, err := pgbenchRun(b.o.phase)
	if err != nil {
		return res, err
	}
	res.cpu = meter.stop(client)
	res.out = out
	mt := tpsRe.FindStringSubmatch(out)
	if mt == nil {
		return res, fmt.Errorf("pgbench output has no tps:\n%s", out)
	}
	res.tps, _ = strconv.ParseFloat(mt[1], 64)
	if mn := txnsRe.FindStringSubmatch(out); mn != nil {
		res.txns, _ = strconv.Atoi(mn[1])
	}
	if ml := latRe.FindStringSubmatch(out); ml != nil {
		res.latency, _ = strconv.ParseFloat(ml[1], 64)
	}
	b.rep.pgbench = append(b.rep.pgbench, res)
	logf("  %-42s %8.1f/s  latency avg %.1fms", name, res.tps, res.latency)
	return res, nil
}

// invoiceBody is an invoice.created event as loadgen sends it, for the size
// of the stored body. No ':' touches a word, so pgbench sees no variables.
const invoiceBody = `{
  "id": "evt_lgAAAAAAAAAAAAAAAAAAAAAA",
  "object": "event",
  "api_version": "2023-10-16",
  "created": 1764460800,
  "data": {
    "object": {
      "id": "in_lgAAAAAAAAAAAAAAAAAAAAAA",
      "object": "invoice",
      "status": "draft",
      "amount_due": 2000,
      "amount_paid": 0,
      "currency": "usd",
      "customer_email": "payer@example.com",
      "attempt_count": 0,
      "billing_reason": "subscription_cycle"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": "req_lgAAAAAAAAAAAAAA", "idempotency_key": null},
  "type": "invoice.created"
}`

// claimSQL is the receiver's first round trip for every delivery
// (internal/webhooks claims.go beginClaim): BEGIN, the claim with the
// stored body riding on it, and a read of the event's claims. %[1]s is the
// event key, %[2]s the body.
const claimSQL = `BEGIN;
WITH claim AS (
    INSERT INTO processed_events (event_key, source, status, kind, completed_at)
    VALUES (%[1]s, 'stripe', 'done', 'event', now())
    ON CONFLICT (event_key) DO NOTHING
    RETURNING event_key
)
INSERT INTO webhook_events (event_key, source, event_id, event_type, api_version, body, outcome)
SELECT event_key, 'stripe', %[1]s, 'invoice.created', NULLIF('2023-10-16', ''),
       convert_to('%[2]s', 'UTF8'), 'processed' FROM claim
ON CONFLICT (event_key) DO UPDATE SET outcome = EXCLUDED.outcome, error = NULL
RETURNING event_key;
SELECT event_key, kind, status, payload FROM processed_events WHERE event_key = %[1]s
UNION ALL
SELECT event_key, kind, status, payload FROM processed_events WHERE parent_key = %[1]s;
`

// invoiceScript is what the receiver sends for a new invoice.created event,
// statement for statement (claimSQL, internal/invoices EnsurePending,
// COMMIT), with the same parameters and the same stored body.
func invoiceScript() string {
	return `\set r random(1, 9000000000000000000)
` + fmt.Sprintf(claimSQL, `'evt_pgb' || :r`, invoiceBody) + `INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
VALUES ('in_pgb' || :r, 'pending', 2000, 0, 'usd', NULLIF('payer@example.com', ''))
ON CONFLICT (stripe_invoice_id) DO NOTHING;
COMMIT;
`
}

// replayScript is the receiver's duplicate check for an event already done
// (claimSQL, whose claim conflicts, then ROLLBACK).
func replayScript(events int) string {
	return fmt.Sprintf(`\set n random(1, %d)
`, events) + fmt.Sprintf(claimSQL, `'evt_rep' || :n`, invoiceBody) + "ROLLBACK;\n"
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

func waitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %s: %v", url, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitListening(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

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
	go func() {
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
	}()
	return func() int64 {
		read()
		close(done)
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

// startPerf records the receiver's CPU for the measured window (after the
// warm-up) and returns a function that waits for perf and returns the top
// of its report.
func startPerf(ctx context.Context, pid int, phase time.Duration, out string) func() string {
	if _, err := exec.LookPath("perf"); err != nil {
		return nil
	}
	done := make(chan string, 1)
	go func() {
		secs := strconv.Itoa(max(int((phase - 2*time.Second).Seconds()), 1))
		rec := exec.CommandContext(ctx, "perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", out+".data", "--", "sleep", secs)
		if b, err := rec.CombinedOutput(); err != nil {
			done <- "perf record: " + err.Error() + "\n" + string(b)
			return
		}
		rep, _ := exec.CommandContext(ctx, "perf", "report", "-i", out+".data", "--stdio", "--no-children",
			"--percent-limit", "1.5", "-g", "none", "--sort", "symbol").Output()
		_ = os.WriteFile(out+".txt", rep, 0o644)
		done <- string(rep)
	}()
	return func() string { return <-done }
}
