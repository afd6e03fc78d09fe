package alerts

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a Monitor's series, labelled by cause (a closed set:
// Causes). What became of each alert's sending is its steps':
// webhook_step_outcomes_total{step="alert.webhook"|"alert.email"}.
type Metrics struct {
	Raised     *prometheus.CounterVec // cause
	Conditions *prometheus.GaugeVec   // cause
}

// NewMetrics registers the series with reg, every cause at zero.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Raised: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_alerts_total",
			Help: "Alerts this replica raised (claimed for its hour, then sent or left to the redriver), by cause.",
		}, []string{"cause"}),
		Conditions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhook_alert_conditions",
			Help: "For how many subjects each cause's condition held when this replica last evaluated it (providers; 1 for parked: anything is parked).",
		}, []string{"cause"}),
	}
	for _, c := range Causes {
		m.Raised.WithLabelValues(string(c))
		m.Conditions.WithLabelValues(string(c))
	}
	reg.MustRegister(m.Raised, m.Conditions)
	return m
}
