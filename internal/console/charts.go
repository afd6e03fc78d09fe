package console

import (
	"fmt"
	"time"

	"github.com/paywebhooks/receiver/internal/ops"
)

// The overview's charts are inline SVG drawn here: rectangles and text
// with classes the stylesheet colours. Nothing is fetched, and no script
// or inline style is needed, as the CSP wants.

// chart is one bar chart: a bar per bucket, stacked by series.
type chart struct {
	Width, Height int
	Bars          []bar
	Ticks         []tick
	Max           int64
	Empty         bool
	Legend        []string
}

type bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type tick struct {
	X, Y float64
	Text string
	End  bool // text-anchor end
}

const (
	chartW, chartH        = 720, 180
	chartLeft, chartRight = 44, 8
	chartTop, chartBottom = 10, 22
)

// stateChart stacks each bucket's events by state, in series order.
func stateChart(a ops.Activity, series []string, loc *time.Location) chart {
	c := chart{Width: chartW, Height: chartH, Legend: series}
	for _, b := range a.Buckets {
		c.Max = max(c.Max, b.Total())
	}
	c.Empty = c.Max == 0
	top := niceCeil(max(c.Max, 1))
	plotW := float64(chartW - chartLeft - chartRight)
	plotH := float64(chartH - chartTop - chartBottom)
	n := max(len(a.Buckets), 1)
	slot := plotW / float64(n)
	w := slot * 0.8
	for i, b := range a.Buckets {
		x := chartLeft + float64(i)*slot + (slot-w)/2
		y := float64(chartTop) + plotH
		for _, s := range series {
			v := b.States[s]
			if v == 0 {
				continue
			}
			h := plotH * float64(v) / float64(top)
			y -= h
			c.Bars = append(c.Bars, bar{X: x, Y: y, W: w, H: h, Class: "s-" + s,
				Title: fmt.Sprintf("%s: %d %s", b.Start.In(loc).Format("Jan 2 15:04"), v, s)})
		}
		if i%4 == 0 {
			c.Ticks = append(c.Ticks, tick{X: x + w/2, Y: chartH - 6, Text: b.Start.In(loc).Format("15:04")})
		}
	}
	for _, f := range []int64{0, top / 2, top} {
		c.Ticks = append(c.Ticks, tick{X: chartLeft - 6, Y: float64(chartTop) + plotH - plotH*float64(f)/float64(top) + 4,
			Text: fmt.Sprint(f), End: true})
	}
	return c
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten.
func niceCeil(n int64) int64 {
	p := int64(1)
	for {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
		p *= 10
	}
}
