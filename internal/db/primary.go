package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Primary identifies the server a pool writes to: its cluster and its
// timeline. A standby made from a base backup has its primary's system
// identifier; promoting it starts a new timeline. A point-in-time recovery
// starts one too, and a different cluster (a restore into a fresh initdb, a
// dump loaded elsewhere) has another system identifier.
type Primary struct {
	SystemID int64  // pg_control_system().system_identifier
	Timeline uint32 // the timeline of the WAL being written
}

// String is how the logs name a primary.
func (p Primary) String() string { return fmt.Sprintf("system %d timeline %d", p.SystemID, p.Timeline) }

// primarySQL reads the system identifier and the current timeline: the
// first eight hex digits of the name of the WAL segment being written. Both
// functions are open to every role; pg_walfile_name fails on a standby.
const primarySQL = `
SELECT s.system_identifier, ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
FROM pg_control_system() AS s`

// ReadPrimary reads the identity of the primary pool reaches.
func ReadPrimary(ctx context.Context, pool *pgxpool.Pool) (Primary, error) {
	var p Primary
	var tl int64
	if err := pool.QueryRow(ctx, primarySQL).Scan(&p.SystemID, &tl); err != nil {
		return Primary{}, fmt.Errorf("read the primary's identity: %w", err)
	}
	p.Timeline = uint32(tl)
	return p, nil
}
