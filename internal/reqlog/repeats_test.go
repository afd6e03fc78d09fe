package reqlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/reqlog"
)

// fakeClock is a time the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// lines are the JSON log lines written to b.
func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	b.Reset()
	return out
}

func labels(source, reason string) []slog.Attr {
	return []slog.Attr{slog.String("source", source), slog.String("reason", reason)}
}

// TestRepeats: the first line of a kind is written whole, the next ones
// of the period counted; each period they kept coming in is one line with
// the count; after a quiet period the next one is whole again. Kinds are
// counted apart, and Flush writes what is counted.
func TestRepeats(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	r := reqlog.NewRepeats(slog.New(reqlog.NewHandler(slog.NewJSONHandler(&b, nil))), time.Minute, clk.now)
	ctx := reqlog.With(context.Background(), "request_id", "r1")
	refuse := func(reason, detail string) {
		r.Log(ctx, slog.LevelWarn, "delivery rejected", labels("stripe", reason), "reason", reason, "error", detail)
	}

	for i := range 1000 {
		refuse("no_valid_signature", fmt.Sprint("attempt ", i))
		clk.t = clk.t.Add(10 * time.Millisecond) // 10 s in all
	}
	refuse("body_too_large", "")
	got := lines(t, &b)
	if len(got) != 2 || got[0]["error"] != "attempt 0" || got[0]["request_id"] != "r1" || got[1]["reason"] != "body_too_large" {
		t.Fatalf("within the period: %v; want the first of each kind, whole", got)
	}

	clk.t = clk.t.Add(time.Minute)
	refuse("no_valid_signature", "after a minute")
	got = lines(t, &b)
	if len(got) != 1 || got[0]["repeated"] != 999.0 || got[0]["reason"] != "no_valid_signature" || got[0]["source"] != "stripe" ||
		got[0]["msg"] != "delivery rejected" || got[0]["level"] != "WARN" || got[0]["since"] != "2026-12-01T10:00:00Z" {
		t.Fatalf("a minute on: %v; want one line counting the 999 others, and no line for the kind that did not repeat", got)
	}

	clk.t = clk.t.Add(30 * time.Second)
	refuse("no_valid_signature", "still")
	clk.t = clk.t.Add(31 * time.Second)
	refuse("body_too_large", "again, long after")
	got = lines(t, &b)
	if len(got) != 2 || got[0]["repeated"] != 2.0 || got[1]["error"] != "again, long after" {
		t.Fatalf("the next period: %v; want its count (2), then the other kind whole again", got)
	}

	clk.t = clk.t.Add(2 * time.Minute)
	refuse("no_valid_signature", "after a quiet period")
	got = lines(t, &b)
	if len(got) != 1 || got[0]["error"] != "after a quiet period" {
		t.Fatalf("after a quiet period: %v; want the line whole", got)
	}
	refuse("no_valid_signature", "counted")
	r.Flush()
	if got = lines(t, &b); len(got) != 1 || got[0]["repeated"] != 1.0 {
		t.Fatalf("Flush: %v; want the one counted", got)
	}
}

// TestRepeatsBounded: however many kinds a caller makes, at most a few
// hundred are followed; the rest are counted as one.
func TestRepeatsBounded(t *testing.T) {
	var b bytes.Buffer
	clk := &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	r := reqlog.NewRepeats(slog.New(reqlog.NewHandler(slog.NewJSONHandler(&b, nil))), time.Minute, clk.now)
	for i := range 10_000 {
		r.Log(context.Background(), slog.LevelWarn, "refused", []slog.Attr{slog.Int("n", i)})
	}
	if n := len(lines(t, &b)); n > 300 {
		t.Errorf("10,000 kinds wrote %d lines", n)
	}
	r.Flush()
	got := lines(t, &b)
	if len(got) != 1 || got[0]["kind"] != "other" {
		t.Errorf("Flush: %v; want the kinds beyond the bound counted as other", got)
	}
}
