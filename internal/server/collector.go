package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// claimCollector reports, at scrape time, what the claims table says: the
// age of the oldest step lease held right now, how many steps wait for a
// worker, and how many events and steps are parked for an operator.
type claimCollector struct {
	pool                        *pgxpool.Pool
	lease                       time.Duration
	oldest, waiting, parked, up *prometheus.Desc
}

func newClaimCollector(pool *pgxpool.Pool, lease time.Duration) *claimCollector {
	return &claimCollector{
		pool:  pool,
		lease: lease,
		oldest: prometheus.NewDesc("webhook_oldest_in_progress_step_age_seconds",
			"Age of the oldest lease on a step not done, given-back leases aside (0 when none). Above LEASE_DURATION, a dead worker's step is waiting.", nil, nil),
		waiting: prometheus.NewDesc("webhook_steps_waiting",
			"Steps not done whose lease ran out or was given back, waiting for a retry or the redriver.", nil, nil),
		parked: prometheus.NewDesc("webhook_parked",
			"Events and steps parked for an operator.", nil, nil),
		up: prometheus.NewDesc("webhook_claims_scrape_ok",
			"1 when the claims table could be read for this scrape.", nil, nil),
	}
}

func (c *claimCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.oldest
	ch <- c.waiting
	ch <- c.parked
	ch <- c.up
}

func (c *claimCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var oldest float64
	var waiting, parked int64
	err := c.pool.QueryRow(ctx, `
SELECT coalesce(extract(epoch FROM now() - min(claimed_at) FILTER (
           WHERE kind = 'step' AND status = 'in_progress' AND claimed_at > '-infinity')), 0)::float8,
       count(*) FILTER (WHERE kind = 'step' AND status = 'in_progress' AND claimed_at < now() - $1 * interval '1 millisecond'),
       count(*) FILTER (WHERE status = 'parked')
FROM processed_events
WHERE status <> 'done'`, c.lease.Milliseconds()).Scan(&oldest, &waiting, &parked)
	if err != nil {
		slog.Warn("metrics: claims table unreadable", "error", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest)
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting))
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(parked))
}
