package webhooks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// ClaimGauges reports, at scrape time, what the claims table says: the age
// of the oldest step lease held right now, how many steps wait for a
// worker, and how many claims (and events) are parked for an operator, as
// ParkedCountsSQL counts them. Each figure comes
// from a partial index (open steps, parked claims), all three in one round
// trip on one pooled connection, and is cached for TTL: scrapes, however
// frequent or concurrent, cost the database at most one such round trip
// per TTL.
type ClaimGauges struct {
	pool  *pgxpool.Pool
	lease time.Duration
	ttl   time.Duration
	log   *slog.Logger

	mu                            sync.Mutex
	at                            time.Time
	ok                            bool
	oldest                        float64
	waiting, parked, parkedEvents int64

	descOldest, descWaiting, descParked, descParkedEvents, descUp *prometheus.Desc
}

// NewClaimGauges returns the collector; register it with a registry.
func NewClaimGauges(pool *pgxpool.Pool, lease, ttl time.Duration, log *slog.Logger) *ClaimGauges {
	return &ClaimGauges{
		pool: pool, lease: lease, ttl: ttl, log: log,
		descOldest: prometheus.NewDesc("webhook_oldest_in_progress_step_age_seconds",
			"Age of the oldest lease on a step not done, given-back leases aside (0 when none). Above LEASE_DURATION, a dead worker's step is waiting.", nil, nil),
		descWaiting: prometheus.NewDesc("webhook_steps_waiting",
			"Steps not done whose lease ran out or was given back, waiting for a retry or the redriver.", nil, nil),
		descParked: prometheus.NewDesc("webhook_parked",
			"Claims of events (their own and their steps') parked for an operator; resolved ones are not.", nil, nil),
		descParkedEvents: prometheus.NewDesc("webhook_parked_events",
			"Events with anything parked for an operator (the console's Parked figure).", nil, nil),
		descUp: prometheus.NewDesc("webhook_claims_scrape_ok",
			"1 when the claims table could be read for this scrape (or within the cache window).", nil, nil),
	}
}

var (
	oldestLeaseSQL = `SELECT coalesce(extract(epoch FROM now() - min(claimed_at)), 0)::float8 FROM processed_events
WHERE kind = 'step' AND status = 'in_progress' AND claimed_at > '-infinity'`
	waitingStepsSQL = `SELECT count(*) FROM processed_events
WHERE kind = 'step' AND status = 'in_progress' AND ` + leaseExpired("$1")
)

// ParkedCountsSQL counts what waits for an operator: the parked claims of
// events (their own and their steps'; a standalone step, such as an
// alert's, is no event's) and the events they belong to, from the attention
// index. The metrics, the console's overview and the alerts all read it,
// so that they agree; a resolved claim is not parked.
const ParkedCountsSQL = `SELECT count(*), count(DISTINCT coalesce(parent_key, event_key)) FROM processed_events
WHERE status = 'parked' AND (kind = 'event' OR parent_key IS NOT NULL)`

// ParkedEventsSQL lists the keys of the events ParkedCountsSQL counts, as
// a column "key": a sub-query for listings and charts.
const ParkedEventsSQL = `SELECT DISTINCT coalesce(parent_key, event_key) AS key FROM processed_events
WHERE status = 'parked' AND (kind = 'event' OR parent_key IS NOT NULL)`

// Describe implements prometheus.Collector.
func (g *ClaimGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.descOldest
	ch <- g.descWaiting
	ch <- g.descParked
	ch <- g.descParkedEvents
	ch <- g.descUp
}

// Collect implements prometheus.Collector.
func (g *ClaimGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.at) >= g.ttl {
		g.refresh()
	}
	if !g.ok {
		ch <- prometheus.MustNewConstMetric(g.descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(g.descUp, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(g.descOldest, prometheus.GaugeValue, g.oldest)
	ch <- prometheus.MustNewConstMetric(g.descWaiting, prometheus.GaugeValue, float64(g.waiting))
	ch <- prometheus.MustNewConstMetric(g.descParked, prometheus.GaugeValue, float64(g.parked))
	ch <- prometheus.MustNewConstMetric(g.descParkedEvents, prometheus.GaugeValue, float64(g.parkedEvents))
}

func (g *ClaimGauges) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	g.at = time.Now()
	b := &pgx.Batch{}
	b.Queue(oldestLeaseSQL)
	b.Queue(waitingStepsSQL, g.lease.Milliseconds())
	b.Queue(ParkedCountsSQL)
	br := g.pool.SendBatch(ctx, b)
	err := br.QueryRow().Scan(&g.oldest)
	if err == nil {
		err = br.QueryRow().Scan(&g.waiting)
	}
	if err == nil {
		err = br.QueryRow().Scan(&g.parked, &g.parkedEvents)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	g.ok = err == nil
	if err != nil {
		g.log.Warn("metrics: claims table unreadable", "error", err)
	}
}
