package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// ---------------------------------------------------------------------------
// Overview

type overviewView struct {
	Health      ops.Health
	Lease       time.Duration
	StepOverdue bool
	Counts      *recentCounts // nil: no counters in this process
	Chart       chart
	Totals      []Counted // events of the chart's window by state
	Window      string
	// ParkedInWindow are the parked events (Health.ParkedEvents) received
	// in the chart's window: its parked series, from the same query.
	ParkedInWindow int64
	Alerts         []ops.Alert
	AlertChannels  []string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := overviewView{Lease: c.cfg.Lease, Window: "24 h"}
	var err error
	if v.Health, err = ops.ReadHealth(ctx, c.cfg.DB, c.cfg.Lease, c.sources()); err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The claims table could not be read.", err)
		return
	}
	v.StepOverdue = v.Health.OldestStep != nil && v.Health.OldestStep.Age > c.cfg.Lease
	now := c.cfg.Now().UTC()
	end := now.Truncate(time.Hour).Add(time.Hour)
	act, err := ops.ReadActivity(ctx, c.cfg.DB, end.Add(-24*time.Hour), end, time.Hour)
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The events could not be counted.", err)
		return
	}
	v.Chart = stateChart(act, ops.ActivityStates, time.UTC)
	for _, st := range ops.ActivityStates {
		if n := act.Count(st); n > 0 || st == string(webhooks.StateParked) || st == string(webhooks.StateDone) {
			v.Totals = append(v.Totals, Counted{Name: st, Count: n})
		}
	}
	v.ParkedInWindow = act.Count(string(webhooks.StateParked))
	if c.counters != nil {
		rc := c.counters.recent()
		v.Counts = &rc
	}
	v.AlertChannels = c.cfg.AlertChannels
	if c.cfg.Alerts != nil {
		if v.Alerts, err = c.cfg.Alerts.Recent(ctx, c.cfg.DB, 5); err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The alerts could not be read.", err)
			return
		}
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"health": v.Health, "activity": act, "recent": v.Counts, "alerts": v.Alerts})
		return
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", "overview", v)
}

func (c *Console) sources() []string {
	var s []string
	for _, spec := range c.cfg.Specs {
		s = append(s, spec.Source)
	}
	return s
}

// ---------------------------------------------------------------------------
// Events

// eventsForm is the events page's filters, as the query string has them.
type eventsForm struct {
	Q, Source, Type, State, Age, From, To string
	Limit                                 int
}

type eventsView struct {
	Form    eventsForm
	Sources []string
	Types   []string
	States  []webhooks.State
	Ages    []string
	Events  []ops.Summary
	NextURL string
	Paged   bool // this is not the first page
	Problem string
	Took    time.Duration
}

// ages are the age filter's choices: received within this long.
var ages = []string{"1h", "24h", "7d", "30d"}

func parseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, errors.New("bad age")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.New("bad age")
	}
	return d, nil
}

// timeLayouts are what the range inputs accept, in UTC.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", time.RFC3339,
	"2006-01-02 15:04", "2006-01-02"}

func parseTime(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("bad time")
}

func encodeCursor(cur *ops.Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cur.ReceivedAt.UTC().Format(time.RFC3339Nano) + "|" + cur.Key))
}

func decodeCursor(s string) (*ops.Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	ts, key, ok := strings.Cut(string(b), "|")
	if !ok {
		return nil, errors.New("bad cursor")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, err
	}
	return &ops.Cursor{ReceivedAt: t, Key: key}, nil
}

// filterOf reads the filters of a query string into an ops.Filter, with
// what could not be read said in problem.
func (c *Console) filterOf(q url.Values) (f ops.Filter, form eventsForm, problem string) {
	form = eventsForm{Q: strings.TrimSpace(q.Get("q")), Source: q.Get("source"), Type: strings.TrimSpace(q.Get("type")),
		State: q.Get("state"), Age: q.Get("age"), From: q.Get("from"), To: q.Get("to")}
	f = ops.Filter{Query: form.Q, Type: form.Type, Specs: c.cfg.Specs, Owners: c.cfg.Owners, Limit: 50}
	var problems []string
	if form.Source != "" {
		if slices.Contains(c.sources(), form.Source) {
			f.Source = form.Source
		} else {
			problems = append(problems, "unknown source "+strconv.Quote(form.Source))
		}
	}
	if form.State != "" {
		if slices.Contains(webhooks.States, webhooks.State(form.State)) {
			f.State = webhooks.State(form.State)
		} else {
			problems = append(problems, "unknown state "+strconv.Quote(form.State))
		}
	}
	if form.Age != "" {
		d, err := parseAge(form.Age)
		if err != nil {
			problems = append(problems, "age must be like 1h, 24h or 7d")
		}
		f.Since = d
	}
	for _, t := range []struct {
		in  string
		out *time.Time
	}{{form.From, &f.From}, {form.To, &f.To}} {
		if t.in == "" {
			continue
		}
		v, err := parseTime(t.in)
		if err != nil {
			problems = append(problems, "times are like 2026-12-01T00:00Z or 2026-12-01 (UTC)")
			continue
		}
		*t.out = v
	}
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
		f.Limit = min(l, 500)
	}
	form.Limit = f.Limit
	if a := q.Get("after"); a != "" {
		cur, err := decodeCursor(a)
		if err != nil {
			problems = append(problems, "the page cursor is not one this console made")
		}
		f.After = cur
	}
	return f, form, strings.Join(problems, "; ")
}

