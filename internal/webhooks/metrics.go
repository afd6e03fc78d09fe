package webhooks

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the receiver's Prometheus series about deliveries and steps.
type Metrics struct {
	Deliveries         *prometheus.CounterVec // source, event_type, outcome
	Rejections         *prometheus.CounterVec // source, reason
	Steps              *prometheus.CounterVec // step, outcome
	LeaseReclaims      prometheus.Counter
	RedriverRuns       *prometheus.CounterVec // result
	APIVersionMismatch *prometheus.CounterVec // source, api_version
	SecretMatches      *prometheus.CounterVec // source, position
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_deliveries_total",
			Help: "Verified webhook deliveries by source, event type and outcome.",
		}, []string{"source", "event_type", "outcome"}),
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_rejections_total",
			Help: "Deliveries refused before anything was written, by reason.",
		}, []string{"source", "reason"}),
		Steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_step_outcomes_total",
			Help: "Attempts of steps that leave the database, by step and outcome.",
		}, []string{"step", "outcome"}),
		LeaseReclaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_lease_reclaims_total",
			Help: "Step leases taken back after they ran out or were given back.",
		}),
		RedriverRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_redriver_runs_total",
			Help: "Redriver passes by result (idle, worked, error).",
		}, []string{"result"}),
		APIVersionMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_api_version_mismatches_total",
			Help: "Events whose API version differs from the one the receiver was built against.",
		}, []string{"source", "api_version"}),
		SecretMatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_secret_matches_total",
			Help: "Verified deliveries by the position of the configured secret that matched.",
		}, []string{"source", "position"}),
	}
	reg.MustRegister(m.Deliveries, m.Rejections, m.Steps, m.LeaseReclaims, m.RedriverRuns,
		m.APIVersionMismatch, m.SecretMatches)
	return m
}

func (m *Metrics) stepOutcome(step, outcome string) {
	m.Steps.WithLabelValues(step, outcome).Inc()
}

func (m *Metrics) secretMatched(source string, index int) {
	m.SecretMatches.WithLabelValues(source, strconv.Itoa(index)).Inc()
}
