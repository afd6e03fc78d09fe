package alerts

import (
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// EndpointFinding is a problem the periodic endpoint check found
// (internal/endpoints): a provider's endpoint that sends this receiver
// less than it acts on, or in a shape it does not read.
type EndpointFinding struct {
	// ID is the finding's identity, the same in every run while it lasts
	// ("stripe:disabled:we_123"): the alert's subject, so that each
	// finding is told once an hour.
	ID string
	// Title says what it is about in a few words; Line is the finding as
	// `server endpoints check` prints it.
	Title, Line string
}

// endpointNote is the findings of the last endpoint check this process
// ran, and until when they hold.
type endpointNote struct {
	findings []EndpointFinding
	until    time.Time
}

// NoteEndpoints records the problems of an endpoint check this process
// ran: the evaluations until until raise an alert for each, once per
// finding and hour across replicas. A later note replaces it (a finding
// that is no longer found is no longer told); past until, a check that
// stopped running tells nothing.
func (m *Monitor) NoteEndpoints(findings []EndpointFinding, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endpoints = endpointNote{findings: append([]EndpointFinding(nil), findings...), until: until}
}

func (m *Monitor) endpointAlerts(now time.Time) ([]Alert, int, error) {
	m.mu.Lock()
	n := m.endpoints
	m.mu.Unlock()
	if !now.Before(n.until) {
		return nil, 0, nil
	}
	out := make([]Alert, 0, len(n.findings))
	for _, f := range n.findings {
		out = append(out, Alert{Cause: CauseEndpoint, Subject: f.ID,
			Title: webhooks.Redact(f.Title, 160),
			Text: webhooks.Redact(f.Line, 2000) + "\n\nFound by the receiver's periodic endpoint check (every RECONCILE_INTERVAL, " +
				"one replica at a time): until it is put right, the provider sends this receiver less than it acts on, or in a " +
				"shape it does not read. `server endpoints check` lists every finding; `--fix` re-enables this receiver's " +
				"endpoints and subscribes them to the missing event types, `--create` makes a missing endpoint. Told once an " +
				"hour while it lasts."})
	}
	return out, len(out), nil
}
