package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Runner is what a Monitor needs of the processor: *webhooks.Processor.
type Runner interface {
	RunStandalone(ctx context.Context, source string, steps []webhooks.StandaloneStep) ([]string, webhooks.Result, error)
	PruneStandalone(ctx context.Context, prefix string, olderThan time.Duration) (int64, error)
}

// The rules of the causes, as docs/monitoring.md documents them.
const (
	// DefaultInterval is how often a Monitor evaluates the causes.
	DefaultInterval = time.Minute
	// DefaultWindow and DefaultThreshold: signature failures with fresh
	// timestamps (or, for a sender that signs none, any), and refusals
	// for load, alert when at least DefaultThreshold of a provider's
	// deliveries were refused within DefaultWindow, as one replica
	// counts them (a replica counts only what it received: with N
	// replicas behind a balancer, some N × DefaultThreshold in all).
	DefaultWindow    = 10 * time.Minute
	DefaultThreshold = 5
	// A provider is silent when nothing verified arrived from it for
	// longer than SILENCE_ALERT_AFTER for it, else than
	// max(SilenceFactor × the 95th percentile of the gaps between its
	// last SilenceSample deliveries of the last SilenceHistory,
	// SilenceFloor), learnt once there are at least SilenceMinGaps gaps.
	SilenceFactor  = 6
	SilenceFloor   = time.Hour
	SilenceSample  = 500
	SilenceHistory = 7 * 24 * time.Hour
	SilenceMinGaps = 20
	// RepeatAfter: an alert about the same episode (the same silence, the
	// same reconciliation run) is sent again only after this long.
	RepeatAfter = 24 * time.Hour
	// FailoverHolds is how long a fail-over this process noticed stays a
	// cause: an alert whose claim failed is raised again meanwhile.
	FailoverHolds = time.Hour
	// Keep is how long an alert's claim and attempts are kept.
	Keep = 30 * 24 * time.Hour
	// maxNamed bounds the parked claims one alert names.
	maxNamed = 20
)

// Subject is a provider a Monitor watches: its source and the variable
// of its secret, which the texts name.
type Subject struct {
	Source    string
	SecretVar string
	Retries   string // what the sender does after a failed delivery (webhooks.Spec.Retries)
}

// Monitor evaluates the causes and raises an alert for each that holds,
// once per cause, subject and hour across replicas.
type Monitor struct {
	DB     webhooks.Querier
	Runner Runner
	// Counters gathers this process's webhook_rejections_total and
	// webhook_signature_mismatches_total (a registry of those two).
	Counters prometheus.Gatherer
	// Subjects are the providers whose routes are mounted: a provider
	// without a route is silent by design.
	Subjects []Subject
	// Channels are where alerts go; none: the causes are evaluated and
	// their gauges set, and nothing is sent.
	Channels []Channel
	// SilenceAfter is SILENCE_ALERT_AFTER, by source; 0: never alert
	// about that source's silence.
	SilenceAfter map[string]time.Duration
	Metrics      *Metrics
	Log          *slog.Logger
	// Now is the clock (nil: time.Now): the hour of an alert's key, the
	// counters' window, a provider's silence.
	Now func() time.Time
	// Interval, Window and Threshold: zero values take the defaults.
	Interval  time.Duration
	Window    time.Duration
	Threshold int

	mu        sync.Mutex
	samples   []sample
	lastPrune time.Time
	failover  *Failover
	endpoints endpointNote
}

// Failover is a change of the database's primary that this process
// noticed.
type Failover struct {
	At       time.Time
	From, To string // the primaries as the log names them (db.Primary.String)
	// Another: the database is another cluster, not a promoted standby.
	Another bool
	// Commands are the catch-up commands to run, one per configured
	// reconciler (none: no provider's catch-up is configured).
	Commands []string
	// Reconciles: the receiver reconciles by itself (RECONCILE_INTERVAL),
	// over the last Lookback.
	Reconciles bool
	Lookback   time.Duration
}

// NoteFailover records a fail-over this process noticed: the evaluations
// of the next FailoverHolds raise an alert about it, once across replicas
// (its episode is the new primary, which every replica names alike).
func (m *Monitor) NoteFailover(f Failover) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failover = &f
}

