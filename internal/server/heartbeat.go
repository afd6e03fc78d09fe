package server

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/version"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// Each receiver records itself in the receivers table (migration 15) at
// start-up and every HeartbeatEvery: its host, process id, version and
// start, and the fingerprint of what its steps use (config.Fingerprint).
// An operator command that runs steps (`events replay`, `reconcile`)
// compares its shell's fingerprint with the live receivers': it runs when
// they are the same, and refuses a shell that differs, naming each
// difference and the receivers it differs from. A receiver that cannot
// write its row serves all the same: the write is retried on the next
// heartbeat, and said once in the log.

// HeartbeatEvery is how often a receiver records that it runs.
const HeartbeatEvery = 15 * time.Second

// ReceiverLiveFor is how long a receiver counts as running after its last
// heartbeat: four heartbeats, so that a loaded database or a fail-over's
// seconds without a primary do not make it look gone.
const ReceiverLiveFor = 4 * HeartbeatEvery

// ReceiverForgetAfter is how long the row of a receiver that no longer
// beats is kept (a receiver killed without stopping, or stopped): any
// receiver's heartbeat deletes older ones.
const ReceiverForgetAfter = 24 * time.Hour

// Receiver is one receiver's row.
type Receiver struct {
	ID        string
	Host      string
	PID       int
	Version   string
	StartedAt time.Time
	SeenAt    time.Time
	StoppedAt *time.Time // set when it stopped gracefully
	// Age is how long ago it was last seen, by the database's clock.
	Age time.Duration
	// Live: it has not stopped and was seen within ReceiverLiveFor.
	Live        bool
	Fingerprint config.Fingerprint
}

// String names the receiver for an operator: "host web-1 pid 4242
// (started 2026-12-06T09:00:00Z, version v1.4.0)".
func (r Receiver) String() string {
	return fmt.Sprintf("host %s pid %d (started %s, version %s)", config.Printable(r.Host), r.PID,
		r.StartedAt.UTC().Format(time.RFC3339), config.Printable(r.Version))
}

// Heartbeat records one receiver.
type Heartbeat struct {
	pool *pgxpool.Pool
	cfg  wiring.Setup
	log  *slog.Logger
	self Receiver
	// fp is the receiver's fingerprint, computed once the salt is read.
	fp   []byte
	poke chan struct{}
	// failing: the last write failed (said once, until one succeeds);
	// recorded: a write succeeded (said once).
	failing, recorded bool
}

// NewHeartbeat describes this process, with cfg's fingerprint, for Beat
// and Run to record on pool.
func NewHeartbeat(pool *pgxpool.Pool, cfg wiring.Setup, log *slog.Logger) *Heartbeat {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var id [12]byte
	_, _ = cryptorand.Read(id[:])
	return &Heartbeat{pool: pool, cfg: cfg, log: log, poke: make(chan struct{}, 1), self: Receiver{
		ID: hex.EncodeToString(id[:]), Host: host, PID: os.Getpid(), Version: version.Get().Version, StartedAt: time.Now(),
	}}
}

const beatSQL = `
WITH forgotten AS (
    DELETE FROM receivers WHERE seen_at < now() - $7 * interval '1 millisecond' AND id <> $1
)
INSERT INTO receivers (id, host, pid, version, started_at, seen_at, fingerprint)
VALUES ($1, $2, $3, $4, $5, now(), $6)
ON CONFLICT (id) DO UPDATE SET seen_at = now(), stopped_at = NULL, fingerprint = EXCLUDED.fingerprint`

// Beat records the receiver as running now, and forgets receivers unseen
// for ReceiverForgetAfter.
func (h *Heartbeat) Beat(ctx context.Context) error {
	if h.fp == nil {
		salt, err := FingerprintSalt(ctx, h.pool, true)
		if err != nil {
			return err
		}
		fp, err := h.cfg.Fingerprint(salt)
		if err != nil {
			return err
		}
		if h.fp, err = json.Marshal(fp); err != nil {
			return err
		}
	}
	s := h.self
	_, err := h.pool.Exec(ctx, beatSQL, s.ID, s.Host, s.PID, s.Version, s.StartedAt, h.fp, ReceiverForgetAfter.Milliseconds())
	if err != nil {
		return fmt.Errorf("record the receiver: %w", err)
	}
	return nil
}

