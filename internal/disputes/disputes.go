// Package disputes holds disputes (chargebacks: Stripe's dp_…) and the SQL
// that writes them: one row per dispute, unique by source and the
// provider's id, whose state is the newest event's.
//
// Each event of a dispute carries the whole dispute as it was when the
// event happened. A row keeps the time of the last event applied
// (event_at: Stripe's signed created, in seconds); an older event changes
// nothing, one of the same time is applied (the later arrival wins), and a
// closed status (won, lost, warning_closed) is final: no event of an open
// status moves the dispute after it is closed. Between two closed
// outcomes of one dispute the newer event wins, and of the same second the
// later in Final (won over lost over warning_closed), so that they too
// converge in either order (Stripe's support: "It may still be possible to
// have your customer withdraw the dispute, even after the dispute is
// closed"; a withdrawal is what would turn a loss into a win). The event
// that opens a dispute only inserts it (Open), so that a later event of
// the same second (Stripe makes funds_withdrawn with created) wins in
// either order. Every write is one statement, conditional on
// receiver_claimed(), queued on the event's transaction. What a dispute
// does to its order (dispute_lost) is internal/orders' FollowDisputes.
//
// The notice of a new dispute is planned on Opened: once per dispute,
// whichever order its events arrive in and however often they are
// replayed.
package disputes

import "time"

// Queue is where writes go: the event's transaction (*webhooks.Plan).
type Queue interface {
	Exec(sql string, args ...any)
}

// Final are the statuses of a closed dispute, which no open status
// follows; of two of one second, the later in this list wins.
var Final = []string{"warning_closed", "lost", "won"}

// Dispute is a dispute's state as one event carries it.
type Dispute struct {
	Source          string
	ExternalID      string // dp_…
	ChargeID        string
	PaymentIntentID string
	AmountCents     int64
	Currency        string
	Reason          string // fraudulent, product_not_received, general, …
	Status          string // needs_response, under_review, won, lost, warning_needs_response, …
	EvidenceDueBy   time.Time
	AccountID       string
	EventID         string
	At              time.Time // when the event happened, as the provider signed it
}

const insertSQL = `
INSERT INTO disputes AS d (source, external_id, charge_id, payment_intent_id, amount_cents, currency, reason, status,
                           evidence_due_by, account_id, event_at, provider_event_id, notified_event_id)
SELECT $1, $2, NULLIF($3, ''), NULLIF($4, ''), $5, $6, NULLIF($7, ''), $8, $9::timestamptz, NULLIF($10, ''), $11, $12,
       NULLIF($13, '')
WHERE receiver_claimed()
`

func args(d Dispute, notify string) []any {
	var due any
	if !d.EvidenceDueBy.IsZero() {
		due = d.EvidenceDueBy
	}
	return []any{d.Source, d.ExternalID, d.ChargeID, d.PaymentIntentID, d.AmountCents, d.Currency, d.Reason,
		d.Status, due, d.AccountID, d.At, d.EventID, notify}
}

// Open records a new dispute if it has no row yet, and marks its notice as
// due from this event if no event marked it before: the dispute's created
// event, which a later event of the same dispute supersedes.
func Open(q Queue, d Dispute) {
	q.Exec(insertSQL+`ON CONFLICT (source, external_id) DO NOTHING`, args(d, d.EventID)...)
	q.Exec(`UPDATE disputes SET notified_event_id = $3
WHERE receiver_claimed() AND source = $1 AND external_id = $2 AND notified_event_id IS NULL`,
		d.Source, d.ExternalID, d.EventID)
}

// Apply gives the dispute d's state, creating its row if absent, unless
// the last event applied is newer than d (one of the same time is applied:
// the later arrival wins) or the dispute is closed. A closed dispute takes
// only a closed state of a newer event, or of the same second and later
// in Final.
func Apply(q Queue, d Dispute) {
	q.Exec(insertSQL+`
ON CONFLICT (source, external_id) DO UPDATE
    SET charge_id = coalesce(EXCLUDED.charge_id, d.charge_id),
        payment_intent_id = coalesce(EXCLUDED.payment_intent_id, d.payment_intent_id),
        amount_cents = EXCLUDED.amount_cents, currency = EXCLUDED.currency,
        reason = coalesce(EXCLUDED.reason, d.reason), status = EXCLUDED.status,
        evidence_due_by = coalesce(EXCLUDED.evidence_due_by, d.evidence_due_by),
        account_id = coalesce(d.account_id, EXCLUDED.account_id),
        event_at = EXCLUDED.event_at, provider_event_id = EXCLUDED.provider_event_id, updated_at = now()
    WHERE (d.status <> ALL ($14) AND EXCLUDED.event_at >= d.event_at)
       OR (EXCLUDED.status = ANY ($14) AND (EXCLUDED.event_at > d.event_at
           OR (EXCLUDED.event_at = d.event_at AND array_position($14, EXCLUDED.status) > array_position($14, d.status))))`,
		append(args(d, ""), Final)...)
}

// Opened is a step condition (webhooks.Plan.StepIf): it holds when this
// transaction marked the dispute's notice as due from the event (Open).
func Opened(source, externalID, eventID string) (string, []any) {
	return `SELECT NULL::jsonb FROM disputes d
WHERE d.source = $1 AND d.external_id = $2 AND d.notified_event_id = $3 AND d.xmin = pg_current_xact_id()::xid`,
		[]any{source, externalID, eventID}
}
