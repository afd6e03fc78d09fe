package disputes

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/ops"
)

// Owner is the disputes' account to operators (ops.Owner): the disputes
// an event's body names (by their id, of its provider, or by their
// payment intent), and the last event applied to the dispute a search
// names.
type Owner struct{}

// Row is a dispute as operators see it.
type Row struct {
	Source          string     `json:"source"`
	ExternalID      string     `json:"external_id"`
	PaymentIntentID string     `json:"payment_intent_id,omitempty"`
	ChargeID        string     `json:"charge_id,omitempty"`
	AmountCents     int64      `json:"amount_cents"`
	Currency        string     `json:"currency"`
	Reason          string     `json:"reason,omitempty"`
	Status          string     `json:"status"`
	EvidenceDueBy   *time.Time `json:"evidence_due_by,omitempty"`
	AccountID       string     `json:"account_id,omitempty"`
	LastEventID     string     `json:"last_event_id"`
	UpdatedAt       time.Time  `json:"updated_at"`
	Wrote           bool       `json:"wrote"`
}

// relatedSQL reads the disputes of source $1 whose id, or any dispute
// whose payment intent, is among the ids $2 of an event's body; $3 is its
// claim's time.
const relatedSQL = `
SELECT source, external_id, coalesce(payment_intent_id, ''), coalesce(charge_id, ''), amount_cents, currency,
       coalesce(reason, ''), status, evidence_due_by, coalesce(account_id, ''), provider_event_id, updated_at,
       created_at = $3 OR updated_at = $3
FROM disputes WHERE (source = $1 AND external_id = ANY($2)) OR payment_intent_id = ANY($2)
ORDER BY id LIMIT 50`

// Name is the key of disputes in an event's records.
func (Owner) Name() string { return "disputes" }

// Related looks up the disputes e concerns.
func (Owner) Related(e ops.Concern) ops.Lookup {
	return ops.Lookup{SQL: relatedSQL, Args: []any{e.Source, e.IDs, e.ReceivedAt},
		Row: func(row pgx.CollectableRow) (ops.Row, error) {
			var x Row
			err := row.Scan(&x.Source, &x.ExternalID, &x.PaymentIntentID, &x.ChargeID, &x.AmountCents, &x.Currency, &x.Reason,
				&x.Status, &x.EvidenceDueBy, &x.AccountID, &x.LastEventID, &x.UpdatedAt, &x.Wrote)
			return x, err
		}}
}

// Search finds the last event applied to the dispute the text names.
func (Owner) Search(t *ops.Term) ops.Search {
	return t.LastEventOf("disputes", "external_id")
}

// Line is the dispute in the operators' tables.
func (x Row) Line() ops.Line {
	return ops.Line{Kind: "dispute", Source: x.Source, ID: x.ExternalID, Status: x.Status,
		Amount: ops.Money(x.AmountCents, x.Currency), Updated: x.UpdatedAt, AsOf: x.LastEventID, Wrote: x.Wrote,
		Notes: ops.Notes(
			ops.Note{Label: "payment", Text: x.PaymentIntentID},
			ops.Note{Label: "reason", Text: x.Reason},
			ops.Note{Label: "evidence due", At: x.EvidenceDueBy},
			ops.Note{Label: "account", Text: x.AccountID})}
}