// Poke asks for a heartbeat now (the primary changed: the new one may
// have lost the last).
func (h *Heartbeat) Poke() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// Run beats at once, then every HeartbeatEvery (and when poked) until ctx
// ends; then it records that the receiver stopped. A failed beat is
// logged once and retried on the next.
func (h *Heartbeat) Run(ctx context.Context) {
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	for {
		bctx, cancel := context.WithTimeout(ctx, HeartbeatEvery)
		err := h.Beat(bctx)
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil && !h.failing:
			h.failing = true
			h.log.Warn("could not record this receiver for the operator commands, which compare their configuration with it; "+
				"deliveries are not affected, and it is retried every "+HeartbeatEvery.String(), "error", err)
		case err == nil && h.failing:
			h.failing, h.recorded = false, true
			h.log.Info("receiver recorded again", "receiver", h.self.ID)
		case err == nil && !h.recorded:
			h.recorded = true
			h.log.Info("receiver recorded", "receiver", h.self.ID, "host", h.self.Host, "pid", h.self.PID)
		}
		select {
		case <-ctx.Done():
			h.stopped()
			return
		case <-t.C:
		case <-h.poke:
		}
	}
}

// stopped records that the receiver stopped, so that commands no longer
// count it.
func (h *Heartbeat) stopped() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := h.pool.Exec(ctx, `UPDATE receivers SET stopped_at = now() WHERE id = $1`, h.self.ID); err != nil {
		h.log.Warn("could not record that this receiver stopped: commands count it as running for "+ReceiverLiveFor.String(),
			"error", err)
	}
}

// ErrNoSalt is returned by FingerprintSalt when no receiver has ever made
// the database's salt: none has recorded itself.
var ErrNoSalt = errors.New("no receiver has recorded itself in this database")

// FingerprintSalt reads the database's salt of fingerprints; with create,
// it first makes one if there is none (a receiver's first start).
func FingerprintSalt(ctx context.Context, pool *pgxpool.Pool, create bool) ([]byte, error) {
	if create {
		salt := make([]byte, 32)
		_, _ = cryptorand.Read(salt)
		if _, err := pool.Exec(ctx, `INSERT INTO receivers_salt (salt) VALUES ($1) ON CONFLICT DO NOTHING`, salt); err != nil {
			return nil, fmt.Errorf("make the fingerprint salt: %w", err)
		}
	}
	var salt []byte
	err := pool.QueryRow(ctx, `SELECT salt FROM receivers_salt`).Scan(&salt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNoSalt
	case err != nil:
		return nil, fmt.Errorf("read the fingerprint salt: %w", err)
	}
	return salt, nil
}

// Receivers reads the recorded receivers, the most recently seen first (the
// 1,000 most recent: a receiver restarting in a loop for a day leaves a row
// per start).
func Receivers(ctx context.Context, pool *pgxpool.Pool) ([]Receiver, error) {
	rows, err := pool.Query(ctx, `
SELECT id, host, pid, version, started_at, seen_at, stopped_at,
       extract(epoch FROM now() - seen_at)::float8,
       stopped_at IS NULL AND seen_at > now() - $1 * interval '1 millisecond',
       fingerprint
FROM receivers ORDER BY seen_at DESC, id LIMIT 1000`, ReceiverLiveFor.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("read the receivers: %w", err)
	}
	var out []Receiver
	for rows.Next() {
		var r Receiver
		var age float64
		var fp []byte
		if err := rows.Scan(&r.ID, &r.Host, &r.PID, &r.Version, &r.StartedAt, &r.SeenAt, &r.StoppedAt, &age, &r.Live, &fp); err != nil {
			return nil, fmt.Errorf("read the receivers: %w", err)
		}
		r.Age = time.Duration(age * float64(time.Second))
		if err := json.Unmarshal(fp, &r.Fingerprint); err != nil {
			return nil, fmt.Errorf("read receiver %s's fingerprint: %w", r.ID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the receivers: %w", err)
	}
	return out, nil
}

// setupHeartbeat records the receiver beside its other background loops.
func (s *Server) setupHeartbeat() {
	s.heartbeat = NewHeartbeat(s.pool, s.cfg, s.log)
	s.background = append(s.background, s.heartbeat.Run)
}
