package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// share is one category's part of a profile: its fraction of the total.
type share struct {
	cat  string
	frac float64
}

// category is a part of a server a profile's samples are attributed to: a
// sample goes to the category of the first frame, from the leaf up, whose
// function starts with one of prefixes. Frames of the runtime, syscall,
// net, io, bufio and the like match nothing and are seen through, so that a
// write to a socket is charged to whoever wrote (pgx, or net/http's
// response), and a malloc to whoever allocated.
type category struct {
	name     string
	prefixes []string
}

// categories are tried frame by frame, in this order for each frame.
var categories = []category{
	{"GC (background workers)", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
	{"pgx (queries, pool, wire protocol)", []string{"github.com/jackc/"}},
	{"signature (HMAC-SHA256, header)", []string{"crypto/", "github.com/stripe/stripe-go/v76/webhook.", "github.com/paywebhooks/receiver/internal/providers/stripe.verify", "github.com/paywebhooks/receiver/internal/webhooks.Verify"}},
	{"JSON decode", []string{"encoding/json", "github.com/go-json-experiment/json", "github.com/paywebhooks/receiver/internal/webhooks.UnmarshalSigned"}},
	{"logging (slog, reqlog)", []string{"log/slog", "github.com/paywebhooks/receiver/internal/reqlog"}},
	{"metrics (Prometheus)", []string{"github.com/prometheus/"}},
	{"tracing (OpenTelemetry)", []string{"go.opentelemetry.io/"}},
	{"Echo (router, context, middleware)", []string{"github.com/labstack/echo"}},
	{"receiver's own code (handler, processor, plan)", []string{"github.com/paywebhooks/receiver/"}},
	{"net/http (connections, request, response)", []string{"net/http.", "net/textproto.", "net/url."}},
	{"snippet's handler", []string{"main."}},
}

// otherCategory collects the samples no frame of which matched: the
// scheduler, the network poller, timers, and the like.
const otherCategory = "runtime (scheduler, poller, other)"

// categoryOrder is the order of the report's rows.
func categoryOrder() []string {
	var out []string
	for _, c := range categories {
		out = append(out, c.name)
	}
	return append(out, otherCategory)
}

// categorize returns the category of a stack, leaf first.
func categorize(stack []string) string {
	for _, fn := range stack {
		for _, c := range categories {
			for _, p := range c.prefixes {
				if strings.HasPrefix(fn, p) {
					return c.name
				}
			}
		}
	}
	return otherCategory
}

// profileShares reads a pprof profile with `go tool pprof -traces` and
// returns each category's share of its samples (sampleIndex: the value to
// read, "" for the profile's default).
func profileShares(ctx context.Context, path, sampleIndex string) ([]share, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("go not on PATH: %w", err)
	}
	args := []string{"tool", "pprof", "-traces"}
	if sampleIndex != "" {
		args = append(args, "-sample_index="+sampleIndex)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, append(args, path)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -traces %s: %w", path, err)
	}
	return sharesOfTraces(string(out)), nil
}

// sharesOfTraces attributes each trace of pprof's -traces output to its
// category. A trace is a value on its leaf's line, then one function per
// line towards the root; traces are separated by a line of dashes.
func sharesOfTraces(text string) []share {
	sums := map[string]float64{}
	var total float64
	var stack []string
	var value float64
	flush := func() {
		if len(stack) > 0 && value > 0 {
			sums[categorize(stack)] += value
			total += value
		}
		stack, value = stack[:0], 0
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "-----------+") {
			flush()
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasSuffix(f[0], ":") {
			continue // the header (File:, Type:, …) and label lines (bytes:…)
		}
		if len(stack) == 0 && !strings.HasPrefix(line, " ") && len(f) >= 2 {
			continue // a header line that is not a trace
		}
		if len(stack) == 0 && len(f) >= 2 {
			if v, ok := parseValue(f[0]); ok {
				value = v
				stack = append(stack, f[1])
				continue
			}
		}
		if value > 0 {
			stack = append(stack, f[0])
		}
	}
	flush()
	var out []share
	if total == 0 {
		return nil
	}
	for _, name := range categoryOrder() {
		if v := sums[name]; v > 0 {
			out = append(out, share{name, v / total})
		}
	}
	return out
}

// parseValue reads a -traces value: a duration (10ms, 1.5s), a size (32kB,
// 1.5MB) or a count.
func parseValue(s string) (float64, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds(), true
	}
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			return v * u.mult, err == nil
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// shareOf is cat's fraction in shares (0 when absent).
func shareOf(shares []share, cat string) float64 {
	i := slices.IndexFunc(shares, func(s share) bool { return s.cat == cat })
	if i < 0 {
		return 0
	}
	return shares[i].frac
}
