package main

import (
	"bufio"
	"debug/buildinfo"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/bench/pgbench"
)

// report collects every measurement of the run and renders BENCHMARKS.md.
type report struct {
	o          options
	started    time.Time
	total      time.Duration
	pgVersion  string
	statements bool
	ran        map[int]bool  // phases asked for
	failed     map[int]error // phases that did not finish
	phaseTime  map[int]time.Duration

	p1, p2, p3, p4, p5 series
	p7                 series        // through PgBouncer
	p8                 series        // a customer's burst
	flushes1           []groupCommit // pgbench's windows of phase 1 (the servers' are in cost1)
	cost1, cost2       []costResult
	poolerVersion      string
	conc256            sample
	rss                int64
	halfRate           float64
	pgbRateP99         float64 // ms, pgbench (a) at the same fixed rate
	stepsAPI           apiStats
	stepsMails         int64
	grow               growInfo
	drains             []drainResult
	pgbenchBody        int // bytes of the body pgbench's (a) and (b) store
	stmts              []stmtBlock
	perf               string
}

type growInfo struct {
	loadTime, vacuumTime time.Duration
	baseRows, grownRows  int64
	pkSize, tableSize    string
	bodyBytes            float64
}

func newReport(o options) *report {
	return &report{o: o, started: time.Now(), ran: map[int]bool{}, failed: map[int]error{}, phaseTime: map[int]time.Duration{}}
}

// target is one line of the ratio table.
type target struct {
	id, what string
	phase    int
	measured string
	ratio    summary // over rounds (or slots, or drains)
	aa       summary // the A/A control; N == 0 when there is none
	aaNote   string  // why there is none
	need     float64
	atMost   bool // the ratio must stay at or under need
	info     bool // no threshold: shown for what it says
}

func (t target) met() bool {
	if t.atMost {
		return t.ratio.Median <= t.need
	}
	return t.ratio.Median >= t.need
}

// withinNoise: the ratio is closer to its threshold than the A/A control
// is to 1 (its median's distance or half its IQR, whichever is larger).
func (t target) withinNoise() bool {
	if t.info || !t.aa.ok() || !t.ratio.ok() {
		return false
	}
	noise := max(math.Abs(t.aa.Median-1), (t.aa.Q3-t.aa.Q1)/2)
	return math.Abs(t.ratio.Median/t.need-1) <= noise
}

func medianOf(xs []sample, f func(sample) float64) float64 { return summarize(values(xs, f)).Median }

