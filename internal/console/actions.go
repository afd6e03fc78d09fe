package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Every action is a GET that previews it and changes nothing, and a POST
// (with the page's CSRF token, when made with the cookie) that runs it
// through internal/ops, logs who did it, and shows what became of it.

// ---------------------------------------------------------------------------
// Replay one event

type replayView struct {
	Preview ops.ReplayPreview
}

type replayedView struct {
	Key     string
	Results []ops.ReplayResult
	Before  []ops.Claim
	After   *ops.Detail
	Changes []claimChange
	Took    time.Duration
	Partial int // events not replayed before the deadline
	Window  string
}

// claimChange is a claim whose status or attempts an action changed.
type claimChange struct {
	Key                   string
	From, To              string
	AttemptsFrom, Attempt int
	LastError             string
}

func (c *Console) replayPreview(w http.ResponseWriter, r *http.Request) {
	p, err := ops.PreviewReplay(r.Context(), c.cfg.DB, c.cfg.Processor.Runnable, c.cfg.Providers, r.PathValue("key"))
	if webhooks.IsNotFound(err) {
		c.fail(w, r, http.StatusNotFound, "No event is stored under "+strconv.Quote(r.PathValue("key"))+".", nil)
		return
	}
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The event could not be read.", err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, p)
		return
	}
	c.render(w, r, http.StatusOK, "replay", "Replay "+p.Event.Key, "events", replayView{Preview: p})
}

func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	before, ok := c.eventOf(w, r)
	if !ok {
		return
	}
	start := time.Now()
	results := ops.ReplayMany(context.WithoutCancel(ctx), c.cfg.DB, c.cfg.Processor, c.cfg.Providers, []string{before.Key},
		actor(r), c.cfg.Log, time.Time{}, nil)
	v := replayedView{Key: before.Key, Results: results, Before: before.Claims, Took: time.Since(start).Round(time.Millisecond)}
	if after, err := ops.Show(ctx, c.cfg.DB, before.Key); err == nil {
		v.After = &after
		v.Changes = changes(before.Claims, after.Claims)
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"result": results[0], "changes": v.Changes, "event": v.After})
		return
	}
	c.render(w, r, http.StatusOK, "replayed", "Replayed "+before.Key, "events", v)
}

// changes lists the claims whose status or attempts differ.
func changes(before, after []ops.Claim) []claimChange {
	old := map[string]ops.Claim{}
	for _, c := range before {
		old[c.Key] = c
	}
	var out []claimChange
	for _, a := range after {
		b, ok := old[a.Key]
		if ok && b.Status == a.Status && b.Attempts == a.Attempts {
			continue
		}
		ch := claimChange{Key: a.Key, From: b.Status, To: a.Status, AttemptsFrom: b.Attempts, Attempt: a.Attempts,
			LastError: a.LastError}
		if !ok {
			ch.From = "(none)"
		}
		out = append(out, ch)
	}
	return out
}

// ---------------------------------------------------------------------------
// Run a step now

type stepView struct {
	Event ops.Detail
	Step  claimView
	Why   string // why this process cannot run it ("": it can)
	Ran   *bool  // after the action: whether the step ran
	Error string
	After *claimView
}

// eventOf reads the event the path's key names, or answers 404 (no such
// event) or 503 and returns false.
func (c *Console) eventOf(w http.ResponseWriter, r *http.Request) (ops.Detail, bool) {
	d, err := ops.Show(r.Context(), c.cfg.DB, r.PathValue("key"))
	switch {
	case webhooks.IsNotFound(err):
		c.fail(w, r, http.StatusNotFound, "No event is stored under "+strconv.Quote(r.PathValue("key"))+".", nil)
		return d, false
	case errors.Is(err, webhooks.ErrAmbiguous):
		// The keys it lists are the events' own: search shows each.
		c.fail(w, r, http.StatusConflict, strings.TrimPrefix(err.Error(), webhooks.ErrAmbiguous.Error()+": ")+".", nil)
		return d, false
	case err != nil:
		c.fail(w, r, http.StatusServiceUnavailable, "The event could not be read.", err)
		return d, false
	}
	return d, true
}

func (c *Console) stepOf(w http.ResponseWriter, r *http.Request) (ops.Detail, claimView, bool) {
	d, err := ops.Show(r.Context(), c.cfg.DB, r.PathValue("key"))
	if err != nil && !webhooks.IsNotFound(err) {
		c.fail(w, r, http.StatusServiceUnavailable, "The event could not be read.", err)
		return ops.Detail{}, claimView{}, false
	}
	key := webhooks.StepKey(d.Key, r.PathValue("step"))
	for _, cv := range c.claimViews(d.Claims) {
		if cv.Kind == "step" && cv.Key == key {
			return d, cv, true
		}
	}
	c.fail(w, r, http.StatusNotFound, "No step "+strconv.Quote(r.PathValue("step"))+" of event "+
		strconv.Quote(r.PathValue("key"))+" is stored.", nil)
	return ops.Detail{}, claimView{}, false
}

