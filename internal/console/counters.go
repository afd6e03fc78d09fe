package console

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Rejected deliveries write nothing to the database, so the overview's
// figures of deliveries and rejections over the last hour come from this
// process's own counters (webhook_deliveries_total,
// webhook_rejections_total): sampled every minute, the last hour is the
// difference between now and the sample an hour old. They are this
// replica's, since it started.

const counterWindow = time.Hour

type counterSample struct {
	at     time.Time
	values map[string]float64 // "deliveries|<outcome>", "rejections|<source>|<reason>"
}

type counters struct {
	g   prometheus.Gatherer
	now func() time.Time

	mu      sync.Mutex
	samples []counterSample // oldest first, at most one per minute, the last hour and one more
}

func newCounters(g prometheus.Gatherer, now func() time.Time) *counters {
	return &counters{g: g, now: now}
}

func (c *counters) read() counterSample {
	s := counterSample{at: c.now(), values: map[string]float64{}}
	mfs, err := c.g.Gather()
	if err != nil && len(mfs) == 0 {
		return s
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "webhook_deliveries_total":
			for _, m := range mf.GetMetric() {
				s.values["deliveries|"+label(m.GetLabel(), "outcome")] += m.GetCounter().GetValue()
			}
		case "webhook_rejections_total":
			for _, m := range mf.GetMetric() {
				s.values["rejections|"+label(m.GetLabel(), "source")+"|"+label(m.GetLabel(), "reason")] += m.GetCounter().GetValue()
			}
		}
	}
	return s
}

func label[L interface {
	GetName() string
	GetValue() string
}](ls []L, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sample records the counters now, once a minute at most.
func (c *counters) sample() {
	s := c.read()
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.samples); n > 0 && s.at.Sub(c.samples[n-1].at) < 50*time.Second {
		return
	}
	c.samples = append(c.samples, s)
	// Keep the newest sample at least an hour old, and what follows it.
	for len(c.samples) > 2 && s.at.Sub(c.samples[1].at) >= counterWindow {
		c.samples = c.samples[1:]
	}
}

// Counted is a figure of the last hour.
type Counted struct {
	Name  string
	Count int64
}

// recentCounts is what the overview shows of the counters.
type recentCounts struct {
	Since      time.Duration // how far back the figures go (less than an hour after a start)
	Deliveries []Counted     // by outcome
	Rejections []Counted     // by "source: reason"
}

// recent returns the counters' movement over the last hour (since the
// first sample, when the process is younger; since it started, before any
// sample).
func (c *counters) recent() recentCounts {
	now := c.read()
	c.mu.Lock()
	base := counterSample{at: now.at, values: map[string]float64{}} // no sample yet: since the start
	for i := len(c.samples) - 1; i >= 0; i-- {
		base = c.samples[i]
		if now.at.Sub(base.at) >= counterWindow {
			break
		}
	}
	c.mu.Unlock()
	var r recentCounts
	r.Since = now.at.Sub(base.at).Round(time.Minute)
	for _, k := range slices.Sorted(maps.Keys(now.values)) {
		d := int64(now.values[k] - base.values[k])
		if d <= 0 {
			continue
		}
		kind, name, _ := strings.Cut(k, "|")
		switch kind {
		case "deliveries":
			r.Deliveries = append(r.Deliveries, Counted{Name: name, Count: d})
		case "rejections":
			src, reason, _ := strings.Cut(name, "|")
			r.Rejections = append(r.Rejections, Counted{Name: src + ": " + reason, Count: d})
		}
	}
	return r
}
