package reconcile

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are this process's series about its periodic runs.
type Metrics struct {
	Runs   *prometheus.CounterVec // source, result: ok, error, busy
	Missed *prometheus.CounterVec // source
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_reconcile_runs_total",
			Help: "Periodic reconciliation runs by source and result (ok, error, busy: another replica held the lock, recent: another replica ran it less than an interval ago).",
		}, []string{"source", "result"}),
		Missed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_reconcile_missed_total",
			Help: "Events reconciliation found that had never been delivered, or discrepancies between a provider's listing and the orders, by source.",
		}, []string{"source"}),
	}
	reg.MustRegister(m.Runs, m.Missed)
	return m
}

// Collector reports, at scrape time, what reconcile_runs says, the same on
// every replica whichever ran: the time of the last successful run of each
// source, and the findings of its last finished run.
type Collector struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	last    *prometheus.Desc
	missed  *prometheus.Desc
	unres   *prometheus.Desc
	timeout time.Duration
}

// NewCollector returns a collector over pool; register it with the
// server's registry.
func NewCollector(pool *pgxpool.Pool, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.Default()
	}
	return &Collector{
		pool: pool,
		log:  log,
		last: prometheus.NewDesc("webhook_reconcile_last_success_timestamp_seconds",
			"When the last successful reconciliation run of the source finished (Unix time).", []string{"source"}, nil),
		missed: prometheus.NewDesc("webhook_reconcile_last_run_missed",
			"Events never delivered (or discrepancies) found by the last finished reconciliation run of the source.", []string{"source"}, nil),
		unres: prometheus.NewDesc("webhook_reconcile_last_run_unresolved",
			"Findings the last finished reconciliation run of the source left for an operator.", []string{"source"}, nil),
		timeout: 5 * time.Second,
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.last
	ch <- c.missed
	ch <- c.unres
}

const lastSuccessSQL = `
SELECT source, extract(epoch FROM max(finished_at))::float8 FROM reconcile_runs
WHERE result = 'ok' GROUP BY source`

const lastRunSQL = `
SELECT DISTINCT ON (source) source, missed, unresolved FROM reconcile_runs
WHERE result <> 'running' ORDER BY source, started_at DESC, id DESC`

// Collect implements prometheus.Collector. A failed query reports nothing
// (and logs why), so a scrape never fails for it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rows, err := c.pool.Query(ctx, lastSuccessSQL)
	if err == nil {
		var source string
		var at float64
		_, err = pgx.ForEachRow(rows, []any{&source, &at}, func() error {
			ch <- prometheus.MustNewConstMetric(c.last, prometheus.GaugeValue, at, source)
			return nil
		})
	}
	if err != nil {
		c.log.Warn("reconcile metrics: read last successful runs", "error", err)
		return
	}
	rows, err = c.pool.Query(ctx, lastRunSQL)
	if err == nil {
		var source string
		var missed, unresolved int
		_, err = pgx.ForEachRow(rows, []any{&source, &missed, &unresolved}, func() error {
			ch <- prometheus.MustNewConstMetric(c.missed, prometheus.GaugeValue, float64(missed), source)
			ch <- prometheus.MustNewConstMetric(c.unres, prometheus.GaugeValue, float64(unresolved), source)
			return nil
		})
	}
	if err != nil {
		c.log.Warn("reconcile metrics: read last runs", "error", err)
	}
}
