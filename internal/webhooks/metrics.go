package webhooks

import (
	"errors"
	"regexp"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the receiver's Prometheus series about deliveries and steps.
// Every label value comes from a closed set: sources and event types from
// the providers' Specs, reasons and outcomes from this package's
// vocabularies, never from a header or field no sender signed.
type Metrics struct {
	Deliveries         *prometheus.CounterVec // source, event_type, outcome
	Rejections         *prometheus.CounterVec // source, reason
	Steps              *prometheus.CounterVec // step, outcome
	LeaseReclaims      prometheus.Counter
	RedriverRuns       *prometheus.CounterVec // result
	APIVersionMismatch *prometheus.CounterVec // source, api_version
	SecretMatches      *prometheus.CounterVec // source, position
	// SignatureMismatches counts the rejections no_valid_signature by the
	// freshness of the timestamp they claimed to sign (fresh, stale, or
	// none for a sender that signs no timestamp): fresh ones are the mark
	// of a sender signing with a secret this receiver does not hold.
	SignatureMismatches *prometheus.CounterVec // source, timestamp
	copies              prometheus.Counter
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_deliveries_total",
			Help: "Verified webhook deliveries by source, event type (\"other\" for types the provider does not act on) and outcome.",
		}, []string{"source", "event_type", "outcome"}),
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_rejections_total",
			Help: "Deliveries refused before anything was written, by reason.",
		}, []string{"source", "reason"}),
		Steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_step_outcomes_total",
			Help: "Attempts of steps that leave the database, by step and outcome (done, failed, parked, skipped, lease_lost).",
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
		SignatureMismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_signature_mismatches_total",
			Help: "Deliveries refused because no signature matched a configured secret, by whether the timestamp they sign was within tolerance (fresh: a sender signing with a secret this receiver lacks), outside it (stale), or not signed at all (none).",
		}, []string{"source", "timestamp"}),
		copies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_signed_body_copies_total",
			Help: "Deliveries whose signed body had been received before under another delivery id (a replay), acknowledged and not acted on.",
		}),
	}
	reg.MustRegister(m.Deliveries, m.Rejections, m.Steps, m.LeaseReclaims, m.RedriverRuns,
		m.APIVersionMismatch, m.SecretMatches, m.SignatureMismatches, m.copies)
	return m
}

func (m *Metrics) stepOutcome(step string, outcome AttemptOutcome) {
	m.Steps.WithLabelValues(step, string(outcome)).Inc()
}

// signatureMismatch counts a no_valid_signature rejection by the freshness
// of its timestamp (RejectError.Timestamp; "none" when it signs none).
func (m *Metrics) signatureMismatch(source string, err error) {
	t := "none"
	var rej *RejectError
	if errors.As(err, &rej) && rej.Timestamp != "" {
		t = string(rej.Timestamp)
	}
	m.SignatureMismatches.WithLabelValues(source, t).Inc()
}

func (m *Metrics) secretMatched(source string, index int) {
	m.SecretMatches.WithLabelValues(source, strconv.Itoa(index)).Inc()
}

// apiVersionLabel is an API version as a label value: a signed field, but
// shaped like one ("2023-10-16", "2024-09-30.acacia") or counted as "other".
func apiVersionLabel(v string) string {
	if len(v) <= 32 && apiVersionShape.MatchString(v) {
		return v
	}
	return "other"
}

var apiVersionShape = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(\.[a-z]{1,20})?$`)
