package alerts

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Log is where operators read the alerts kept (ops.AlertLog).
type Log struct{}

// Recent returns the newest alerts kept (Recent).
func (Log) Recent(ctx context.Context, q webhooks.Querier, limit int) ([]ops.Alert, error) {
	return Recent(ctx, q, limit)
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
func Recent(ctx context.Context, q webhooks.Querier, limit int) ([]ops.Alert, error) {
	rows, err := q.Query(ctx, recentSQL, KeyPrefix, KeyPrefix[:len(KeyPrefix)-1]+";", limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ops.Alert, error) {
		var s ops.Alert
		var payload []byte
		if err := r.Scan(&s.Key, &s.Channel, &s.Status, &s.Attempts, &s.LastError, &payload); err != nil {
			return s, err
		}
		var a Alert
		if json.Unmarshal(payload, &a) == nil {
			s.Cause, s.Subject, s.Hour, s.Title = string(a.Cause), a.Subject, a.Hour, a.Title
			s.At, _ = time.Parse(hourLayout, a.Hour)
		}
		return s, nil
	})
}
