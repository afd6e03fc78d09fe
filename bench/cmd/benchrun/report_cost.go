package main

import (
	"fmt"
	"strings"
)

// costSection renders the cost per new event and per replay (the rounds'
// CPU and WAL beside the cost windows' round trips and allocations), and
// where the servers' CPU and allocations go.
func (r *report) costSection() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	sides := []string{sRecv, sNet, sSnip}
	for _, ph := range []struct {
		n     int
		title string
		s     series
		cost  []costResult
	}{{1, "Cost per new event", r.p1, r.cost1}, {2, "Cost per replay", r.p2, r.cost2}} {
		if !r.ran[ph.n] || len(ph.s) == 0 {
			continue
		}
		p("## %s\n\n", ph.title)
		what := "new invoice.created event"
		if ph.n == 2 {
			what = "replay of a finished invoice.created event"
		}
		p("Measured %s. Per %s (%.0f-byte body), at concurrency %d. CPU and WAL over phase %d's\n",
			r.started.UTC().Format("2006-01-02"), what, totals(ph.s[sRecv]).bodyBytes, r.o.concurrency, ph.n)
		p("rounds (bin/server, the receiver′ slots included); round trips, bytes and allocations over a cost window of\n")
		p("%s per server (its profiling build, through a proxy that counts round trips: a flight of messages the\n", r.o.costTime)
		p("client sends before it next hears from PostgreSQL is one).\n\n")
		p("| per %s | %s |\n|---|%s\n", map[int]string{1: "new event", 2: "replay"}[ph.n], strings.Join(sides, " | "), strings.Repeat("---:|", len(sides)))
		tot := map[string]sample{}
		cost := map[string]costResult{}
		for _, s := range sides {
			xs := ph.s[s]
			if s == sRecv {
				xs = pooled(ph.s[sRecv], ph.s[sRecv2])
			}
			tot[s] = totals(xs)
		}
		for _, c := range ph.cost {
			if c.err == nil && c.n > 0 {
				cost[c.side] = c
			}
		}
		row := func(label string, f func(s string) string) {
			var cells []string
			for _, s := range sides {
				cells = append(cells, f(s))
			}
			p("| %s | %s |\n", label, strings.Join(cells, " | "))
		}
		perRoundFig := func(get func(t sample) float64) func(string) string {
			return func(s string) string {
				t := tot[s]
				if t.n == 0 {
					return "—"
				}
				return fmt.Sprintf("%.0f", get(t)/float64(t.n))
			}
		}
		costFig := func(format string, get func(c costResult) float64) func(string) string {
			return func(s string) string {
				c, ok := cost[s]
				if !ok {
					return "—"
				}
				return fmt.Sprintf(format, c.per(get(c)))
			}
		}
		row("server CPU, µs", perRoundFig(func(t sample) float64 { return t.cpu.Server * 1e6 }))
		row("PostgreSQL CPU, µs", perRoundFig(func(t sample) float64 { return t.cpu.Postgres * 1e6 }))
		row("WAL bytes", func(s string) string {
			t := tot[s]
			if t.wal < 0 || t.walN == 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f", t.wal/float64(t.walN))
		})
		row("round trips to PostgreSQL", costFig("%.2f", func(c costResult) float64 { return c.roundTrips }))
		row("bytes sent to PostgreSQL", costFig("%.0f", func(c costResult) float64 { return c.sent }))
		row("bytes received from PostgreSQL", costFig("%.0f", func(c costResult) float64 { return c.recvd }))
		row("heap allocations", costFig("%.0f", func(c costResult) float64 { return c.mallocs }))
		row("bytes allocated", costFig("%.0f", func(c costResult) float64 { return c.allocBytes }))
		row("server CPU in the cost window, µs", costFig("%.0f", func(c costResult) float64 { return c.serverCPU * 1e6 }))
		p("\n")
		for _, c := range ph.cost {
			if c.err != nil {
				p("The cost window of %s did not finish: `%s`\n\n", c.side, oneLine(c.err.Error(), 300))
			}
		}
		if len(cost) > 0 {
			r.categoryTables(&sb, ph.n, sides, cost)
		}
	}
	return sb.String()
}

// categoryTables renders where the servers' CPU and allocations went in
// phase n's cost windows.
func (r *report) categoryTables(sb *strings.Builder, n int, sides []string, cost map[string]costResult) {
	p := func(format string, args ...any) { fmt.Fprintf(sb, format, args...) }
	header := func(first string) {
		p("| %s | %s |\n|---|%s\n", first, strings.Join(sides, " | "), strings.Repeat("---:|", len(sides)))
	}
	p("Where the server's CPU went in phase %d's cost windows: each CPU profile sample goes to the first frame from the\n", n)
	p("leaf up that belongs to a category (the runtime, syscalls and the standard library's plumbing are seen through, so\n")
	p("a socket write counts for whoever wrote, an allocation for whoever allocated; bench/cmd/benchrun/profile.go).\n")
	p("µs per delivery: the category's share of the samples × the window's server CPU per delivery.\n\n")
	header("CPU, µs per delivery (share)")
	for _, cat := range categoryOrder() {
		var cells []string
		found := false
		for _, s := range sides {
			c, ok := cost[s]
			f := shareOf(c.cpuCats, cat)
			if !ok || f == 0 {
				cells = append(cells, "—")
				continue
			}
			found = true
			cells = append(cells, fmt.Sprintf("%.0f (%.0f%%)", f*c.per(c.serverCPU)*1e6, 100*f))
		}
		if found {
			p("| %s | %s |\n", cat, strings.Join(cells, " | "))
		}
	}
	p("\nAllocations per delivery by category (the allocation profile's objects, sampled, scaled to the counted total):\n\n")
	header("allocations per delivery")
	for _, cat := range categoryOrder() {
		var cells []string
		found := false
		for _, s := range sides {
			c, ok := cost[s]
			f := shareOf(c.allocCats, cat)
			if !ok || f == 0 {
				cells = append(cells, "—")
				continue
			}
			found = true
			cells = append(cells, fmt.Sprintf("%.0f", f*c.per(c.mallocs)))
		}
		if found {
			p("| %s | %s |\n", cat, strings.Join(cells, " | "))
		}
	}
	var files []string
	for _, s := range sides {
		if c, ok := cost[s]; ok {
			files = append(files, "`"+c.cpuProfile+"`", "`"+c.allocProf+"`")
		}
	}
	p("\nProfiles (`go tool pprof -top FILE`; `-sample_index=alloc_space` for bytes): %s.\n\n", strings.Join(files, ", "))
}
