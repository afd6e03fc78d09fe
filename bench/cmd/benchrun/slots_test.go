package main

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOrderVisitsEveryPermutation(t *testing.T) {
	seen := map[string]bool{}
	first := map[int]int{}
	for r := range 6 {
		o := order(3, r)
		seen[fmtInts(o)] = true
		first[o[0]]++
	}
	if len(seen) != 6 {
		t.Errorf("6 rounds of 3 sides visit %d orders, want all 6: %v", len(seen), seen)
	}
	for s := range 3 {
		if first[s] != 2 {
			t.Errorf("side %d runs first in %d of 6 rounds, want 2", s, first[s])
		}
	}
}

func fmtInts(xs []int) string {
	var b strings.Builder
	for _, x := range xs {
		b.WriteByte(byte('0' + x))
		b.WriteByte(' ')
	}
	return b.String()
}

func TestSummarize(t *testing.T) {
	s := summarize([]float64{5, 1, 3, 2, 4})
	if s.N != 5 || s.Median != 3 || s.Q1 != 2 || s.Q3 != 4 || s.Min != 1 || s.Max != 5 {
		t.Errorf("%+v", s)
	}
	s = summarize([]float64{1, 2})
	if s.Median != 1.5 || s.Q1 != 1.25 || s.Q3 != 1.75 {
		t.Errorf("%+v", s)
	}
	if s := summarize(nil); s.ok() || !math.IsNaN(s.Median) || s.spread("%.2f") != "—" {
		t.Errorf("empty: %+v", s)
	}
	if got := perRound([]float64{2, 4, 9}, []float64{1, 0}); !slices.Equal(got, []float64{2}) {
		t.Errorf("perRound %v", got)
	}
}

func TestAlternateRecordsEverySideEachRound(t *testing.T) {
	b := &bench{}
	var ran []string
	mk := func(name string, rate float64) side {
		return side{name, func(context.Context) (sample, error) {
			ran = append(ran, name)
			return sample{rate: rate, n: 10, ok: 10, secs: 1}, nil
		}}
	}
	s, err := b.alternate(context.Background(), "t", 4, []side{mk("A", 100), mk("B", 50), mk("A′", 100)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ran) != 12 || len(s["A"]) != 4 || len(s["B"]) != 4 || len(s["A′"]) != 4 {
		t.Fatalf("ran %v", ran)
	}
	if r := summarize(perRound(values(s["A"], rateOf), values(s["B"], rateOf))); r.Median != 2 {
		t.Errorf("A/B %+v", r)
	}
}

func TestTargetVerdicts(t *testing.T) {
	tg := target{ratio: summarize([]float64{0.97, 0.98, 0.99}), aa: summarize([]float64{0.95, 1.0, 1.05}), need: 1}
	if tg.met() || !tg.withinNoise() {
		t.Errorf("0.98 against ≥ 1 with A/A 0.95–1.05: met %v, within noise %v", tg.met(), tg.withinNoise())
	}
	tg.ratio = summarize([]float64{0.6})
	if tg.met() || tg.withinNoise() {
		t.Errorf("0.6: met %v, within noise %v", tg.met(), tg.withinNoise())
	}
	tg = target{ratio: summarize([]float64{0.5}), need: 1, atMost: true}
	if !tg.met() {
		t.Error("0.5 ≤ 1 not met")
	}
	tg = target{ratio: summarize([]float64{0.99}), aa: summarize([]float64{0.95, 1.0, 1.05}), info: true}
	if tg.withinNoise() {
		t.Error("an informative ratio judged against a threshold")
	}
}

func TestQuickDefaults(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-rounds", "5", "-phases", "1,4"})
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 5 || o.slot != time.Second || o.rows != 200000 || !o.phases[1] || !o.phases[4] || o.phases[2] {
		t.Errorf("%+v", o)
	}
	if _, err := parseFlags([]string{"-phases", "9"}); err == nil {
		t.Error("-phases 9 accepted")
	}
	if o, err := parseFlags([]string{"-phases", "8"}); err != nil || !o.phases[8] {
		t.Errorf("-phases 8: %v", err)
	}
	if _, err := parseFlags([]string{"-slot", "500ms"}); err == nil {
		t.Error("-slot 500ms accepted")
	}
}

func TestBaseDropIndexesFlag(t *testing.T) {
	o, err := parseFlags([]string{"-base-server", "/tmp/x", "-base-drop-indexes", "a_idx, b_idx"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.baseDropIndexes, []string{"a_idx", "b_idx"}) {
		t.Errorf("baseDropIndexes %q", o.baseDropIndexes)
	}
	if _, err := parseFlags([]string{"-base-drop-indexes", "a_idx"}); err == nil {
		t.Error("-base-drop-indexes without -base-server accepted")
	}
	for _, bad := range []string{"a_idx;DROP TABLE invoices", "A_idx", "", "a idx"} {
		if _, err := parseFlags([]string{"-base-server", "/tmp/x", "-base-drop-indexes", "a_idx," + bad}); err == nil {
			t.Errorf("-base-drop-indexes %q accepted", bad)
		}
	}
	r := newReport(o)
	if got := r.baseline(); !strings.Contains(got, "/tmp/x") || !strings.Contains(got, "dropped a_idx, b_idx") {
		t.Errorf("baseline() = %q", got)
	}
}