func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	f, form, problem := c.filterOf(r.URL.Query())
	v := eventsView{Form: form, Sources: c.sources(), States: webhooks.States, Ages: ages, Problem: problem,
		Paged: f.After != nil}
	for _, s := range c.cfg.Specs {
		v.Types = append(v.Types, s.Types...)
	}
	status := http.StatusOK
	if problem != "" {
		status = http.StatusBadRequest
	} else {
		start := time.Now()
		page, err := ops.ListPage(r.Context(), c.cfg.DB, f)
		if err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The events could not be listed.", err)
			return
		}
		v.Took = time.Since(start).Round(100 * time.Microsecond)
		v.Events = page.Events
		if page.Next != nil {
			next := r.URL.Query()
			next.Set("after", encodeCursor(page.Next))
			v.NextURL = "/events?" + next.Encode()
		}
	}
	if wantsJSON(r) {
		if problem != "" {
			writeJSON(w, status, map[string]string{"error": problem})
			return
		}
		writeJSON(w, status, map[string]any{"events": v.Events, "next": v.NextURL})
		return
	}
	c.render(w, r, status, "events", "Events", "events", v)
}

// ---------------------------------------------------------------------------
// One event

type eventView struct {
	Event    ops.Detail
	Body     string // pretty-printed when it is JSON
	Records  ops.Records
	Claims   []claimView
	Replay   bool // a replay would do something
	Resolve  bool // something is parked: it can be resolved
	Problem  string
	Reopened []string
	// Subjects are the subjects whose entitlements the event's rows
	// belong to, or its steps told.
	Subjects []string
}

type claimView struct {
	ops.Claim
	LeaseFresh bool          // another worker holds a fresh lease: run now would not take it
	CanRun     bool          // an open step: "run now" is offered
	Tries      []attemptView // a step's attempts (Claim.History) as the Attempts table shows them
}

func (c *Console) event(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d, ok := c.eventOf(w, r)
	if !ok {
		return
	}
	v := eventView{Event: d, Body: prettyBody(d.Body)}
	var err error
	if v.Records, err = ops.Related(ctx, c.cfg.DB, d, c.cfg.Specs, c.cfg.Owners); err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The event's orders and invoices could not be read.", err)
		return
	}
	v.Claims = c.claimViews(d.Claims)
	if c.cfg.Entitlements != nil {
		if v.Subjects, err = c.cfg.Entitlements.SubjectsOfEvent(ctx, d.Key); err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The event's subjects could not be read.", err)
			return
		}
	}
	v.Replay = d.State != webhooks.StateDone || slices.ContainsFunc(d.Claims, func(cl ops.Claim) bool {
		return cl.Status == string(webhooks.ClaimSkipped)
	})
	v.Resolve = d.State == webhooks.StateParked
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"event": d, "body": json.RawMessage(jsonOrString(d.Body)), "records": v.Records})
		return
	}
	c.render(w, r, http.StatusOK, "event", d.Key, "events", v)
}

func (c *Console) claimViews(claims []ops.Claim) []claimView {
	now := c.cfg.Now()
	out := make([]claimView, len(claims))
	for i, cl := range claims {
		if cl.Kind == "step" && cl.Refs == nil {
			cl.Refs = c.cfg.Kinds.Refs(cl.StepKind, cl.Key, cl.Payload)
		}
		out[i] = claimView{Claim: cl, Tries: attemptViews(cl.History)}
		if cl.Kind == "step" && cl.Status == string(webhooks.ClaimInProgress) {
			out[i].CanRun = true
			out[i].LeaseFresh = cl.ClaimedAt != nil && now.Sub(*cl.ClaimedAt) < c.cfg.Lease
		}
	}
	return out
}

// prettyBody indents a JSON body; anything else is shown as it is (the
// template escapes it either way).
func prettyBody(b []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, b, "", "  ") == nil {
		return buf.String()
	}
	return string(b)
}

func jsonOrString(b []byte) []byte {
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
