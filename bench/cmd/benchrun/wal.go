package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// walMeter reads the cluster's WAL insert position, so that each slot can
// say how many WAL bytes it wrote. The WAL is the whole cluster's: a slot
// also counts what autovacuum and checkpoints (their full-page images) wrote
// meanwhile, which is part of what the side's writes cost.
type walMeter struct {
	mu   sync.Mutex
	conn *pgx.Conn
}

func openWALMeter(ctx context.Context, url string) (*walMeter, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("wal meter: %w", err)
	}
	return &walMeter{conn: conn}, nil
}

// lsn is the WAL insert position in bytes; ok is false without a meter (the
// tests) or on an error.
func (w *walMeter) lsn() (pos uint64, ok bool) {
	if w == nil || w.conn == nil {
		return 0, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var text string
	if err := w.conn.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&text); err != nil {
		return 0, false
	}
	pos, err := parseLSN(text)
	return pos, err == nil
}

func (w *walMeter) close() {
	if w != nil && w.conn != nil {
		_ = w.conn.Close(context.Background())
	}
}

// parseLSN turns PostgreSQL's "16/B374D848" into a byte position.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("LSN %q: no slash", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// walSpan is the WAL written between two positions, or -1 when either is
// unknown.
func walSpan(a, b uint64, aok, bok bool) float64 {
	if !aok || !bok || b < a {
		return -1
	}
	return float64(b - a)
}