func (c *Console) stepPreview(w http.ResponseWriter, r *http.Request) {
	d, st, ok := c.stepOf(w, r)
	if !ok {
		return
	}
	v := stepView{Event: d, Step: st, Why: c.cfg.Processor.Runnable(st.StepKind, st.Payload)}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"step": st, "can_run": st.CanRun && !st.LeaseFresh && v.Why == "", "why": v.Why})
		return
	}
	c.render(w, r, http.StatusOK, "step", "Run "+st.Key, "events", v)
}

func (c *Console) stepRun(w http.ResponseWriter, r *http.Request) {
	d, st, ok := c.stepOf(w, r)
	if !ok {
		return
	}
	v := stepView{Event: d, Step: st}
	ran, err := ops.RunStep(context.WithoutCancel(r.Context()), c.cfg.Processor, st.Key, actor(r), c.cfg.Log)
	v.Ran = &ran
	if err != nil {
		v.Error = err.Error()
	}
	if after, err := ops.Show(r.Context(), c.cfg.DB, d.Key); err == nil {
		for _, cv := range c.claimViews(after.Claims) {
			if cv.Key == st.Key {
				v.After = &cv
			}
		}
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"ran": ran, "error": v.Error, "step": v.After})
		return
	}
	c.render(w, r, http.StatusOK, "step", "Ran "+st.Key, "events", v)
}

// ---------------------------------------------------------------------------
// Replay everything parked in a window

// maxParkedReplay bounds one batch, and parkedDeadline its time (the
// listener's write timeout is 2 minutes): the result says what is left.
const (
	maxParkedReplay = 500
	parkedDeadline  = 90 * time.Second
)

type parkedView struct {
	Form    eventsForm
	Ages    []string
	Events  []ops.Summary
	More    bool
	Problem string
}

func (c *Console) parkedFilter(r *http.Request) (ops.Filter, eventsForm, string) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	f, form, problem := c.filterOf(q)
	if form.Age == "" && form.From == "" && form.To == "" && problem == "" {
		problem = "say which window: an age or a time range"
	}
	f.State, form.State = webhooks.StateParked, string(webhooks.StateParked)
	f.Query, f.After, f.Limit = "", nil, maxParkedReplay
	return f, form, problem
}

func (c *Console) parkedPreview(w http.ResponseWriter, r *http.Request) {
	f, form, problem := c.parkedFilter(r)
	v := parkedView{Form: form, Ages: ages, Problem: problem}
	if problem == "" || r.URL.RawQuery == "" {
		v.Problem = ""
		if r.URL.RawQuery == "" {
			v.Form.Age, f.Since = "24h", 24*time.Hour
		}
		page, err := ops.ListPage(r.Context(), c.cfg.DB, f)
		if err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The parked events could not be listed.", err)
			return
		}
		v.Events, v.More = page.Events, page.Next != nil
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"events": v.Events, "more": v.More, "error": v.Problem})
		return
	}
	c.render(w, r, http.StatusOK, "parked", "Replay parked events", "events", v)
}

func (c *Console) parkedReplay(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, "The form could not be read.", nil)
		return
	}
	f, form, problem := c.parkedFilter(r)
	if problem != "" {
		c.fail(w, r, http.StatusBadRequest, "Cannot replay: "+problem+".", nil)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	page, err := ops.ListPage(ctx, c.cfg.DB, f)
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The parked events could not be listed.", err)
		return
	}
	// Oldest first, as they were received.
	keys := make([]string, len(page.Events))
	for i, e := range page.Events {
		keys[len(keys)-1-i] = e.Key
	}
	start := time.Now()
	results := ops.ReplayMany(ctx, c.cfg.DB, c.cfg.Processor, c.cfg.Providers, keys, actor(r), c.cfg.Log,
		start.Add(parkedDeadline), nil)
	v := replayedView{Results: results, Took: time.Since(start).Round(time.Millisecond), Partial: len(keys) - len(results),
		Window: windowText(form)}
	c.cfg.Log.InfoContext(ctx, "operator replay of parked events", "actor", actor(r), "window", v.Window,
		"replayed", len(results), "left", v.Partial)
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]any{"results": results, "left": v.Partial, "more": page.Next != nil})
		return
	}
	c.render(w, r, http.StatusOK, "replayed", "Replayed parked events", "events", v)
}

func windowText(f eventsForm) string {
	switch {
	case f.Age != "":
		return "received in the last " + f.Age
	case f.From != "" && f.To != "":
		return "received from " + f.From + " to " + f.To + " UTC"
	case f.From != "":
		return "received since " + f.From + " UTC"
	}
	return "received before " + f.To + " UTC"
}

// ---------------------------------------------------------------------------
// Reconcile a window