func (r *report) targets() []target {
	rt := func(ss series, a, b string) summary {
		return summarize(perRound(values(ss[a], rateOf), values(ss[b], rateOf)))
	}
	var ts []target

	recv1 := pooled(r.p1[sRecv], r.p1[sRecv2])
	recv2 := pooled(r.p2[sRecv], r.p2[sRecv2])
	recv7 := pooled(r.p7[sRecv], r.p7[sRecv2])
	c := r.o.concurrency
	ts = append(ts,
		target{id: "1a", phase: 1, what: "new invoice.created events: receiver ÷ the copied snippet on net/http (the form most often copied), on its own tables (stretch: 1.1)",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv1, rateOf), medianOf(r.p1[sNet], rateOf)),
			ratio:    rt(r.p1, sRecv, sNet), aa: rt(r.p1, sRecv, sRecv2), need: 1.0},
		target{id: "1r", phase: 1, what: "new invoice.created events: receiver ÷ the same snippet writing the receiver's tables (its columns and indexes)",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv1, rateOf), medianOf(r.p1[sNetR], rateOf)),
			ratio:    rt(r.p1, sRecv, sNetR), aa: rt(r.p1, sRecv, sRecv2), info: true},
		target{id: "1e", phase: 1, what: "new invoice.created events: receiver ÷ the same snippet on Echo (the receiver's HTTP stack), on its own tables",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv1, rateOf), medianOf(r.p1[sSnip], rateOf)),
			ratio:    rt(r.p1, sRecv, sSnip), aa: rt(r.p1, sRecv, sRecv2), need: 1.0},
		target{id: "1b", phase: 1, what: fmt.Sprintf("new invoice.created events: receiver ÷ pgbench (c1), the snippet's SQL in one transaction on its tables, %d clients", c),
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv1, rateOf), medianOf(r.p1[sPgC1], rateOf)),
			ratio:    rt(r.p1, sRecv, sPgC1), aa: rt(r.p1, sRecv, sRecv2), need: 0.5},
		target{id: "1p", phase: 1, what: fmt.Sprintf("new invoice.created events: receiver ÷ P, pgbench (a): the receiver's own statements, 5 KB body included, %d clients (what the HTTP path and Go cost)", c),
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv1, rateOf), medianOf(r.p1[sPgA], rateOf)),
			ratio:    rt(r.p1, sRecv, sPgA), aa: rt(r.p1, sRecv, sRecv2), info: true},
		target{id: "2", phase: 2, what: "replays of finished events: receiver ÷ the net/http snippet's replays",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv2, rateOf), medianOf(r.p2[sNet], rateOf)),
			ratio:    rt(r.p2, sRecv, sNet), aa: rt(r.p2, sRecv, sRecv2), need: 1.0},
		target{id: "2e", phase: 2, what: "replays of finished events: receiver ÷ the Echo snippet's replays",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv2, rateOf), medianOf(r.p2[sSnip], rateOf)),
			ratio:    rt(r.p2, sRecv, sSnip), aa: rt(r.p2, sRecv, sRecv2), need: 1.0},
		target{id: "7", phase: 7, what: "new invoice.created events, both through PgBouncer in transaction mode: receiver ÷ the net/http snippet",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(recv7, rateOf), medianOf(r.p7[sNet], rateOf)),
			ratio:    rt(r.p7, sRecv, sNet), aa: rt(r.p7, sRecv, sRecv2), need: 1.0},
		target{id: "7p", phase: 7, what: "the same through PgBouncer, nothing prepared (-M extended): pgbench (a), the receiver's SQL, ÷ pgbench (c1), the snippet's: the ceiling of 7",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(r.p7[sPgAX], rateOf), medianOf(r.p7[sPgC1X], rateOf)),
			ratio:    rt(r.p7, sPgAX, sPgC1X), aa: rt(r.p7, sRecv, sRecv2), info: true},
	)

	one8 := pooled(r.p8[sBurstOne], r.p8[sBurst1b])
	ts = append(ts,
		target{id: "8", phase: 8, what: "a customer's burst (the seven events of each Checkout of a subscription): every checkout one customer's ÷ a customer per checkout",
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(one8, rateOf), medianOf(r.p8[sBurstAll], rateOf)),
			ratio:    rt(r.p8, sBurstOne, sBurstAll), aa: rt(r.p8, sBurstOne, sBurst1b), need: 0.8},
		target{id: "8h", phase: 8, what: fmt.Sprintf("the same, every checkout one of %d customers' ÷ a customer per checkout", burstFew),
			measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(r.p8[sBurstFew], rateOf), medianOf(r.p8[sBurstAll], rateOf)),
			ratio:    rt(r.p8, sBurstFew, sBurstAll), aa: rt(r.p8, sBurstOne, sBurst1b), need: 0.8},
	)

	const stepsIdeal = 64 / 0.2
	steps := pooled(r.p3[sRecv], r.p3[sRecv2])
	ts = append(ts, target{id: "3", phase: 3,
		what:     "checkout with steps, 200 ms fulfillment API, 64 concurrent, DB_MAX_CONNS=8: receiver ÷ (64 / 0.2 s)",
		measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(steps, rateOf), stepsIdeal),
		ratio:    summarize(values(steps, func(s sample) float64 { return s.rate / stepsIdeal })),
		aa:       rt(r.p3, sRecv, sRecv2), need: 0.8})

	ts = append(ts, target{id: "4", phase: 4,
		what: fmt.Sprintf("growth: receiver with %s rows in processed_events ÷ the same on the small table (%s rows)",
			thousands(r.grow.grownRows), thousands(r.grow.baseRows)),
		measured: fmt.Sprintf("%.0f/s ÷ %.0f/s", medianOf(r.p4[sGrown], rateOf), medianOf(pooled(r.p4[sBase], r.p4[sBase2]), rateOf)),
		ratio:    rt(r.p4, sGrown, sBase), aa: rt(r.p4, sBase, sBase2), need: 0.85})

	rss := float64(r.rss) / mib
	var rssSum summary
	if r.rss > 0 {
		rssSum = summarize([]float64{rss / 100})
	}
	ts = append(ts, target{id: "5a", phase: 5, what: "resident memory at 256 deliveries in flight (peak VmHWM/VmRSS) ÷ 100 MiB",
		measured: fmt.Sprintf("%.1f MiB", rss), ratio: rssSum, aaNote: "one window", need: 1, atMost: true})

	p99 := pooled(r.p5[sRecv], r.p5[sRecv2])
	ts = append(ts, target{id: "5b", phase: 5,
		what:     fmt.Sprintf("p99 latency at half the peak throughput (fixed %.0f/s) ÷ 25 ms", r.halfRate),
		measured: fmt.Sprintf("%.1f ms (pgbench (a) at the same rate: %.1f ms)", medianOf(p99, p99Of), r.pgbRateP99),
		ratio:    summarize(values(p99, func(s sample) float64 { return s.lat.P99 / 25 })),
		aa:       summarize(perRound(values(r.p5[sRecv], p99Of), values(r.p5[sRecv2], p99Of))), need: 1, atMost: true})

	ideal := float64(r.o.redriveParallelism) / stepsAPI.Seconds()
	var drainRates, drainRatios []float64
	for _, d := range r.drains {
		if d.rate() > 0 {
			drainRates = append(drainRates, d.rate())
			drainRatios = append(drainRatios, d.rate()/ideal)
		}
	}
	t6 := target{id: "6", phase: 6,
		what: fmt.Sprintf("redriver drain of %s fulfillment steps, 200 ms API, REDRIVE_PARALLELISM=%d: steps/s ÷ (%d / 0.2 s)",
			thousands(int64(r.o.drainSteps)), r.o.redriveParallelism, r.o.redriveParallelism),
		measured: fmt.Sprintf("%.1f/s ÷ %.0f/s", summarize(drainRates).Median, ideal),
		ratio:    summarize(drainRatios), need: 0.8}
	if len(drainRates) >= 2 {
		t6.aa = summarize([]float64{drainRates[0] / drainRates[1]})
	} else {
		t6.aaNote = "one drain"
	}
	return append(ts, t6)
}

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
	sb.WriteString("| # | target | measured (medians) | ratio (median) | spread of the ratio | A/A control (same side twice) | needed | |\n")
	sb.WriteString("|---|---|---:|---:|---|---|---:|---|\n")
	for _, t := range r.targets() {
		need := fmt.Sprintf("≥ %.2f", t.need)
		if t.atMost {
			need = fmt.Sprintf("≤ %.2f", t.need)
		}
		if t.info {
			need = "—"
		}
		if !r.ran[t.phase] || !t.ratio.ok() {
			why := "not run"
			if err := r.failed[t.phase]; err != nil {
				why = "**failed**: " + oneLine(err.Error(), 140)
			}
			fmt.Fprintf(&sb, "| %s | %s | — | — | — | — | %s | %s |\n", t.id, t.what, need, why)
			continue
		}
		aa := t.aaNote
		if t.aa.ok() {
			aa = fmt.Sprintf("%.2f (%s)", t.aa.Median, t.aa.spread("%.2f"))
		}
		verdict := "**met**"
		switch {
		case t.info:
			verdict = "informative"
		case !t.met():
			verdict = "**missed**"
		}
		if t.withinNoise() {
			verdict += " (within A/A noise)"
		}
		if r.failed[t.phase] != nil {
			verdict += " (phase cut short)"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %.2f | %s | %s | %s | %s |\n", t.id, t.what, t.measured, t.ratio.Median,
			t.ratio.spread("%.2f"), aa, need, verdict)
	}
	return sb.String()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

