package subscriptions

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/ops"
)

// Owner is the subscriptions' account to operators (ops.Owner): the
// subscriptions of an event's provider its body names, and the last event
// applied to the subscription a search names.
type Owner struct{}

// Row is a subscription as operators see it: its state as the newest
// event applied left it (LastEventID, of EventAt).
type Row struct {
	Source            string     `json:"source"`
	ExternalID        string     `json:"external_id"`
	Status            string     `json:"status"`
	CustomerID        string     `json:"customer_id,omitempty"`
	CurrentPeriodEnd  *time.Time `json:"current_period_end,omitempty"`
	CancelAtPeriodEnd bool       `json:"cancel_at_period_end"`
	AccountID         string     `json:"account_id,omitempty"`
	EventAt           time.Time  `json:"event_at"`
	LastEventID       string     `json:"last_event_id"`
	UpdatedAt         time.Time  `json:"updated_at"`
	Wrote             bool       `json:"wrote"`
}

// relatedSQL reads the subscriptions of source $1 whose id is among the
// ids $2 of an event's body; $3 is its claim's time.
const relatedSQL = `
SELECT source, external_id, status, coalesce(customer_id, ''), current_period_end, cancel_at_period_end,
       coalesce(account_id, ''), event_at, provider_event_id, updated_at, created_at = $3 OR updated_at = $3
FROM subscriptions WHERE source = $1 AND external_id = ANY($2)
ORDER BY id LIMIT 50`

// Name is the key of subscriptions in an event's records.
func (Owner) Name() string { return "subscriptions" }

// Related looks up the subscriptions e concerns.
func (Owner) Related(e ops.Concern) ops.Lookup {
	return ops.Lookup{SQL: relatedSQL, Args: []any{e.Source, e.IDs, e.ReceivedAt},
		Row: func(row pgx.CollectableRow) (ops.Row, error) {
			var s Row
			err := row.Scan(&s.Source, &s.ExternalID, &s.Status, &s.CustomerID, &s.CurrentPeriodEnd, &s.CancelAtPeriodEnd,
				&s.AccountID, &s.EventAt, &s.LastEventID, &s.UpdatedAt, &s.Wrote)
			return s, err
		}}
}

// Search finds the last event applied to the subscription the text names.
func (Owner) Search(t *ops.Term) ops.Search {
	return t.LastEventOf("subscriptions", "external_id")
}

// Line is the subscription in the operators' tables.
func (s Row) Line() ops.Line {
	l := ops.Line{Kind: "subscription", Source: s.Source, ID: s.ExternalID, Status: s.Status, Customer: s.CustomerID,
		Updated: s.UpdatedAt, AsOf: s.LastEventID, Wrote: s.Wrote}
	if s.CancelAtPeriodEnd {
		l.Notes = append(l.Notes, ops.Note{Label: "cancels at period end"})
	}
	l.Notes = append(l.Notes, ops.Notes(
		ops.Note{Label: "period ends", At: s.CurrentPeriodEnd},
		ops.Note{Label: "account", Text: s.AccountID})...)
	return l
}
