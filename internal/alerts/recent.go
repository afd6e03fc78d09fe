package alerts

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Sent is an alert's step on one channel, for operators.
type Sent struct {
	Key     string    `json:"key"`
	Cause   Cause     `json:"cause"`
	Subject string    `json:"subject,omitempty"`
	Hour    string    `json:"hour"`
	Title   string    `json:"title"`
	Channel string    `json:"channel"` // the step's name: alert.webhook, alert.email
	Status  string    `json:"status"`  // the step's claim: done, in_progress (retried), parked, skipped
	At      time.Time `json:"at"`      // when it was raised
	// Attempts and LastError say how sending it went.
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
}

// recentSQL reads the newest alerts, one range of the primary key (alerts
// are few: one per cause, subject, hour and channel, kept for Keep).
const recentSQL = `
SELECT event_key, coalesce(step, ''), status, attempts, coalesce(last_error, ''), payload
FROM processed_events
WHERE event_key >= $1 AND event_key < $2 AND kind = 'step' AND parent_key IS NULL
ORDER BY payload ->> 'hour' DESC, event_key
LIMIT $3`

// Recent returns the newest alerts kept, at most limit steps, newest
// first: what the console's overview shows.
func Recent(ctx context.Context, q webhooks.Querier, limit int) ([]Sent, error) {
	rows, err := q.Query(ctx, recentSQL, KeyPrefix, KeyPrefix[:len(KeyPrefix)-1]+";", limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Sent, error) {
		var s Sent
		var payload []byte
		if err := r.Scan(&s.Key, &s.Channel, &s.Status, &s.Attempts, &s.LastError, &payload); err != nil {
			return s, err
		}
		var a Alert
		if json.Unmarshal(payload, &a) == nil {
			s.Cause, s.Subject, s.Hour, s.Title = a.Cause, a.Subject, a.Hour, a.Title
			s.At, _ = time.Parse(hourLayout, a.Hour)
		}
		return s, nil
	})
}