// sample is the counters at a time, by "sig|<source>" (signature failures
// that count), "load|<source>|<reason>" (refusals for load) and
// "conn|<what> <reason or class>" (connections refused or evicted).
type sample struct {
	at     time.Time
	values map[string]float64
}

func (m *Monitor) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Monitor) window() time.Duration   { return cmp(m.Window, DefaultWindow) }
func (m *Monitor) interval() time.Duration { return cmp(m.Interval, DefaultInterval) }
func (m *Monitor) threshold() float64      { return float64(cmp(m.Threshold, DefaultThreshold)) }
func cmp[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Run evaluates the causes every Interval until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.interval())
	defer t.Stop()
	for {
		if _, err := m.Once(ctx); err != nil && ctx.Err() == nil {
			m.Log.Warn("alerts: evaluation failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once evaluates every cause now, sets the conditions' gauges, and raises
// an alert for each cause that holds and was not alerted on this hour. It
// returns the alerts this call raised (claimed: another replica's claim of
// the same hour makes this one raise nothing). The causes are evaluated
// independently: one that cannot be read does not hold the others back.
func (m *Monitor) Once(ctx context.Context) ([]Alert, error) {
	now := m.now()
	m.sampleCounters(now)
	var candidates []Alert
	var errs []error
	for _, c := range Causes {
		alerts, holds, err := m.evaluate(ctx, c, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c, err))
			continue
		}
		if m.Metrics != nil {
			m.Metrics.Conditions.WithLabelValues(string(c)).Set(float64(holds))
		}
		candidates = append(candidates, alerts...)
	}
	var raised []Alert
	if len(m.Channels) > 0 {
		for _, a := range candidates {
			ok, err := m.raise(ctx, a, now)
			if err != nil {
				errs = append(errs, fmt.Errorf("raise %s: %w", a.Key(""), err))
			}
			if ok {
				raised = append(raised, a)
			}
		}
		if now.Sub(m.lastPrune) >= time.Hour {
			if n, err := m.Runner.PruneStandalone(ctx, KeyPrefix, Keep); err != nil {
				errs = append(errs, err)
			} else {
				m.lastPrune = now
				if n > 0 {
					m.Log.Info("alerts: pruned old alerts", "claims", n)
				}
			}
		}
	}
	return raised, errors.Join(errs...)
}

func (m *Monitor) evaluate(ctx context.Context, c Cause, now time.Time) ([]Alert, int, error) {
	switch c {
	case CauseParked:
		return m.parked(ctx, now)
	case CauseSignature:
		return m.signatures(now)
	case CauseSilence:
		return m.silences(ctx, now)
	case CauseReconcile:
		return m.reconciles(ctx, now)
	case CauseLoad:
		return m.load(now)
	case CauseFailover:
		return m.failovers(now)
	case CauseEndpoint:
		return m.endpointAlerts(now)
	}
	return nil, 0, fmt.Errorf("unknown cause %q", c)
}

// raise claims the alert on every channel and sends it, unless an alert of
// the same episode was sent within RepeatAfter. It reports whether this
// call claimed it.
func (m *Monitor) raise(ctx context.Context, a Alert, now time.Time) (bool, error) {
	a.Hour = Hour(now)
	if a.Episode != "" {
		last, at, err := m.last(ctx, a.Cause, a.Subject)
		if err != nil {
			return false, err
		}
		if last != nil && last.Episode == a.Episode && now.Sub(at) < RepeatAfter {
			return false, nil
		}
	}
	payload, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	steps := make([]webhooks.StandaloneStep, len(m.Channels))
	for i, ch := range m.Channels {
		steps[i] = webhooks.StandaloneStep{Key: a.Key(ch.Step), Step: webhooks.Step{Name: ch.Step, Kind: ch.Kind, Payload: payload}}
	}
	claimed, res, err := m.Runner.RunStandalone(ctx, Source, steps)
	if err != nil || len(claimed) == 0 {
		return false, err
	}
	if m.Metrics != nil {
		m.Metrics.Raised.WithLabelValues(string(a.Cause)).Inc()
	}
	log := m.Log.With("cause", string(a.Cause), "subject", a.Subject, "hour", a.Hour, "claims", claimed)
	if res.Outcome == webhooks.OutcomeStepFailed {
		log.Warn("alert raised; a channel failed and is retried by the redriver", "title", a.Title, "error", res.Err)
	} else {
		log.Info("alert raised", "title", a.Title, "outcome", string(res.Outcome))
	}
	return true, nil
}

// lastAlertSQL reads the newest alert of a cause and subject: its keys are
// one range of the primary key, the hour sorting last.
const lastAlertSQL = `
SELECT payload FROM processed_events
WHERE event_key >= $1 AND event_key < $2 AND kind = 'step' AND parent_key IS NULL
ORDER BY event_key DESC LIMIT 1`

// last returns the newest alert of the cause and subject kept, and the
// hour it was raised in (nil: none is kept).
func (m *Monitor) last(ctx context.Context, c Cause, subject string) (*Alert, time.Time, error) {
	g := group(c, subject)
	var payload []byte
	err := m.DB.QueryRow(ctx, lastAlertSQL, g+":", g+";").Scan(&payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	var a Alert
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, time.Time{}, nil // not an alert this version wrote: as if none
	}
	at, err := time.Parse(hourLayout, a.Hour)
	if err != nil {
		return nil, time.Time{}, nil
	}
	return &a, at, nil
}

// ---------------------------------------------------------------------------
// Parked

// parkedClaimsSQL reads what is parked of events, each with when it was
// parked: an event's own claim when it arrived, a step at the end of the
// attempt that parked it (before attempts were recorded: about when it was
// given back). $1 is the watermark: the newest parked time the last alert
// named; the claims parked after it are the new ones.
var parkedClaimsSQL = `
WITH p AS (
    SELECT p.event_key, coalesce(p.parent_key, p.event_key) AS event, p.kind, coalesce(p.step, '') AS step,
           p.source, coalesce(p.last_error, '') AS why, p.attempts,
           CASE WHEN p.kind = 'event' THEN p.claimed_at ELSE coalesce(
               (SELECT max(a.started_at + a.duration_ms * interval '1 millisecond') FROM step_attempts a
                WHERE a.step_key = p.event_key AND a.outcome = 'parked'),
               p.next_attempt_at, p.claimed_at) END AS parked_at
    FROM processed_events p
    WHERE p.status = 'parked' AND (p.kind = 'event' OR p.parent_key IS NOT NULL)
), counted AS (
    SELECT count(*) AS total, count(*) FILTER (WHERE parked_at > $1) AS fresh,
           count(DISTINCT event) FILTER (WHERE parked_at > $1) AS events, max(parked_at) AS until FROM p
)
SELECT c.total, c.fresh, c.events, c.until, n.event_key, n.event, n.kind, n.step, n.source, n.why, n.attempts, n.parked_at
FROM counted c LEFT JOIN LATERAL (
    SELECT * FROM p WHERE parked_at > $1 ORDER BY parked_at, event_key LIMIT ` + strconv.Itoa(maxNamed) + `
) n ON true`

func (m *Monitor) parked(ctx context.Context, now time.Time) ([]Alert, int, error) {
	var watermark time.Time
	if len(m.Channels) > 0 {
		last, _, err := m.last(ctx, CauseParked, "")
		if err != nil {
			return nil, 0, err
		}
		if last != nil {
			watermark = last.Until
		}
	}
	floor := watermark
	if floor.IsZero() {
		floor = time.Unix(0, 0)
	}
	rows, err := m.DB.Query(ctx, parkedClaimsSQL, floor)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var total, fresh, events int64
	var until *time.Time
	var lines []string
	for rows.Next() {
		var key, event, kind, step, source, why *string
		var attempts *int
		var at *time.Time
		if err := rows.Scan(&total, &fresh, &events, &until, &key, &event, &kind, &step, &source, &why, &attempts, &at); err != nil {
			return nil, 0, err
		}
		if key == nil {
			continue
		}
		what := fmt.Sprintf("%s event %s", *source, *event)
		if *kind == "step" {
			what += fmt.Sprintf(" step %s, parked %s after %s", *step, at.UTC().Format("15:04Z"), plural(int64(*attempts), "attempt", "attempts"))
		} else {
			what += fmt.Sprintf(", parked on arrival %s", at.UTC().Format("15:04Z"))
		}
		lines = append(lines, what+": "+webhooks.Redact(*why, 160))
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	holds := 0
	if total > 0 {
		holds = 1
	}
	if fresh == 0 {
		return nil, holds, nil
	}
	if more := fresh - int64(len(lines)); more > 0 {
		lines = append(lines, fmt.Sprintf("…and %d more.", more))
	}
	a := Alert{Cause: CauseParked,
		Title: fmt.Sprintf("%s of %s newly parked for an operator (%d parked in all)", plural(fresh, "claim", "claims"),
			plural(events, "event", "events"), total),
		Text: strings.Join(lines, "\n") + "\n\nReplay what a fix lets run again (server events replay KEY, or the console's " +
			"Replay); resolve what no replay can fix (server events resolve KEY --reason …).",
	}
	if until != nil {
		a.Until = *until
	}
	return []Alert{a}, holds, nil
}

// ---------------------------------------------------------------------------
// This process's counters: signature failures, refusals for load

// sampleCounters records the counters now, once per Interval at most (a
// test calling Once many times in a row keeps one sample).
func (m *Monitor) sampleCounters(now time.Time) {
	s := sample{at: now, values: map[string]float64{}}
	if m.Counters != nil {
		mfs, _ := m.Counters.Gather()
		for _, mf := range mfs {
			switch mf.GetName() {
			case "webhook_signature_mismatches_total":
				for _, mt := range mf.GetMetric() {
					if ts := label(mt.GetLabel(), "timestamp"); ts == string(webhooks.SignedFresh) || ts == "none" {
						s.values["sig|"+label(mt.GetLabel(), "source")+"|"+ts] += mt.GetCounter().GetValue()
					}
				}
			case "webhook_rejections_total":
				for _, mt := range mf.GetMetric() {
					if r := label(mt.GetLabel(), "reason"); LoadReason(r) {
						s.values["load|"+label(mt.GetLabel(), "source")+"|"+r] += mt.GetCounter().GetValue()
					}
				}
			case ConnectionsRefused:
				for _, mt := range mf.GetMetric() {
					s.values[connKey+"refused "+label(mt.GetLabel(), "reason")] += mt.GetCounter().GetValue()
				}
			case ConnectionsEvicted:
				for _, mt := range mf.GetMetric() {
					s.values[connKey+"closed "+label(mt.GetLabel(), "class")] += mt.GetCounter().GetValue()
				}
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.samples); n > 0 && now.Sub(m.samples[n-1].at) < m.interval()/2 {
		m.samples[n-1].values = s.values // the newest counts, at the sample's time
		return
	}
	m.samples = append(m.samples, s)
	// Keep the newest sample at least a window old, and what follows it.
	for len(m.samples) > 2 && now.Sub(m.samples[1].at) >= m.window() {
		m.samples = m.samples[1:]
	}
}

// LoadReason reports whether a rejection reason is a refusal for load: the
// receiver had no room or time for the delivery (webhooks.LoadReasons:
// MAX_INFLIGHT, the budget of unverified bodies, BODY_TIMEOUT).
func LoadReason(reason string) bool { return slices.Contains(webhooks.LoadReasons, reason) }

// The series of HTTP_ADDR's connections that the load cause counts
// (internal/server registers them): connections reset as soon as
// accepted, by reason, and connections closed to make room for another at
// MAX_CONNECTIONS, by class.
const (
	ConnectionsRefused = "http_connections_refused_total"
	ConnectionsEvicted = "http_connections_evicted_total"
)

// connKey starts the keys of the connection counters in a sample.
const connKey = "conn|"

// ConnectionsSubject is the subject of a load alert about connections:
// they come before any provider's route is known.
const ConnectionsSubject = "connections"

func label[L interface {
	GetName() string
	GetValue() string
}](ls []L, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// recent returns, for each key of the counters, how much it grew over the
// window (since the process started, when it is younger), and how long
// that is.
func (m *Monitor) recent() (map[string]float64, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return nil, 0
	}
	cur := m.samples[len(m.samples)-1]
	base := sample{at: cur.at, values: map[string]float64{}}
	if len(m.samples) > 1 {
		base = m.samples[0]
		for i := len(m.samples) - 2; i >= 0; i-- {
			base = m.samples[i]
			if cur.at.Sub(base.at) >= m.window() {
				break
			}
		}
	}
	d := map[string]float64{}
	for k, v := range cur.values {
		if g := v - base.values[k]; g > 0 {
			d[k] = g
		}
	}
	since := cur.at.Sub(base.at)
	if since <= 0 || since > m.window() {
		since = m.window()
	}
	return d, since
}

func (m *Monitor) secretVar(source string) string {
	for _, s := range m.Subjects {
		if s.Source == source && s.SecretVar != "" {
			return s.SecretVar
		}
	}
	return "its secret"
}

func (m *Monitor) signatures(time.Time) ([]Alert, int, error) {
	d, since := m.recent()
	var out []Alert
	holds := 0
	for _, s := range m.Subjects {
		fresh, none := d["sig|"+s.Source+"|"+string(webhooks.SignedFresh)], d["sig|"+s.Source+"|none"]
		n := fresh + none
		if n < m.threshold() {
			continue
		}
		holds++
		var what string
		if fresh > 0 {
			what = fmt.Sprintf("%d %s deliveries in the last %s were signed at the current time (their timestamps within tolerance), "+
				"with a signature no secret of %s makes", int64(n), s.Source, dur(since), m.secretVar(s.Source))
		} else {
			what = fmt.Sprintf("%d %s deliveries in the last %s carried a signature no secret of %s makes (%s signs no timestamp, "+
				"so every mismatch counts)", int64(n), s.Source, dur(since), m.secretVar(s.Source), s.Source)
		}
		out = append(out, Alert{Cause: CauseSignature, Subject: s.Source,
			Title: fmt.Sprintf("%s: %d deliveries failed verification in %s", s.Source, int64(n), dur(since)),
			Text: what + ": a sender is signing with a secret this receiver does not hold (a secret rolled at the provider " +
				"and not added here?), or someone is forging requests. They were refused 400 and nothing was written; " +
				retries(s) + ". Compare the endpoint's signing secret at the provider with " +
				m.secretVar(s.Source) + "; while rolling a secret, list both, comma-separated."})
	}
	return out, holds, nil
}

func (m *Monitor) load(time.Time) ([]Alert, int, error) {
	d, since := m.recent()
	var out []Alert
	holds := 0
	for _, s := range m.Subjects {
		n, reasons := counted(d, "load|"+s.Source+"|")
		if n < m.threshold() {
			continue
		}
		holds++
		out = append(out, Alert{Cause: CauseLoad, Subject: s.Source,
			Title: fmt.Sprintf("%s: %d deliveries refused for load in %s", s.Source, int64(n), dur(since)),
			Text: fmt.Sprintf("This replica refused %d %s deliveries in the last %s, with nothing written (%s): it had no "+
				"room or time for them (MAX_INFLIGHT verified deliveries at once, the budget of unverified bodies "+
				"and its shares, BODY_TIMEOUT). %s; reconcile what it sent meanwhile. If it lasts, add replicas or raise "+
				"MAX_INFLIGHT; if the requests are unsigned (unverified_over_share, body_timeout), someone is flooding "+
				"the route or stalling on it: limit connections and requests per client address in front of the receiver.",
				int64(n), s.Source, dur(since), strings.Join(reasons, ", "), retries(s))})
	}
	if n, what := counted(d, connKey); n >= m.threshold() {
		holds++
		out = append(out, Alert{Cause: CauseLoad, Subject: ConnectionsSubject,
			Title: fmt.Sprintf("connections: %d refused or closed for load in %s", int64(n), dur(since)),
			Text: fmt.Sprintf("This replica refused or closed %d connections in the last %s (%s): MAX_CONNECTIONS were "+
				"all, or nearly all, in use. In the last eighth of them it refuses a connection whose address or block "+
				"holds its share of the strangers' (over_share); at the bound it closes the connection idle longest to "+
				"make room, a stranger's first (idle before busy), a sender's idle one only when no stranger's is left, "+
				"and refuses a connection when every open one is a sender's, busy (full). Senders' deliveries refused "+
				"this way are retried by most providers, and reconciliation catches up on the rest. Many addresses "+
				"holding connections is a flood: limit connections per client address in front of the receiver "+
				"(docs/http.md, \"In front of the receiver\"); if the connections are your senders' or your proxy's, raise "+
				"MAX_CONNECTIONS or add replicas.",
				int64(n), dur(since), strings.Join(what, ", "))})
	}
	return out, holds, nil
}

// counted sums the counters of d whose keys start with prefix, and names
// each that grew ("too_many_in_flight 5").
func counted(d map[string]float64, prefix string) (float64, []string) {
	var n float64
	var what []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		if r, ok := strings.CutPrefix(k, prefix); ok {
			n += d[k]
			what = append(what, fmt.Sprintf("%s %d", r, int64(d[k])))
		}
	}
	return n, what
}

// retries is what the subject's sender does with a refused delivery, as a
// clause: "stripe retries for up to 3 days".
func retries(s Subject) string {
	if s.Retries == "" {
		return s.Source + " may or may not send them again"
	}
	return s.Source + " " + s.Retries
}

// ---------------------------------------------------------------------------
// Silence

// deliveriesSQL reads the newest deliveries of a source, newest first,
// from an index of the events by time: the last one, and the gaps a usual
// silence is learnt from. The test of via is written so that PostgreSQL
// estimates it from the column's statistics: as coalesce(via, …) = …, it
// was guessed to keep 0.5% of the rows, fewer than the LIMIT, and every
// event was read and sorted, every minute in every replica (25 ms at
// 50,000 events, against 0.4 ms from the index).
const deliveriesSQL = `
SELECT claimed_at FROM processed_events
WHERE kind = 'event' AND source = $1 AND (via = 'delivery' OR via IS NULL)
ORDER BY claimed_at DESC, event_key DESC
LIMIT $2`

// Silence is what a Monitor knows of a provider's silence.
type Silence struct {
	Last   time.Time     // the newest verified delivery (zero: none)
	Silent time.Duration // since it
	Usual  time.Duration // the 95th percentile of the gaps (0: not learnt)
	Gaps   int           // how many gaps it was learnt from
	After  time.Duration // the silence past which it alerts (0: none is known)
	Learnt bool          // After was learnt, not configured
}

// silence reads and judges a source's silence.
func (m *Monitor) silence(ctx context.Context, source string, now time.Time) (Silence, error) {
	rows, err := m.DB.Query(ctx, deliveriesSQL, source, SilenceSample+1)
	if err != nil {
		return Silence{}, err
	}
	times, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil || len(times) == 0 {
		return Silence{}, err
	}
	s := Silence{Last: times[0], Silent: now.Sub(times[0])}
	var gaps []time.Duration
	for i := 1; i < len(times) && now.Sub(times[i]) <= SilenceHistory; i++ {
		gaps = append(gaps, times[i-1].Sub(times[i]))
	}
	s.Gaps = len(gaps)
	if len(gaps) >= SilenceMinGaps {
		sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
		s.Usual = gaps[(len(gaps)*95+99)/100-1]
	}
	if after, ok := m.SilenceAfter[source]; ok {
		s.After = after
	} else if s.Usual > 0 || len(gaps) >= SilenceMinGaps {
		s.After, s.Learnt = max(SilenceFactor*s.Usual, SilenceFloor), true
	}
	return s, nil
}

func (m *Monitor) silences(ctx context.Context, now time.Time) ([]Alert, int, error) {
	var out []Alert
	holds := 0
	for _, subj := range m.Subjects {
		s, err := m.silence(ctx, subj.Source, now)
		if err != nil {
			return nil, 0, err
		}
		if s.Last.IsZero() || s.After <= 0 || s.Silent <= s.After {
			continue
		}
		holds++
		rule := fmt.Sprintf("SILENCE_ALERT_AFTER %s=%s", subj.Source, dur(s.After))
		if s.Learnt {
			rule = fmt.Sprintf("its usual gap is %s (the 95th percentile of the last %d gaps); the alert fires past "+
				"max(%d × that, %s) = %s", dur(s.Usual), s.Gaps, SilenceFactor, dur(SilenceFloor), dur(s.After))
		}
		out = append(out, Alert{Cause: CauseSilence, Subject: subj.Source, Episode: s.Last.UTC().Format(time.RFC3339Nano),
			Title: fmt.Sprintf("%s has sent nothing for %s", subj.Source, dur(s.Silent)),
			Text: fmt.Sprintf("Nothing verified has arrived from %s since %s (%s ago): %s. Check the endpoint at the "+
				"provider (disabled? failing deliveries? a changed URL?) and this receiver's route and secret; then catch "+
				"up on what was sent meanwhile (server reconcile %s --since %s, where the provider has one).",
				subj.Source, s.Last.UTC().Format("2006-01-02 15:04Z"), dur(s.Silent), rule, subj.Source,
				fmt.Sprintf("%dh", int((s.Silent+time.Hour).Hours())))})
	}
	return out, holds, nil
}

// ---------------------------------------------------------------------------
// Reconciliation

// missedRunsSQL reads, for each source, the newest reconciliation run of
// the last day that found events never delivered (reconcile_runs,
// whichever replica or command ran it).
const missedRunsSQL = `
SELECT DISTINCT ON (source) id, source, triggered_by, found, missed, unresolved, finished_at
FROM reconcile_runs
WHERE result <> 'running' AND missed > 0 AND finished_at > $1
ORDER BY source, finished_at DESC, id DESC`

func (m *Monitor) reconciles(ctx context.Context, now time.Time) ([]Alert, int, error) {
	rows, err := m.DB.Query(ctx, missedRunsSQL, now.Add(-24*time.Hour))
	if err != nil {
		return nil, 0, err
	}
	var out []Alert
	var id int64
	var source, trigger string
	var found, missed, unresolved int64
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &source, &trigger, &found, &missed, &unresolved, &at}, func() error {
		out = append(out, Alert{Cause: CauseReconcile, Subject: source, Episode: fmt.Sprint(id),
			Title: fmt.Sprintf("%s: reconciliation found %s the deliveries missed", source, plural(missed, "event", "events")),
			Text: fmt.Sprintf("Reconciliation run %d of %s (%s, finished %s) looked at %d and found %d that had never been "+
				"delivered (for a Marketplace listing: orders that disagree with it); it processed them now, through the same "+
				"claims as a delivery, and left %d for an operator. Deliveries are being lost upstream: check the endpoint "+
				"at the provider, and the receiver's availability at the time.",
				id, source, trigger, at.UTC().Format("2006-01-02 15:04Z"), found, missed, unresolved)})
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, len(out), nil
}

// ---------------------------------------------------------------------------
// Fail-over

func (m *Monitor) failovers(now time.Time) ([]Alert, int, error) {
	m.mu.Lock()
	f := m.failover
	m.mu.Unlock()
	if f == nil || now.Sub(f.At) >= FailoverHolds {
		return nil, 0, nil
	}
	what := "a standby was promoted (or the database was recovered to a point in time)"
	if f.Another {
		what = "the receiver now reaches another database cluster"
	}
	todo := "No provider's catch-up is configured (its API key is unset: see `server reconcile --help`): " +
		"events lost this way cannot be brought back from here; ask each provider to resend what it sent around " +
		f.At.UTC().Format("15:04Z") + "."
	switch {
	case len(f.Commands) > 0 && f.Reconciles:
		todo = fmt.Sprintf("The receiver runs the catch-up itself (RECONCILE_INTERVAL) over the last %dh: a reconciliation "+
			"alert follows if it brings events back; should it fail, run: %s.", int(f.Lookback.Hours()), strings.Join(f.Commands, "; "))
	case len(f.Commands) > 0:
		todo = "Run the catch-up now: " + strings.Join(f.Commands, "; ") + "."
	}
	return []Alert{{Cause: CauseFailover, Episode: f.To,
		Title: "database fail-over: the primary changed",
		Text: fmt.Sprintf("At %s the database's primary changed (%s → %s): %s. With asynchronous replication, deliveries "+
			"acknowledged shortly before it may be lost, and their senders will not send them again. %s "+
			"docs/database.md says which settings avoid the loss.",
			f.At.UTC().Format("2006-01-02 15:04:05Z"), f.From, f.To, what, todo)}}, 1, nil
}
