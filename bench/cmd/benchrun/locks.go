package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockWaits is what the lock sampler saw over one measured window: the
// samples taken, the active client backends summed over them, and of those
// the ones waiting for a lock, by what they waited for (pg_stat_activity's
// wait_event of wait_event_type Lock: transactionid or tuple for another
// transaction's row, extend for a relation's extension, advisory, …).
type lockWaits struct {
	samples int
	active  int
	waiting map[string]int
}

func (l lockWaits) add(m lockWaits) lockWaits {
	out := lockWaits{samples: l.samples + m.samples, active: l.active + m.active, waiting: map[string]int{}}
	for _, w := range []map[string]int{l.waiting, m.waiting} {
		for k, v := range w {
			out.waiting[k] += v
		}
	}
	return out
}

func (l lockWaits) total() int {
	n := 0
	for _, v := range l.waiting {
		n += v
	}
	return n
}

// share is the part of the active backends' samples spent waiting for a
// lock; -1 when nothing was sampled.
func (l lockWaits) share() float64 {
	if l.active == 0 {
		return -1
	}
	return float64(l.total()) / float64(l.active)
}

// text lists what was waited for, most first: "transactionid 61 %, tuple 20 %".
func (l lockWaits) text() string {
	if l.total() == 0 {
		return ""
	}
	keys := make([]string, 0, len(l.waiting))
	for k := range l.waiting {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return l.waiting[keys[i]] > l.waiting[keys[j]] || l.waiting[keys[i]] == l.waiting[keys[j]] && keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f %%", k, 100*float64(l.waiting[k])/float64(l.total())))
	}
	return strings.Join(parts, ", ")
}

// lockSampler samples pg_stat_activity of the whole cluster (in every slot
// one side runs alone) on a connection of its own, every interval, between
// start and stop.
type lockSampler struct {
	conn     *pgx.Conn
	interval time.Duration

	mu   sync.Mutex
	cur  lockWaits
	stop chan struct{}
	done chan struct{}
}

const lockSampleSQL = `
SELECT CASE WHEN wait_event_type = 'Lock' THEN wait_event ELSE '' END, count(*)
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid()
GROUP BY 1`

// openLockSampler connects to url; with interval 0 it samples nothing.
func openLockSampler(ctx context.Context, url string, interval time.Duration) (*lockSampler, error) {
	if interval <= 0 {
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("lock sampler: %w", err)
	}
	return &lockSampler{conn: conn, interval: interval}, nil
}

// start begins a window; a window already open is ended first.
func (s *lockSampler) start() {
	if s == nil {
		return
	}
	s.end()
	s.mu.Lock()
	s.cur = lockWaits{waiting: map[string]int{}}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	stop, done := s.stop, s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (s *lockSampler) sample() {
	rows, err := s.conn.Query(context.Background(), lockSampleSQL)
	if err != nil {
		return
	}
	defer rows.Close()
	w := lockWaits{waiting: map[string]int{}}
	for rows.Next() {
		var ev string
		var n int
		if rows.Scan(&ev, &n) != nil {
			return
		}
		w.active += n
		if ev != "" {
			w.waiting[ev] += n
		}
	}
	if rows.Err() != nil {
		return
	}
	w.samples = 1
	s.mu.Lock()
	s.cur = s.cur.add(w)
	s.mu.Unlock()
}

func (s *lockSampler) end() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// finish ends the window and returns what it saw.
func (s *lockSampler) finish() lockWaits {
	if s == nil {
		return lockWaits{}
	}
	s.end()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *lockSampler) close() {
	if s != nil && s.conn != nil {
		s.end()
		_ = s.conn.Close(context.Background())
	}
}
