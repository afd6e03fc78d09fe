package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// report collects every measurement of the run and renders BENCHMARKS.md.
type report struct {
	o          options
	started    time.Time
	total      time.Duration
	pgVersion  string
	statements bool

	runs    []measured
	pgbench []pgbenchResult

	recvNew, snippet, recvReplay       measured
	steps, conc256, halfRate, grown    measured
	pgbRateP99                         float64 // ms, pgbench at the same fixed rate
	pgbNew, pgbReplay                  pgbenchResult
	stepsCalls, stepsMails, stepsConns int64
	loadTime, vacuumTime               time.Duration
	grownRows, baseRows                int64
	grownBase                          measured
	grownIndex                         string
}

func newReport(o options) *report { return &report{o: o, started: time.Now()} }

func (r *report) add(m measured) { r.runs = append(r.runs, m) }

// target is one line of the ratio table.
type target struct {
	id, what, measured string
	ratio, need        float64
	atMost             bool // the ratio must stay at or under need
}

func (t target) met() bool {
	if t.atMost {
		return t.ratio <= t.need
	}
	return t.ratio >= t.need
}

func ok(m measured) float64 { return m.load.OKPerSecond() }

// OKPerSecond is the rate of deliveries answered 2xx.
func (l loadReport) OKPerSecond() float64 {
	if l.Seconds == 0 {
		return 0
	}
	return float64(l.OK) / l.Seconds
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func (r *report) targets() []target {
	const stepsIdeal = 64 / 0.2
	rss := float64(r.conc256.peakRSS) / mib
	return []target{
		{"1a", "new database-only events (invoice.created): receiver ÷ pgbench running the receiver's transaction",
			fmt.Sprintf("%.0f/s ÷ %.0f/s", ok(r.recvNew), r.pgbNew.tps), ratio(ok(r.recvNew), r.pgbNew.tps), 0.70, false},
		{"1b", "new database-only events: receiver ÷ the copied snippet",
			fmt.Sprintf("%.0f/s ÷ %.0f/s", ok(r.recvNew), ok(r.snippet)), ratio(ok(r.recvNew), ok(r.snippet)), 0.90, false},
		{"2", "replays of finished events: receiver ÷ pgbench running the receiver's duplicate check",
			fmt.Sprintf("%.0f/s ÷ %.0f/s", ok(r.recvReplay), r.pgbReplay.tps), ratio(ok(r.recvReplay), r.pgbReplay.tps), 0.70, false},
		{"3", "checkout with steps, 200 ms fulfillment API, 64 concurrent, DB_MAX_CONNS=8: receiver ÷ (64 / 0.2 s)",
			fmt.Sprintf("%.0f/s ÷ %.0f/s", ok(r.steps), stepsIdeal), ratio(ok(r.steps), stepsIdeal), 0.80, false},
		{"4", fmt.Sprintf("growth: receiver with %s rows in processed_events ÷ the same load on the table the earlier phases left (%s rows)", thousands(r.grownRows), thousands(r.baseRows)),
			fmt.Sprintf("%.0f/s ÷ %.0f/s", ok(r.grown), ok(r.grownBase)), ratio(ok(r.grown), ok(r.grownBase)), 0.85, false},
		{"5a", "resident memory at 256 concurrent deliveries (peak VmHWM/VmRSS) ÷ 100 MiB",
			fmt.Sprintf("%.1f MiB", rss), rss / 100, 1, true},
		{"5b", fmt.Sprintf("p99 latency at half the peak throughput (fixed %.0f/s) ÷ 25 ms", r.halfRate.load.rate()),
			fmt.Sprintf("%.1f ms (pgbench, the same transactions at the same rate: %.1f ms)", r.halfRate.load.LatencyMS.P99, r.pgbRateP99),
			r.halfRate.load.LatencyMS.P99 / 25, 1, true},
	}
}

func (l loadReport) rate() float64 { return l.Rate }

func thousands(n int64) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func (r *report) ratioTable() string {
	var sb strings.Builder
	sb.WriteString("| # | target | measured | ratio | needed | |\n|---|---|---:|---:|---:|---|\n")
	for _, t := range r.targets() {
		need := fmt.Sprintf("≥ %.2f", t.need)
		if t.atMost {
			need = fmt.Sprintf("≤ %.2f", t.need)
		}
		verdict := "**met**"
		if !t.met() {
			verdict = "**missed**"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %.2f | %s | %s |\n", t.id, t.what, t.measured, t.ratio, need, verdict)
	}
	return sb.String()
}

func (r *report) render() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	p("# Benchmarks\n\n")
	p("Measured by `make bench` (scripts/bench.sh, which builds bin/server, bin/loadgen and bin/snippet and runs\n")
	p("`go run ./bench/cmd/benchrun`) on %s. Reproduce with:\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"))
	p("```\nmake bench\n```\n\n")
	p("(or `scripts/bench.sh -phase 20s -warmup 5s` for longer windows; `-perf` adds a perf profile of the receiver).\n\n")
	p("Every figure below comes from one run of %s on one machine. **loadgen, the receiver (or the snippet, or\n", r.total.Round(time.Second))
	p("pgbench) and PostgreSQL all share the same %d CPU cores**, and other work may run on the machine\n", runtime.NumCPU())
	p("meanwhile, so absolute numbers are noisy and mostly say how fast this box can fsync: only the\n")
	p("ratios, measured minutes apart in the same run, mean anything.\n\n")

	p("## Targets\n\n")
	sb.WriteString(r.ratioTable())
	p("\nThroughputs count deliveries answered 2xx per second of the measured window (%s, after a %s warm-up\n", r.o.phase, r.o.warmup)
	p("with the same load). pgbench figures are its `tps` without connection time.\n\n")

	p("## Machine\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s |\n| nproc | %d |\n| memory | %s |\n| kernel | %s |\n| Go | %s |\n| PostgreSQL | %s |\n\n",
		cpuModel(), runtime.NumCPU(), memTotal(), kernel(), runtime.Version(), r.pgVersion)
	p("PostgreSQL runs with its default durability (`fsync`, `synchronous_commit` and `full_page_writes` on) and\n")
	p("default memory settings (shared_buffers 128 MB), from a fresh `initdb` in a temporary directory, started by\n")
	p("internal/pglocal with `Durable: true`; pg_stat_statements is preloaded when installed.\n\n")

	p("## Every measured run\n\n")
	p("| run | 2xx/s | p50 ms | p90 ms | p99 ms | max ms | peak RSS MiB | statuses |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, m := range r.runs {
		l := m.load
		p("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", m.name, ok(m), l.LatencyMS.P50, l.LatencyMS.P90,
			l.LatencyMS.P99, l.LatencyMS.Max, float64(m.peakRSS)/mib, statusText(l))
	}
	for _, pb := range r.pgbench {
		p("| %s (%d clients) | %.1f | avg %.1f | | | | | |\n", pb.name, pb.clients, pb.tps, pb.latency)
	}
	p("\nPhases 1, 2 and 4 run at concurrency %d: loadgen's workers, pgbench's clients (`-M prepared`, as pgx\n", r.o.concurrency)
	p("prepares its statements), and the pool of the receiver and of the snippet (DB_MAX_CONNS=%d). Phase 1\n", r.o.concurrency)
	p("runs receiver, pgbench and snippet twice, interleaved, and its targets use the mean of both rounds.\n")
	p("Phase 3's fulfillment API is an in-process HTTP server\n")
	p("answering 201 after 200 ms, and mail goes to an in-process SMTP sink; it received %d fulfillment\n", r.stepsCalls)
	p("calls over %d TCP connections and %d messages over the warm-up and the measured window. Phase 5b runs\n", r.stepsConns, r.stepsMails)
	p("loadgen at a fixed")
	p(" arrival rate; its latency runs from each delivery's scheduled start, so queueing shows.\n\n")

	p("## Where the CPU went\n\n")
	p("CPU time per delivery (per transaction for pgbench) over the measured window, from /proc: the client\n")
	p("(loadgen or pgbench), the server process (receiver or snippet), and every postgres process; and how\n")
	p("busy the whole machine was (%d cores). When the machine is near 100%%, throughput is bounded by the CPU\n", runtime.NumCPU())
	p("that client, server and database take per delivery, and these columns say who took it.\n\n")
	p("| run | deliveries | client µs | server µs | postgres µs | total µs | machine busy |\n|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, n int, u cpuUse) {
		if n == 0 {
			return
		}
		per := func(x float64) float64 { return x / float64(n) * 1e6 }
		p("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f%% |\n", name, n, per(u.Client), per(u.Server), per(u.Postgres),
			per(u.Client+u.Server+u.Postgres), 100*u.Busy/(u.Wall*float64(runtime.NumCPU())))
	}
	for _, m := range r.runs {
		row(m.name, m.load.Deliveries, m.cpu)
	}
	for _, pb := range r.pgbench {
		row(pb.name, pb.txns, pb.cpu)
	}
	p("\n")

	p("## Phase 4: growth\n\n")
	p("%s rows were bulk-loaded with one `INSERT … SELECT … FROM generate_series` into processed_events and one\n", thousands(int64(r.o.rows)))
	p("into webhook_events (matching keys, a 2-byte body; the two in parallel) in **%s**; `VACUUM ANALYZE` of both\n", r.loadTime.Round(100*time.Millisecond))
	p("and a `CHECKPOINT` took %s more. Keys are `evt_` + md5, so new events land all over the index as real ids\n", r.vacuumTime.Round(100*time.Millisecond))
	p("do. processed_events then held %s rows; its primary key was %s. The bulk load goes into a database of\n", thousands(r.grownRows), r.grownIndex)
	p("its own; phase 1's load then runs on phase 1's database (%s rows) and on the grown one in two interleaved\n", thousands(r.baseRows))
	p("rounds (both databases vacuumed and analysed first), and the target uses the mean of both rounds.\n\n")

	if r.statements {
		p("## Where the database time went\n\n")
		p("pg_stat_statements of the receiver's database over the warm-up and measured window of each phase.\n\n")
		for _, m := range r.runs {
			if m.statements == "" {
				continue
			}
			p("### %s\n\n%s\n", m.name, m.statements)
		}
	}
	perf := false
	for _, m := range r.runs {
		if m.perf != "" {
			if !perf {
				p("## CPU profiles of the receiver (perf)\n\n")
				perf = true
			}
			p("### %s\n\n```\n%s```\n\n", m.name, trimPerf(m.perf))
		}
	}

	p("## Reading the results\n\n")
	p("- With loadgen, the receiver and PostgreSQL on the same %d cores, the machine is CPU-bound in every\n", runtime.NumCPU())
	p("  closed-loop phase (see \"machine busy\"): throughput is then about %d cores ÷ (client + server +\n", runtime.NumCPU())
	p("  postgres µs per delivery). pgbench's client is a few µs of C per statement; loadgen's is an HTTP\n")
	p("  client that also signs every delivery, and the receiver adds HTTP, verification and one more process\n")
	p("  to schedule. That is a floor the receiver cannot reach on this box whatever its code does.\n")
	p("- In a VM, every system call is expensive, and each SQL round trip costs the receiver a write and a read\n")
	p("  on its socket and two goroutine wake-ups, so round trips per delivery are the lever (profile with\n")
	p("  `go test -run '^$' -bench Deliver -cpuprofile cpu.out ./internal/webhooks/stripehook`). A new invoice\n")
	p("  event takes three: BEGIN pipelined with the claim, the stored body and a read of the event's claims;\n")
	p("  the invoice; COMMIT (pipelined with the steps' leases when there are steps). A copy of a known\n")
	p("  event takes two: the same first round trip, whose read says what became of it, then ROLLBACK. The\n")
	p("  copied snippet takes two, each its own commit, and stores no body.\n")
	p("- Run-to-run noise on a shared machine is large (±30%% on absolute figures between runs); rerun before\n")
	p("  trusting a ratio near its threshold.\n\n")

	p("## The pgbench scripts\n\n")
	p("The receiver's own SQL, copied from internal/webhooks/claims.go and internal/invoices/invoices.go, in the\n")
	p("receiver's transaction shape.\n\n")
	for _, pb := range r.pgbench {
		p("%s:\n\n```\n%s```\n\n", pb.name, pb.script)
	}
	return sb.String()
}

func statusText(l loadReport) string {
	keys := make([]string, 0, len(l.Status))
	for k := range l.Status {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, l.Status[k]))
	}
	for k, v := range l.Errors {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, v))
	}
	if l.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("dropped: %d", l.Dropped))
	}
	return strings.Join(parts, ", ")
}

func trimPerf(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		out = append(out, line)
		if len(out) >= 40 {
			break
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func cpuModel() string {
	return procField("/proc/cpuinfo", "model name")
}

func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal")
	var kb int64
	fmt.Sscanf(v, "%d", &kb)
	if kb == 0 {
		return v
	}
	return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
