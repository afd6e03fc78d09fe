package entitlements

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Store reads and computes subjects' entitlements outside an event's
// transaction: what the API, the CLI and the console show, and the
// changes no event makes (Job, a Checkout's line items).
type Store struct {
	Pool *pgxpool.Pool
}

// Get is the subject's latest version, as the app was (or is being)
// told: version 0 and no entitlements for a subject never seen.
func (s Store) Get(ctx context.Context, subject string) (Body, error) {
	b := Body{Subject: subject, Entitlements: []Entitlement{}}
	var raw []byte
	err := s.Pool.QueryRow(ctx, `SELECT version, entitlements FROM entitlement_subjects WHERE subject = $1`, subject).
		Scan(&b.Version, &raw)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return b, nil
	case err != nil:
		return Body{}, fmt.Errorf("entitlements of %s: %w", subject, err)
	}
	if err := json.Unmarshal(raw, &b.Entitlements); err != nil {
		return Body{}, fmt.Errorf("entitlements of %s: %w", subject, err)
	}
	return b, nil
}

// GrantRow is one thing that grants a key now.
type GrantRow struct {
	Key      string     `json:"key"`
	State    string     `json:"state"`
	Until    *time.Time `json:"until"`
	Source   string     `json:"source"`
	Kind     string     `json:"kind"` // subscription, order, stripe_features
	ObjectID string     `json:"object_id"`
	Status   string     `json:"status"`
	Item     string     `json:"item"` // the catalogue id it matched
}

// Shown is a subject as an operator sees it: its latest version, what
// the app last answered 2xx for, and what grants each key now.
type Shown struct {
	Body
	AckedVersion int64      `json:"acked_version"`
	Grants       []GrantRow `json:"grants"`
	// Customers are the provider customers whose rows are the subject's.
	Customers []string `json:"customers"`
}

// Show reads the subject's latest version and what grants each key now.
func (s Store) Show(ctx context.Context, subject string) (Shown, error) {
	b, err := s.Get(ctx, subject)
	if err != nil {
		return Shown{}, err
	}
	out := Shown{Body: b, Grants: []GrantRow{}, Customers: []string{}}
	if err := s.Pool.QueryRow(ctx, `SELECT coalesce((SELECT acked_version FROM entitlement_subjects WHERE subject = $1), 0)`,
		subject).Scan(&out.AckedVersion); err != nil {
		return Shown{}, fmt.Errorf("entitlements of %s: %w", subject, err)
	}
	rows, err := s.Pool.Query(ctx, `SELECT key, state, until, source, kind, object_id, status, item
FROM entitlement_grants($1, clock_timestamp()) ORDER BY key, state, source, object_id, item`, subject)
	if err != nil {
		return Shown{}, fmt.Errorf("grants of %s: %w", subject, err)
	}
	out.Grants, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (GrantRow, error) {
		var g GrantRow
		err := r.Scan(&g.Key, &g.State, &g.Until, &g.Source, &g.Kind, &g.ObjectID, &g.Status, &g.Item)
		return g, err
	})
	if err != nil {
		return Shown{}, fmt.Errorf("grants of %s: %w", subject, err)
	}
	rows, err = s.Pool.Query(ctx, `
SELECT DISTINCT k FROM (SELECT $1::text AS k
    UNION SELECT customer_key FROM subscriptions WHERE app_user_id = $1 AND customer_key IS NOT NULL
    UNION SELECT customer_key FROM orders WHERE app_user_id = $1 AND customer_key IS NOT NULL) AS c
WHERE entitlement_subject_of(k) = $1 AND (EXISTS (SELECT 1 FROM subscriptions WHERE customer_key = k)
      OR EXISTS (SELECT 1 FROM orders WHERE customer_key = k)) ORDER BY k`, subject)
	if err != nil {
		return Shown{}, fmt.Errorf("customers of %s: %w", subject, err)
	}
	if out.Customers, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return Shown{}, fmt.Errorf("customers of %s: %w", subject, err)
	}
	return out, nil
}