// phase1Ratios are the informative ratios of phase 1, beside its targets.
func (r *report) phase1Ratios() string {
	var sb strings.Builder
	aa := summarize(perRound(values(r.p1[sRecv], rateOf), values(r.p1[sRecv2], rateOf)))
	fmt.Fprintf(&sb, "Per-round ratios of phase 1 (median, IQR, range). The A/A control, receiver ÷ receiver′ measured in the same rounds, is **%.2f** (%s).\n\n",
		aa.Median, aa.spread("%.2f"))
	if len(r.p1[sBase1]) > 0 {
		fmt.Fprintf(&sb, "The baseline is %s, on a database of its own (brecv), in the same rounds.\n\n", r.baseline())
	}
	sb.WriteString("| ratio | median | spread |\n|---|---:|---|\n")
	for _, c := range [][2]string{
		{sRecv, sBase1}, {sBase1, sNet}, {sRecv, sNet}, {sRecv, sNetR}, {sNetR, sNet}, {sRecv, sSnip}, {sSnip, sNet}, {sRecv, sPgC1}, {sRecv, sPgC1One},
		{sRecv, sPgA}, {sRecv, sPgB}, {sRecv, sPgC}, {sPgA, sPgC1}, {sPgA, sPgB}, {sPgC1, sPgC1One}, {sNet, sPgC},
		{sNet, sPgC1}, {sSnip, sPgC1},
	} {
		s := summarize(perRound(values(r.p1[c[0]], rateOf), values(r.p1[c[1]], rateOf)))
		if s.ok() {
			fmt.Fprintf(&sb, "| %s ÷ %s | %.2f | %s |\n", c[0], c[1], s.Median, s.spread("%.2f"))
		}
	}
	return sb.String()
}

