package reqlog

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RepeatPeriod is how often Repeats says how many lines of a kind it
// counted instead of writing them.
const RepeatPeriod = time.Minute

// maxKinds bounds the kinds Repeats follows at once; lines of kinds beyond
// it are counted together, as the kind other.
const maxKinds = 256

// Repeats writes the first line of a kind in full and counts the next
// ones: once a period has passed, one line says how many there were
// (repeated=N since=… last=…), for as long as they keep coming; after a period
// with none, the next one is written in full again. A stranger who sends a
// refused request a thousand times a second costs the log about a line a
// minute, and an operator still sees the first one whole.
//
// A kind is a message and labels the caller takes from closed sets (a
// provider's name, a reason of the code's own, a status), never a value
// of the request, so that kinds are few; at most maxKinds are followed.
// No timer runs: a period's count is written with the next line of any
// kind that comes after it, and by Flush (at shutdown).
type Repeats struct {
	log    *slog.Logger
	period time.Duration
	now    func() time.Time

	mu    sync.Mutex
	kinds map[string]*repeat
	due   time.Time // the earliest end of a kind's period
}

// repeat is one kind's current period.
type repeat struct {
	level  slog.Level
	msg    string
	labels []slog.Attr
	since  time.Time // the period's start
	count  int       // lines counted, not written, since then
	last   time.Time // the last one counted
}

// NewRepeats returns Repeats writing to log, a summary per period (now:
// the clock; nil is time.Now).
func NewRepeats(log *slog.Logger, period time.Duration, now func() time.Time) *Repeats {
	if now == nil {
		now = time.Now
	}
	return &Repeats{log: log, period: period, now: now, kinds: map[string]*repeat{}}
}

// Log writes msg with args at level (as slog.Logger.Log does, ctx's
// attributes added) if it is the first of its kind, msg and labels, for a
// period; otherwise it counts it.
func (r *Repeats) Log(ctx context.Context, level slog.Level, msg string, labels []slog.Attr, args ...any) {
	var b strings.Builder
	b.WriteString(msg)
	for _, a := range labels {
		b.WriteByte(0)
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(a.Value.String())
	}
	key := b.String()

	now := r.now()
	r.mu.Lock()
	summaries := r.expire(now)
	k := r.kinds[key]
	if k == nil && len(r.kinds) >= maxKinds {
		key, labels = "\x00other", []slog.Attr{slog.String("kind", "other")}
		k = r.kinds[key]
	}
	full := k == nil
	if full {
		r.kinds[key] = &repeat{level: level, msg: msg, labels: labels, since: now}
		if end := now.Add(r.period); r.due.IsZero() || end.Before(r.due) {
			r.due = end
		}
	} else {
		k.count++
		k.last = now
	}
	r.mu.Unlock()

	r.write(summaries)
	if full {
		r.log.Log(ctx, level, msg, args...)
	}
}

// Flush writes the count of every kind that has one, and forgets every
// kind: what the server does when it stops.
func (r *Repeats) Flush() {
	r.mu.Lock()
	var summaries []repeat
	for key, k := range r.kinds {
		if k.count > 0 {
			summaries = append(summaries, *k)
		}
		delete(r.kinds, key)
	}
	r.due = time.Time{}
	r.mu.Unlock()
	r.write(summaries)
}

// expire ends the periods that are over at now: a kind that counted lines
// has them written and starts a new period; one that did not is
// forgotten, so that its next line is written in full. r.mu is held.
func (r *Repeats) expire(now time.Time) []repeat {
	if r.due.IsZero() || now.Before(r.due) {
		return nil
	}
	var summaries []repeat
	r.due = time.Time{}
	for key, k := range r.kinds {
		end := k.since.Add(r.period)
		if now.Before(end) {
			if r.due.IsZero() || end.Before(r.due) {
				r.due = end
			}
			continue
		}
		if k.count == 0 {
			delete(r.kinds, key)
			continue
		}
		summaries = append(summaries, *k)
		k.since, k.count = now, 0
		if end := now.Add(r.period); r.due.IsZero() || end.Before(r.due) {
			r.due = end
		}
	}
	return summaries
}

// write logs one line per summary: the kind's message and labels, how many
// lines were counted, from when to when.
func (r *Repeats) write(summaries []repeat) {
	for _, s := range summaries {
		attrs := append(s.labels[:len(s.labels):len(s.labels)],
			slog.Int("repeated", s.count), slog.Time("since", s.since), slog.Time("last", s.last))
		r.log.LogAttrs(context.Background(), s.level, s.msg, attrs...)
	}
}