// SubjectsOfEvent are the subjects the rows an event wrote belong to, and
// those its entitlements steps told: what the console's event page links
// to.
func (s Store) SubjectsOfEvent(ctx context.Context, eventKey string) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `
SELECT DISTINCT x FROM (
    SELECT t ->> 'subject' AS x FROM processed_events p, jsonb_array_elements(p.payload -> 'subjects') AS t
    WHERE p.parent_key = $1 AND p.step_kind = $2 AND jsonb_typeof(p.payload -> 'subjects') = 'array'
    UNION SELECT CASE WHEN customer_key IS NULL THEN app_user_id ELSE entitlement_subject_of(customer_key) END
    FROM orders WHERE provider_event_id = $1
    UNION SELECT CASE WHEN customer_key IS NULL THEN app_user_id ELSE entitlement_subject_of(customer_key) END
    FROM subscriptions WHERE provider_event_id = $1) AS s
WHERE x IS NOT NULL ORDER BY x`, eventKey, KindNotify)
	if err != nil {
		return nil, fmt.Errorf("subjects of %s: %w", eventKey, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SetOrderItems records what an order is for once it is known (a Stripe
// Checkout Session's line items, read from the API), and computes its
// subject's entitlements again, in one transaction. The step that tells
// the app is planned by PlanPending.
func (s Store) SetOrderItems(ctx context.Context, source, externalID string, items []Item) error {
	raw, err := json.Marshal(items)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var customer, user *string
		err := tx.QueryRow(ctx, `
UPDATE orders SET items = $3::jsonb, updated_at = now()
WHERE source = $1 AND external_id = $2 AND items IS DISTINCT FROM $3::jsonb
RETURNING customer_key, app_user_id`, source, externalID, string(raw)).Scan(&customer, &user)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // recorded before
		}
		if err != nil {
			return fmt.Errorf("record the items of %s order %s: %w", source, externalID, err)
		}
		_, err = tx.Exec(ctx, `SELECT entitlements_recompute(entitlement_subjects_of($1, $2) ||
    CASE WHEN $1::text IS NULL THEN '{}'::text[] ELSE entitlements_customers_moved(ARRAY[$1::text]) END, false)`, customer, user)
		return err
	})
}