func (r *report) phases() []struct {
	n    int
	name string
	s    series
} {
	return []struct {
		n    int
		name string
		s    series
	}{
		{1, "1 new events", r.p1}, {2, "2 replays", r.p2}, {8, "8 a customer's burst", r.p8}, {7, "7 new events, PgBouncer", r.p7},
		{3, "3 checkout with steps", r.p3}, {4, "4 growth", r.p4}, {5, "5 fixed rate", r.p5},
	}
}

// sideOrder lists a phase's sides in a stable order.
func sideOrder(s series) []string {
	var names []string
	for _, n := range []string{sRecv, sRecv2, sBase1, sNet, sNetR, sSnip, sPgC1, sPgC1One, sPgA, sPgB, sPgC, sPgAX, sPgC1X, sBase, sBase2, sGrown,
		sBurstAll, sBurstOne, sBurst1b, sBurstFew, sBurstNet, sBaseAll, sBaseOne} {
		if len(s[n]) > 0 {
			names = append(names, n)
		}
	}
	return names
}

func (r *report) render() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	ncpu := runtime.NumCPU()
	p("# Benchmarks\n\n")
	p("Measured on %s in %s by:\n\n```\n%s\n```\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"), r.total.Round(time.Second), r.o.command)
	p("(`make bench` runs scripts/bench.sh, which builds bin/server, bin/loadgen, bin/snippet-nethttp, bin/snippet,\n")
	p("bin/profserver and bin/benchrun and passes its arguments to benchrun; `scripts/bench.sh -quick` is a smoke run\n")
	p("of a few minutes, `-h` lists the flags.) The snippet is the dedupe snippet as users copy it, the claim and the\n")
	p("invoice as two autocommit statements, no body stored: on plain net/http and a pgx pool (bench/snippet-nethttp,\n")
	p("the baseline of targets 1a, 2 and 7) and on Echo (bench/snippet, the receiver's HTTP stack: 1e, 2e). Both write\n")
	p("their own two tables, as a user who copies them has them (bench/snippetdb: processed_events keyed by the event,\n")
	p("invoices unique by Stripe's id); 1r runs the net/http one on a database migrated like the receiver's instead.\n")
	p("pgbench runs at the HTTP phases' concurrency (%d clients; (c1) also at 1).\n\n", r.o.concurrency)
	p("loadgen, the receiver (or a snippet, or pgbench) and PostgreSQL all share the machine's %d CPU cores, and\n", ncpu)
	p("other work may run on it meanwhile: absolute figures are noisy. Each comparison therefore alternates short\n")
	p("slots of its sides, round after round, takes each ratio per round and reports its median and spread, and\n")
	p("measures one side twice per round (A and A′): the A/A ratio beside each target is what noise alone does.\n\n")

	p("## Targets\n\n")
	sb.WriteString(r.ratioTable())
	p("\nA ratio is computed per round from slots seconds apart (%d rounds of %s slots for phases 1, 2, 4, 7 and 8, %d rounds\n", r.o.rounds, r.o.slot, max(2, (r.o.rounds+1)/2))
	p("for phases 3 and 5; each slot after a %s warm-up of its own), then summarised: median, interquartile range,\n", r.o.slotWarmup)
	p("range. Throughputs count deliveries answered 2xx per second; pgbench figures are its tps without connection\n")
	p("time. \"Within A/A noise\" marks a ratio closer to its threshold than the A/A control is to 1.\n\n")

	if len(r.failed) > 0 {
		p("## Phases that did not finish\n\n")
		for n := 1; n <= 8; n++ {
			if err := r.failed[n]; err != nil {
				p("- phase %d: `%s`\n", n, oneLine(err.Error(), 400))
			}
		}
		p("\n")
	}

	var times []string
	for _, n := range []int{1, 2, 8, 7, 3, 5, 6, 4} {
		if d, ok := r.phaseTime[n]; ok {
			times = append(times, fmt.Sprintf("%d: %s", n, d.Round(time.Second)))
		}
	}
	if len(times) > 0 {
		p("Time per phase (in the order they ran) — %s.\n\n", strings.Join(times, ", "))
	}

	p("## Machine\n\n| | |\n|---|---|\n")
	p("| CPU | %s |\n| nproc | %d |\n| memory | %s |\n| kernel | %s |\n", cpuModel(), ncpu, memTotal(), kernel())
	p("| Go | %s (benchrun); receiver binary built with %s |\n", runtime.Version(), binaryGo(r.o.server))
	p("| PostgreSQL | %s |\n", r.pgVersion)
	if r.poolerVersion != "" {
		p("| PgBouncer | %s (phase 7: transaction mode, pool size %d per database) |\n", r.poolerVersion, r.o.concurrency)
	}
	p("\n")
	p("PostgreSQL runs with its default durability (`fsync`, `synchronous_commit` and `full_page_writes` on) and\n")
	p("default memory settings (shared_buffers 128 MB), from a fresh `initdb` in a temporary directory, started by\n")
	p("internal/pglocal with `Durable: true`; pg_stat_statements is preloaded when installed.\n\n")

	p("## Event bodies\n\n")
	p("loadgen builds Stripe events with the fields, nesting and size of real ones (API version 2023-10-16, new\n")
	p("ids in every event); mean size of the bodies sent in the measured slots:\n\n| event | phases | mean body |\n|---|---|---:|\n")
	if t := totals(pooled(r.p1[sRecv], r.p1[sRecv2], r.p1[sNet], r.p1[sSnip], r.p4[sGrown], r.p5[sRecv], r.p7[sRecv])); t.bodyBytes > 0 {
		p("| invoice.created | 1, 2, 4, 5, 7 | %.0f bytes |\n", t.bodyBytes)
	}
	if t := totals(pooled(r.p3[sRecv], r.p3[sRecv2])); t.bodyBytes > 0 {
		p("| checkout.session.completed (paid) | 3 | %.0f bytes |\n", t.bodyBytes)
	}
	if t := totals(pooled(r.p8[sBurstAll], r.p8[sBurstOne], r.p8[sBurst1b], r.p8[sBurstFew])); t.bodyBytes > 0 {
		p("| the seven events of a Checkout of a subscription (burst) | 8 | %.0f bytes |\n", t.bodyBytes)
	}
	p("\npgbench's scripts (a) and (b) store a %d-byte invoice.created body from `loadgen -print-body`.\n\n", r.pgbenchBody)

	if r.ran[1] && len(r.p1) > 0 {
		p("## Phase 1: every ratio\n\n")
		sb.WriteString(r.phase1Ratios())
		p("\n(a) is the receiver's own transaction as pgbench runs it (P), (b) the minimal one-statement transaction, (c)\n")
		p("the snippet's two autocommit statements, (c1) the same in one transaction, both on the snippet's tables; see\n")
		p("\"The pgbench scripts\".\n\n")
	}
	if r.ran[2] && len(r.p2[sBase1]) > 0 {
		p("## Phase 2: the baseline build\n\n")
		p("With `-base-server`, the baseline build (%s) replayed a pool of its own in phase 2's rounds (database brecv).\n\n", r.baseline())
		sb.WriteString("| ratio | median | spread |\n|---|---:|---|\n")
		for _, c := range [][2]string{{sRecv, sBase1}, {sRecv2, sBase1}, {sBase1, sNet}, {sRecv, sNet}, {sBase1, sSnip}, {sRecv, sSnip}} {
			if s := summarize(perRound(values(r.p2[c[0]], rateOf), values(r.p2[c[1]], rateOf))); s.ok() {
				p("| %s ÷ %s | %.2f | %s |\n", c[0], c[1], s.Median, s.spread("%.2f"))
			}
		}
		p("\n")
	}
	sb.WriteString(r.limitSection())
	sb.WriteString(r.burstSection())
	sb.WriteString(r.costSection())
	sb.WriteString(r.groupCommitSection())

	p("## Every side\n\n")
	p("Per slot: throughput (median, IQR, range over slots), median p50 and p99, and every answer over all slots.\n\n")
	p("| phase | side | slots | 2xx/s or tps (median) | spread | p50 ms | p99 ms | answers |\n|---|---|---:|---:|---|---:|---:|---|\n")
	for _, ph := range r.phases() {
		for _, name := range sideOrder(ph.s) {
			xs := ph.s[name]
			rs := summarize(values(xs, rateOf))
			t := totals(xs)
			if t.pgbench {
				p("| %s | %s | %d | %.0f | %s | avg %.1f | | %d transactions |\n", ph.name, name, len(xs), rs.Median, rs.spread("%.0f"),
					medianOf(xs, func(s sample) float64 { return s.lat.P50 }), t.n)
				continue
			}
			p("| %s | %s | %d | %.0f | %s | %.1f | %.1f | %s |\n", ph.name, name, len(xs), rs.Median, rs.spread("%.0f"),
				medianOf(xs, func(s sample) float64 { return s.lat.P50 }), medianOf(xs, p99Of), statusText(t.status, t.errors, t.dropped))
		}
	}
	if r.conc256.n > 0 {
		c := r.conc256
		p("| 5 memory | receiver, 256 in flight | 1 | %.0f | one window of %s | %.1f | %.1f | %s |\n", c.rate, r.o.window, c.lat.P50, c.lat.P99,
			statusText(c.status, c.errors, c.dropped))
	}
	p("\n")

	p("## Where the CPU went\n\n")
	p("CPU time per delivery (per transaction for pgbench), summed over a side's measured slots, of the benchmark's\n")
	p("own processes only: the client (loadgen, from its own rusage over the window; pgbench), the server (receiver\n")
	p("or snippet) and the benchmark's PostgreSQL cluster (its postmaster, found by the data directory's\n")
	p("postmaster.pid, with every child it reaped, and its live descendants). \"Machine busy\" is the whole\n")
	p("machine's use of its %d cores over the slots, \"others\" the part of it no process of the benchmark took,\n", ncpu)
	p("\"steal\" the time the hypervisor gave to other machines: both are noise the A/A control also sees. \"Pooler\"\n")
	p("is PgBouncer's own CPU (phase 7). WAL is the cluster's insert position moved over the slots, per delivery.\n\n")
	p("| phase | side | deliveries | client µs | server µs | postgres µs | pooler µs | ours µs | WAL bytes | machine busy | others | steal |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, ph := range r.phases() {
		for _, name := range sideOrder(ph.s) {
			t := totals(ph.s[name])
			if t.n == 0 || t.cpu.Wall == 0 {
				continue
			}
			per := func(x float64) float64 { return x / float64(t.n) * 1e6 }
			capacity := t.cpu.Wall * float64(ncpu)
			wal := "—"
			if t.wal >= 0 {
				wal = fmt.Sprintf("%.0f", t.wal/float64(t.walN))
			}
			p("| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %.0f%% | %.0f%% | %.0f%% |\n", ph.name, name, t.n, per(t.cpu.Client), per(t.cpu.Server),
				per(t.cpu.Postgres), per(t.cpu.Pooler), per(t.cpu.ours()), wal, 100*t.cpu.Busy/capacity, 100*max(t.cpu.Busy-t.cpu.ours(), 0)/capacity,
				100*t.cpu.Steal/capacity)
		}
	}
	p("\n")

	sb.WriteString(r.lockSection())

	if r.ran[3] && r.stepsAPI.calls > 0 {
		p("## Phase 3: checkout with steps\n\n")
		p("The fulfillment API is an in-process HTTP server answering 201 after %s; mail goes to an in-process SMTP\n", stepsAPI)
		p("sink. Over the measured slots (and their warm-ups) it received %d calls (%d distinct Idempotency-Keys, at\n", r.stepsAPI.calls, r.stepsAPI.distinct)
		p("most %d at once) over %d TCP connections opened since the phase began, and the sink %d messages.\n\n", r.stepsAPI.peak, r.stepsAPI.conns, r.stepsMails)
	}

	if r.ran[4] && r.grow.grownRows > 0 {
		g := r.grow
		p("## Phase 4: growth\n\n")
		p("%s rows went into processed_events of a database of its own with one `INSERT … SELECT` in key order in\n", thousands(int64(r.o.rows)))
		p("**%s**; `VACUUM ANALYZE` of both databases and a `CHECKPOINT` took %s more. Two thirds are events with\n", g.loadTime.Round(100*time.Millisecond), g.vacuumTime.Round(100*time.Millisecond))
		p("every column of the event row filled (a %s body, %.0f bytes on average; `-grow-body full` loads\n", map[string]string{"small": "compact JSON", "full": "full-size invoice.created"}[r.o.growBody], g.bodyBytes)
		p("full-size bodies instead: slower, and many GB), a third the done steps of every fourth event, a checkout\n")
		p("(its confirmation e-mail and its fulfillment). Keys are `evt_1` and 23 random characters, as loadgen's are,\n")
		p("so new events land all over the primary key. processed_events then held %s rows; its primary key was\n", thousands(g.grownRows))
		p("%s, the whole table %s. The small table is phase 1 and 2's database (%s rows).\n\n", g.pkSize, g.tableSize, thousands(g.baseRows))
	}

	if r.ran[5] && r.conc256.n > 0 {
		p("## Phase 5: memory and latency\n\n")
		p("The receiver's peak resident set (VmHWM, and VmRSS sampled every 100 ms) over a warm-up and a %s window at\n", r.o.window)
		p("256 deliveries in flight: **%.1f MiB**. Then loadgen sends at a fixed %.0f/s, half the peak (the larger of\n", float64(r.rss)/mib, r.halfRate)
		p("phase 1's median and the 256-in-flight throughput); latency runs from each delivery's scheduled start, so\n")
		p("queueing shows. pgbench running (a) at the same rate for %s, its latency also from the scheduled start:\n", r.o.window)
		p("p99 %.1f ms.\n\n", r.pgbRateP99)
	}

	if r.ran[7] && len(r.p7) > 0 {
		p("## Phase 7: through PgBouncer\n\n")
		p("internal/pgbouncer runs %s in transaction mode on 127.0.0.1, as the postgres user, with a pool of %d server\n", r.poolerVersion, r.o.concurrency)
		p("connections per database, in front of the same cluster. The receiver (database precv) runs as a user\n")
		p("configures it behind such a pooler: `DATABASE_POOLER=transaction` (pgx's `cache_describe` mode, which it picks\n")
		p("when the URL names none) with its migrations and locks on `DATABASE_SESSION_URL`, direct; the net/http snippet\n")
		p("(database psnip) names `default_query_exec_mode=exec` in its URL, as a user's must. PgBouncer 1.18 keeps no\n")
		p("prepared statement across transactions, so neither may prepare one, and PostgreSQL parses and plans every\n")
		p("statement it is sent; the receiver's parameters go in binary (the statements' descriptions are kept by its\n")
		p("connections), the snippet's as text. pgbench runs (a), the receiver's statements, and (c1), the snippet's, through\n")
		p("the same pooler with `-M extended` (unnamed statements: parsed and planned at every execution, as there): their\n")
		p("ratio, 7p, is what PostgreSQL alone allows target 7 on this pooler. PgBouncer 1.21 and later track protocol-level\n")
		p("named prepared statements in transaction mode when `max_prepared_statements` > 0 (0 by default in 1.21, 200 in the\n")
		p("current documentation): with it, pgx's default statement cache works through the pooler, and each statement is\n")
		p("parsed and planned once per server connection, as in phase 1.\n")
		p("The pooler's CPU is in \"Where the CPU went\" (pooler µs) and the statements in \"Where the database time\n")
		p("went\".\n\n")
		p("| ratio | median | spread |\n|---|---:|---|\n")
		for _, c := range [][2]string{
			{sRecv, sNet}, {sPgAX, sPgC1X}, {sRecv, sPgAX}, {sNet, sPgC1X}, {sRecv, sBase1}, {sBase1, sNet},
		} {
			if s := summarize(perRound(values(r.p7[c[0]], rateOf), values(r.p7[c[1]], rateOf))); s.ok() {
				p("| %s ÷ %s | %.2f | %s |\n", c[0], c[1], s.Median, s.spread("%.2f"))
			}
		}
		p("\n")
	}

	if r.ran[6] && len(r.drains) > 0 {
		p("## Phase 6: redriver drain\n\n")
		p("Each drain seeds %s fulfillment steps directly in the database (kind 'step', status 'in_progress',\n", thousands(int64(r.o.drainSteps)))
		p("claimed_at '-infinity', claim_token 1, attempts 1, each under its own finished checkout event and paid\n")
		p("order), then starts the receiver with FULFILLMENT_URL at a fake API answering in %s,\n", stepsAPI)
		p("REDRIVE_PARALLELISM=%d and REDRIVE_INTERVAL=1s. A drain ends when the API has seen every step's\n", r.o.redriveParallelism)
		p("Idempotency-Key and every step row is done; its rate counts from the API's first call.\n\n")
		p("Calls in flight on average are the calls times %s over the drain's time: N when the redriver keeps N calls\n", stepsAPI)
		p("going all the time.\n\n")
		p("| drain | steps/s | first call → all done | receiver start → first call | calls | distinct keys | repeated | in flight: most | on average | done | parked |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for i, d := range r.drains {
			span, lead, mean := "—", "—", "—"
			if !d.settled.IsZero() && !d.api.first.IsZero() {
				el := d.settled.Sub(d.api.first)
				span = el.Round(10 * time.Millisecond).String()
				mean = fmt.Sprintf("%.1f", float64(d.api.calls)*stepsAPI.Seconds()/el.Seconds())
			}
			if !d.api.first.IsZero() {
				lead = d.api.first.Sub(d.started).Round(10 * time.Millisecond).String()
			}
			p("| %d | %.1f | %s | %s | %d | %d | %d | %d | %s | %d | %d |\n", i+1, d.rate(), span, lead, d.api.calls, d.api.distinct, d.api.repeated,
				d.api.peak, mean, d.done, d.parked)
		}
		p("\n")
	}

	if r.statements && len(r.stmts) > 0 {
		p("## Where the database time went\n\n")
		p("pg_stat_statements of each database over its phase's measured rounds.\n\n")
		for _, s := range r.stmts {
			p("### %s\n\n%s\n", s.title, s.table)
		}
	}
	if r.perf != "" {
		p("## CPU profile of the receiver in phase 1 (perf)\n\n```\n%s```\n\n", trimPerf(r.perf))
	}

	p("## The pgbench scripts\n\n")
	p("bench/pgbench/*.sql, run by `%s -n -M prepared -c %d -j %d -T <slot> -f <script> [-D body=<invoice body>]`\n", "pgbench", r.o.concurrency, min(r.o.concurrency, ncpu))
	p("(prepared statements, as pgx uses; the body travels as a parameter; (c1) also with `-c 1 -j 1`). (a) and (b) run\n")
	p("on a database migrated like the receiver's, (c) and (c1) on the snippet's tables (bench/snippetdb). (a) must\n")
	p("follow the receiver's SQL (internal/webhooks: Processor.commit, claimSQL; internal/customers: Remember).\n\n")
	for _, sc := range []pgbench.Script{pgbench.ReceiverNew, pgbench.MinimalNew, pgbench.SnippetNew, pgbench.SnippetNewTx} {
		p("### (%s) %s: %s\n\n```\n%s```\n\n", sc.ID, sc.File, sc.Title, sc.Text())
	}
	return sb.String()
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

// binaryGo is the Go version a binary was built with.
func binaryGo(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return bi.GoVersion
}

func cpuModel() string { return procField("/proc/cpuinfo", "model name") }

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
