package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listing is an order as a comparison with a provider's own records sees
// it (internal/reconcile): its business key, state and position, read-only.
type Listing struct {
	ID              int64
	ExternalID      string
	ProviderEventID string
	Status          Status
	Tier            string // orders.plan; GitHub Marketplace: "<plan id>:<plan name>"
	AmountCents     int64
	CustomerEmail   string
	EffectiveAt     time.Time // the position of the last event applied; zero: none recorded
	UpdatedAt       time.Time
}

// Lister is what the listings need: a pool, a connection or a transaction.
type Lister interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const listingColumns = `id, external_id, provider_event_id, status, coalesce(plan, ''), amount_cents,
	coalesce(customer_email, ''), effective_at, updated_at`

func scanListing(row pgx.CollectableRow) (Listing, error) {
	var l Listing
	var effective *time.Time
	err := row.Scan(&l.ID, &l.ExternalID, &l.ProviderEventID, &l.Status, &l.Tier, &l.AmountCents,
		&l.CustomerEmail, &effective, &l.UpdatedAt)
	if effective != nil {
		l.EffectiveAt = *effective
	}
	return l, err
}

// ListBySource returns every order of source, by business key.
func ListBySource(ctx context.Context, q Lister, source string) ([]Listing, error) {
	rows, err := q.Query(ctx, `SELECT `+listingColumns+` FROM orders WHERE source = $1 ORDER BY external_id`, source)
	if err != nil {
		return nil, fmt.Errorf("list %s orders: %w", source, err)
	}
	ls, err := pgx.CollectRows(rows, scanListing)
	if err != nil {
		return nil, fmt.Errorf("list %s orders: %w", source, err)
	}
	return ls, nil
}

// ListingOf returns the order of source with the business key externalID,
// and whether there is one.
func ListingOf(ctx context.Context, q Lister, source, externalID string) (Listing, bool, error) {
	rows, err := q.Query(ctx, `SELECT `+listingColumns+` FROM orders WHERE source = $1 AND external_id = $2`,
		source, externalID)
	if err != nil {
		return Listing{}, false, fmt.Errorf("read order %s: %w", externalID, err)
	}
	l, err := pgx.CollectExactlyOneRow(rows, scanListing)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Listing{}, false, nil
	case err != nil:
		return Listing{}, false, fmt.Errorf("read order %s: %w", externalID, err)
	}
	return l, true, nil
}