// SetFeatures records a Stripe customer's active features (Stripe
// Entitlements) as of an event's time, unless a newer event's are
// recorded, and computes its subject's entitlements again, in one
// transaction.
func (s Store) SetFeatures(ctx context.Context, customerKey string, features []Feature, at time.Time, eventID string) error {
	raw, err := json.Marshal(features)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insertFeaturesSQL, customerKey, string(raw), at, eventID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, updateFeaturesSQL, customerKey, string(raw), at, eventID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT entitlements_recompute(entitlement_subjects_of($1, NULL) || entitlements_customers_moved(ARRAY[$1::text]), false)`,
			customerKey)
		return err
	})
}

// Feature is one of a Stripe customer's active entitlements.
type Feature struct {
	Feature   string `json:"feature"`
	LookupKey string `json:"lookup_key,omitempty"`
}

const (
	insertFeaturesSQL = `
INSERT INTO stripe_active_entitlements (customer_key, features, event_at, provider_event_id)
SELECT $1, '[]'::jsonb, '-infinity', $4 ON CONFLICT (customer_key) DO NOTHING`
	updateFeaturesSQL = `
UPDATE stripe_active_entitlements SET features = $2::jsonb, event_at = $3, provider_event_id = $4, updated_at = now()
WHERE customer_key = $1 AND (event_at < $3 OR (event_at = $3 AND features IS DISTINCT FROM $2::jsonb))`
)

// jobLock makes one replica at a time run the job.
const jobLock = "entitlements:job"

// Due computes again the subjects whose set changes with time alone (a
// grace or a period ended: next_change_at passed) or that a new catalogue
// made due, at most limit of them, one replica at a time (busy is true
// when another holds the job). It returns how many it computed.
func (s Store) Due(ctx context.Context, limit int) (n int, busy bool, err error) {
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`, jobLock).Scan(&got); err != nil {
			return err
		}
		if !got {
			busy = true
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT subject FROM entitlement_subjects WHERE next_change_at <= now()
ORDER BY next_change_at LIMIT $1`, limit)
		if err != nil {
			return err
		}
		subjects, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(subjects) == 0 {
			return err
		}
		n = len(subjects)
		_, err = tx.Exec(ctx, `SELECT entitlements_recompute($1, false)`, subjects)
		return err
	})
	return n, busy, err
}

// Planner plans the steps that tell the app of versions no event's
// transaction planned (Job's, a Checkout's line items', and any left by a
// process that died between a change and its step).
type Planner interface {
	RunStandalone(ctx context.Context, source string, steps []webhooks.StandaloneStep) ([]string, webhooks.Result, error)
}

// PlanPending plans and runs, for up to limit subjects whose newest
// version no step was planned for, the step that tells it (a standalone
// step keyed by the subject's version, so that planning it twice plans it
// once), and records it planned. It returns how many it planned.
func (s Store) PlanPending(ctx context.Context, p Planner, limit int, log *slog.Logger) (int, error) {
	rows, err := s.Pool.Query(ctx, `SELECT subject, version FROM entitlement_subjects WHERE planned_version < version
ORDER BY subject LIMIT $1`, limit)
	if err != nil {
		return 0, fmt.Errorf("pending entitlements: %w", err)
	}
	pending, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Told, error) {
		var t Told
		err := r.Scan(&t.Subject, &t.Version)
		return t, err
	})
	if err != nil {
		return 0, fmt.Errorf("pending entitlements: %w", err)
	}
	for _, t := range pending {
		payload, _ := json.Marshal(Payload{Subjects: []Told{t}})
		step := Step()
		step.Payload = payload
		key := fmt.Sprintf("%s:%s:v%d", Source, t.Subject, t.Version)
		if _, res, err := p.RunStandalone(ctx, Source, []webhooks.StandaloneStep{{Key: key, Step: step}}); err != nil {
			return 0, err
		} else if res.Err != nil && log != nil {
			log.WarnContext(ctx, "entitlements: the app was not told yet; retried", "subject", t.Subject, "version", t.Version, "error", res.Err)
		}
		if _, err := s.Pool.Exec(ctx, `UPDATE entitlement_subjects SET planned_version = greatest(planned_version, $2)
WHERE subject = $1 AND planned_version < $2`, t.Subject, t.Version); err != nil {
			return 0, fmt.Errorf("pending entitlements: %w", err)
		}
	}
	return len(pending), nil
}

// Job takes ends in time without any event: every Interval it computes the
// due subjects again (Due) and plans what is pending (PlanPending).
type Job struct {
	Store    Store
	Planner  Planner
	Interval time.Duration // 0: DefaultInterval
	Log      *slog.Logger
}

// DefaultInterval is how often Job runs: a grace or period that ends is
// taken within it.
const DefaultInterval = 15 * time.Second

// Run runs the job until ctx ends.
func (j Job) Run(ctx context.Context) {
	every := j.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j.Once(ctx)
		t.Reset(every)
	}
}

// Once runs the job once: every due subject, in batches, then what is
// pending.
func (j Job) Once(ctx context.Context) {
	for range 100 {
		n, busy, err := j.Store.Due(ctx, 200)
		if err != nil {
			if ctx.Err() == nil {
				j.Log.ErrorContext(ctx, "entitlements: due subjects not computed", "error", err)
			}
			return
		}
		if busy || n < 200 {
			break
		}
	}
	for range 100 {
		n, err := j.Store.PlanPending(ctx, j.Planner, 100, j.Log)
		if err != nil {
			if ctx.Err() == nil {
				j.Log.ErrorContext(ctx, "entitlements: pending versions not planned", "error", err)
			}
			return
		}
		if n < 100 {
			return
		}
	}
}