type reconcileView struct {
	Sources []string
	Windows []string
	Source  string
	Window  string
	Preview *ReconcileReport
	Result  *ReconcileReport
	Error   string
}

var reconcileWindows = []string{"1h", "24h", "3d", "7d", "30d"}

func (c *Console) reconcileForm(r *http.Request) (reconcileView, time.Duration, string) {
	v := reconcileView{Sources: c.cfg.Reconciler.Sources(), Windows: reconcileWindows,
		Source: r.FormValue("source"), Window: r.FormValue("window")}
	if v.Source == "" {
		return v, 0, ""
	}
	if !slices.Contains(v.Sources, v.Source) {
		return v, 0, "unknown source " + strconv.Quote(v.Source)
	}
	d, err := parseAge(v.Window)
	if err != nil {
		return v, 0, "the window must be like 24h or 7d"
	}
	return v, d, ""
}

func (c *Console) reconcilePage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Reconciler == nil {
		c.fail(w, r, http.StatusNotFound, "No reconciliation is configured in this process.", nil)
		return
	}
	v, window, problem := c.reconcileForm(r)
	status := http.StatusOK
	switch {
	case problem != "":
		v.Error, status = problem, http.StatusBadRequest
	case v.Source != "":
		rep, err := c.cfg.Reconciler.Reconcile(r.Context(), v.Source, window, true, actor(r))
		if err != nil {
			v.Error = err.Error()
		}
		v.Preview = &rep
	}
	c.render(w, r, status, "reconcile", "Reconcile", "reconcile", v)
}

func (c *Console) reconcile(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Reconciler == nil {
		c.fail(w, r, http.StatusNotFound, "No reconciliation is configured in this process.", nil)
		return
	}
	v, window, problem := c.reconcileForm(r)
	if problem != "" || v.Source == "" {
		c.fail(w, r, http.StatusBadRequest, "Cannot reconcile: "+problem+".", nil)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	c.cfg.Log.InfoContext(ctx, "operator reconcile", "actor", actor(r), "source", v.Source, "window", window.String())
	rep, err := c.cfg.Reconciler.Reconcile(ctx, v.Source, window, false, actor(r))
	if err != nil {
		v.Error = err.Error()
		c.cfg.Log.ErrorContext(ctx, "operator reconcile failed", "actor", actor(r), "source", v.Source, "error", err)
	}
	v.Result = &rep
	c.render(w, r, http.StatusOK, "reconcile", "Reconciled", "reconcile", v)
}

// ---------------------------------------------------------------------------
// Resolve a parked event

type resolveView struct {
	Preview ops.ResolvePreview
	Reason  string
	Problem string
	Result  *ops.Resolved
	Max     int
}

func (c *Console) resolvePreview(w http.ResponseWriter, r *http.Request) {
	p, err := ops.PreviewResolve(r.Context(), c.cfg.DB, r.PathValue("key"))
	if webhooks.IsNotFound(err) {
		c.fail(w, r, http.StatusNotFound, "No event is stored under "+strconv.Quote(r.PathValue("key"))+".", nil)
		return
	}
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The event could not be read.", err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, p)
		return
	}
	c.render(w, r, http.StatusOK, "resolve", "Resolve "+p.Event.Key, "events", resolveView{Preview: p, Max: ops.MaxReasonLength})
}

func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	reason := r.PostFormValue("reason")
	res, err := ops.Resolve(context.WithoutCancel(ctx), c.cfg.DB, r.PathValue("key"), reason, actor(r), c.cfg.Log)
	status := http.StatusOK
	var problem string
	switch {
	case webhooks.IsNotFound(err):
		c.fail(w, r, http.StatusNotFound, "No event is stored under "+strconv.Quote(r.PathValue("key"))+".", nil)
		return
	case errors.Is(err, ops.ErrNotParked):
		status, problem = http.StatusConflict, "Not resolved: "+strings.TrimPrefix(err.Error(), ops.ErrNotParked.Error()+": ")+"."
	case errors.Is(err, ops.ErrBadReason):
		status, problem = http.StatusBadRequest, "Not resolved: "+err.Error()+": say why no replay can fix it."
	case err != nil:
		c.fail(w, r, http.StatusServiceUnavailable, "The event could not be resolved.", err)
		return
	}
	if wantsJSON(r) {
		if problem != "" {
			writeJSON(w, status, map[string]string{"error": problem})
			return
		}
		writeJSON(w, status, res)
		return
	}
	p, perr := ops.PreviewResolve(ctx, c.cfg.DB, r.PathValue("key"))
	if perr != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The event could not be read.", perr)
		return
	}
	v := resolveView{Preview: p, Reason: reason, Problem: problem, Max: ops.MaxReasonLength}
	if problem == "" {
		v.Result = &res
	}
	c.render(w, r, status, "resolve", "Resolve "+p.Event.Key, "events", v)
}
