package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A measurement alternates short slots of every side of a comparison, many
// times, so that a slow minute of the shared machine weighs on all sides
// alike; each ratio is taken per round (the sides' slots of one round are
// seconds apart) and summarised by its median and spread. One side runs
// twice per round (A and A′, the same thing measured twice): their ratio,
// the A/A control, says how much of a ratio is noise.

// sample is one measured slot of one side.
type sample struct {
	rate      float64 // deliveries answered 2xx per second, or pgbench's tps
	n         int     // deliveries finished (any answer), or pgbench's transactions
	ok        int     // deliveries answered 2xx (pgbench: n)
	secs      float64
	lat       latency // ms; pgbench: avg in P50 only
	cpu       cpuUse
	bodyBytes float64
	status    map[string]int
	errors    map[string]int
	dropped   int
	pgbench   bool
	wal       float64 // WAL bytes the cluster wrote over the slot; -1 unknown (totals: over walN deliveries)
	walN      int
	locks     lockWaits // the lock sampler's, over the measured window
}

type latency struct{ P50, P90, P99, Max float64 }

// side is one thing measured in a comparison.
type side struct {
	name string
	run  func(ctx context.Context) (sample, error)
}

// series holds each side's samples in round order.
type series map[string][]sample

// order is the order of the sides in round i: rotated by i, and reversed
// every other cycle of rotations, so that each side runs first, last and
// after each other side equally often.
func order(n, round int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = (i + round) % n
	}
	if (round/n)%2 == 1 {
		slices.Reverse(idx)
	}
	return idx
}

// alternate runs rounds rounds of every side, one slot each.
func (b *bench) alternate(ctx context.Context, phase string, rounds int, sides []side) (series, error) {
	out := series{}
	for r := range rounds {
		for _, i := range order(len(sides), r) {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			s, err := sides[i].run(ctx)
			if err != nil {
				return out, fmt.Errorf("%s, round %d, %s: %w", phase, r+1, sides[i].name, err)
			}
			out[sides[i].name] = append(out[sides[i].name], s)
			logf("  %s r%-2d %-34s %s", phase, r+1, sides[i].name, s.line())
		}
	}
	return out, nil
}

func (s sample) line() string {
	if s.pgbench {
		return fmt.Sprintf("%8.1f/s  avg %5.1fms", s.rate, s.lat.P50)
	}
	return fmt.Sprintf("%8.1f/s  p50 %5.1fms  p99 %6.1fms  %s", s.rate, s.lat.P50, s.lat.P99, statusText(s.status, s.errors, s.dropped))
}

// rates are the sides' values per round, by f.
func values(xs []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func rateOf(s sample) float64 { return s.rate }
func p99Of(s sample) float64  { return s.lat.P99 }

// perRound is a[i] / b[i] for each round both have.
func perRound(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i := range n {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// summary is the median and spread of some values.
type summary struct {
	N                        int
	Median, Q1, Q3, Min, Max float64
}

func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{Median: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return summary{N: len(s), Median: quantile(s, 0.5), Q1: quantile(s, 0.25), Q3: quantile(s, 0.75), Min: s[0], Max: s[len(s)-1]}
}

// quantile interpolates linearly between the closest ranks of sorted.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

func (s summary) ok() bool { return s.N > 0 && !math.IsNaN(s.Median) }

// spread is "IQR q1–q3, min–max".
func (s summary) spread(format string) string {
	if !s.ok() {
		return "—"
	}
	if s.N == 1 {
		return "1 value"
	}
	f := func(x float64) string { return fmt.Sprintf(format, x) }
	return fmt.Sprintf("IQR %s–%s, range %s–%s (n=%d)", f(s.Q1), f(s.Q3), f(s.Min), f(s.Max), s.N)
}

// pooled merges the samples of several sides measured the same way (A and
// A′) for a figure over all of them.
func pooled(ss ...[]sample) []sample {
	var out []sample
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

// totals adds up the samples' deliveries, CPU, statuses and body sizes.
func totals(xs []sample) sample {
	var t sample
	t.status, t.errors = map[string]int{}, map[string]int{}
	var bodies float64
	for _, x := range xs {
		t.n += x.n
		t.ok += x.ok
		t.secs += x.secs
		t.cpu = t.cpu.add(x.cpu)
		t.dropped += x.dropped
		t.locks = t.locks.add(x.locks)
		bodies += x.bodyBytes * float64(x.n)
		if x.wal >= 0 && x.n > 0 {
			t.wal += x.wal
			t.walN += x.n
		}
		for k, v := range x.status {
			t.status[k] += v
		}
		for k, v := range x.errors {
			t.errors[k] += v
		}
		t.pgbench = x.pgbench
	}
	if t.n > 0 {
		t.bodyBytes = bodies / float64(t.n)
	}
	if t.walN == 0 {
		t.wal = -1
	}
	if t.secs > 0 {
		t.rate = float64(t.ok) / t.secs
	}
	return t
}

func statusText(status, errs map[string]int, dropped int) string {
	var parts []string
	for _, k := range sortedKeys(status) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, status[k]))
	}
	for _, k := range sortedKeys(errs) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, errs[k]))
	}
	if dropped > 0 {
		parts = append(parts, fmt.Sprintf("dropped: %d", dropped))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
