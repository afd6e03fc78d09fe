package paddle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers/paddle"
	"github.com/paywebhooks/receiver/internal/providers/paddle/paddletest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

const paddleKey = "pdl_sdbx_apikey_reconcile_0123456789"

// paddleEnv is a reconciler over a fresh database and a fake Paddle API.
type paddleEnv struct {
	api   *paddletest.Server
	pool  *pgxpool.Pool
	store *reconcile.Store
	proc  *reconciletest.ClaimingProcessor
	rec   *reconcile.Events
	now   time.Time
}

func newPaddleAPI(t *testing.T, s *paddletest.Server, pageSize int) *paddle.API {
	t.Helper()
	noRetries := 0
	api, err := paddle.NewAPI(paddle.APIConfig{Key: s.Key, BaseURL: s.URL, PageSize: pageSize, MaxRetries: &noRetries})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

func newPaddleEnv(t *testing.T, pageSize int) *paddleEnv {
	t.Helper()
	e := &paddleEnv{api: paddletest.New(t, paddleKey), pool: pgtest.NewPool(t), now: time.Now().Truncate(time.Second)}
	e.store = reconcile.NewStore(e.pool)
	e.proc = &reconciletest.ClaimingProcessor{Pool: e.pool}
	e.rec = &reconcile.Events{Source: paddle.Source,
		Lister:    newPaddleAPI(t, e.api, pageSize),
		Decode:    paddle.DecodeListed,
		Processor: e.proc,
		Claims:    e.store,
		Store:     e.store,
		Now:       func() time.Time { return e.now },
		Log:       reconciletest.Log(t),
	}
	return e
}

// add puts n events in the API, one a minute from start (an offset from
// now), and returns them oldest first.
func (e *paddleEnv) add(n int, start time.Duration) []paddletest.Event {
	var out []paddletest.Event
	for i := range n {
		out = append(out, e.api.Add("transaction.completed", e.now.Add(start+time.Duration(i)*time.Minute),
			map[string]any{"id": fmt.Sprintf("txn_%d_%d", start/time.Minute, i), "status": "completed"}))
	}
	return out
}

// deliver claims events as deliveries of their notifications would have.
func (e *paddleEnv) deliver(t *testing.T, evs ...paddletest.Event) {
	t.Helper()
	for _, ev := range evs {
		reconciletest.MustExec(t, e.pool, `INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type, body, outcome, via)
VALUES ($1, 'paddle', 'done', 'event', now(), $1, $2, $3, 'processed', 'delivery')`, ev.ID, ev.Type, ev.Raw)
	}
}

func eventIDs(evs []paddletest.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func TestPaddleRunProcessesExactlyTheMissing(t *testing.T) {
	e := newPaddleEnv(t, 3)
	e.api.Add("transaction.completed", e.now.Add(-5*time.Hour), map[string]any{"id": "txn_old"}) // before --since
	evs := e.add(10, -2*time.Hour)
	e.deliver(t, evs[0], evs[3], evs[4], evs[9])
	var missing []paddletest.Event
	for i, ev := range evs {
		if i != 0 && i != 3 && i != 4 && i != 9 {
			missing = append(missing, ev)
		}
	}

	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 3 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 10 || sum.Known != 4 || sum.Processed != 6 || sum.Cursor.ID != evs[9].ID || !sum.Through.Equal(evs[9].OccurredAt) {
		t.Errorf("summary %+v", sum)
	}
	got := e.proc.Processed()
	if diff := cmp.Diff(eventIDs(missing), reconciletest.KeysOf(got)); diff != "" {
		t.Errorf("processed, in creation order (-want +got):\n%s", diff)
	}
	for i, ev := range got {
		if ev.Via != webhooks.ViaReconcile || string(ev.Body) != string(missing[i].Raw) || ev.Source != "paddle" || ev.ID != missing[i].ID {
			t.Errorf("event %s: via %q, source %q, body as the API returned it: %t", ev.Key, ev.Via, ev.Source, string(ev.Body) == string(missing[i].Raw))
		}
	}
	c, ok, err := e.store.Cursor(context.Background(), paddle.Source, "")
	if err != nil || !ok || c.ID != evs[9].ID {
		t.Errorf("cursor %+v %t %v, want %s", c, ok, err, evs[9].ID)
	}
	runs, err := e.store.Runs(context.Background(), paddle.Source, 10)
	if err != nil || len(runs) != 1 || runs[0].Result != "ok" || runs[0].Tally != (reconcile.Tally{Found: 10, Missed: 6}) {
		t.Errorf("runs %+v, %v", runs, err)
	}
	if s := sum.String(); !strings.Contains(s, "10 found, 4 already known, 6 processed, 0 parked") {
		t.Errorf("summary reads %q", s)
	}
	// What the client asked: oldest first, the most events a page, after
	// the last event of each page.
	for _, r := range e.api.Requests() {
		if r.Status != 200 || r.Query.Get("per_page") != "3" || (r.Query.Get("order_by") != "id[ASC]" && r.Query.Get("order_by") != "id[DESC]") {
			t.Errorf("request %+v", r)
		}
	}

	t.Run("SecondRunChangesNothing", func(t *testing.T) {
		before := len(e.proc.Processed())
		sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 3 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Found != 10 || sum.Known != 10 || len(e.proc.Processed()) != before {
			t.Errorf("summary %+v; processor called %d times", sum, len(e.proc.Processed())-before)
		}
	})
	t.Run("ResumeListsOnlyWhatIsNew", func(t *testing.T) {
		newer := e.add(2, -10*time.Minute)
		before, asked := len(e.proc.Processed()), len(e.api.Requests())
		sum, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Found != 2 || sum.Processed != 2 || sum.From.ID != evs[9].ID {
			t.Errorf("summary %+v", sum)
		}
		if diff := cmp.Diff(eventIDs(newer), reconciletest.KeysOf(e.proc.Processed()[before:])); diff != "" {
			t.Errorf("processed (-want +got):\n%s", diff)
		}
		if reqs := e.api.Requests()[asked:]; len(reqs) != 1 || reqs[0].Query.Get("after") != evs[9].ID {
			t.Errorf("requests %+v, want one, after the cursor", reqs)
		}
	})
	t.Run("EveryEventPaddleKeeps", func(t *testing.T) {
		sum, err := e.rec.Run(context.Background(), reconcile.Options{DryRun: true})
		if err != nil || sum.Found != 13 || sum.WouldProcess != 1 {
			t.Errorf("%+v %v", sum, err)
		}
	})
}

func TestPaddleRunDryRunWritesNothing(t *testing.T) {
	e := newPaddleEnv(t, 50)
	evs := e.add(5, -time.Hour)
	e.deliver(t, evs[1])
	var reports []string
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour, DryRun: true,
		OnEvent: func(r reconcile.EventReport) { reports = append(reports, r.ID+" "+string(r.Disposition)) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 5 || sum.Known != 1 || sum.WouldProcess != 4 || !strings.Contains(sum.String(), "(dry run)") {
		t.Errorf("summary %+v", sum)
	}
	if reports[1] != evs[1].ID+" known" || len(reports) != 5 {
		t.Errorf("reports %q", reports)
	}
	if n := len(e.proc.Processed()); n != 0 {
		t.Errorf("processor called %d times", n)
	}
	for _, table := range []string{"reconcile_cursors", "reconcile_runs"} {
		if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d rows in %s", n, table)
		}
	}
}

// TestPaddleJob: the periodic job resumes from its cursor (the first time,
// an hour back, pinned when it finds nothing), lists only the types the
// receiver acts on, and leaves the last minutes to their deliveries.
func TestPaddleJob(t *testing.T) {
	e := newPaddleEnv(t, 2)
	e.rec.PeriodicTypes = []string{"transaction.completed"}
	job := e.rec.Job(0, 0)
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	scope := reconcile.Scope([]string{"transaction.completed"}, false, "")
	c, ok, _ := e.store.Cursor(context.Background(), paddle.Source, scope)
	if !ok || c.ID != "" || !c.Created.Equal(e.now.Add(-reconcile.DefaultLookback)) {
		t.Errorf("cursor %+v %t; want the start of the window pinned", c, ok)
	}

	e.now = e.now.Add(2 * time.Hour)
	e.api.Add("transaction.completed", e.now.Add(-190*time.Minute), map[string]any{"id": "txn_before"}) // before the pin
	mid := e.add(3, -100*time.Minute)
	e.api.Add("customer.updated", e.now.Add(-90*time.Minute), map[string]any{"id": "ctm_1"}) // not a type it lists
	young := e.api.Add("transaction.completed", e.now.Add(-time.Minute), map[string]any{"id": "txn_young"})
	tally, err := job.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(eventIDs(mid), reconciletest.KeysOf(e.proc.Processed())); diff != "" {
		t.Errorf("processed (-want +got):\n%s", diff)
	}
	if tally.Missed != 3 {
		t.Errorf("tally %+v", tally)
	}
	for _, r := range e.api.Requests() {
		if r.Query.Get("event_type") != "transaction.completed" {
			t.Errorf("request %+v", r)
		}
	}
	e.now = e.now.Add(5 * time.Minute)
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := reconciletest.KeysOf(e.proc.Processed()); len(got) != 4 || got[3] != young.ID {
		t.Errorf("processed %v, want the young event last", got)
	}
	runs, _ := e.store.Runs(context.Background(), paddle.Source, 10)
	if len(runs) != 3 || runs[0].Trigger != "periodic" || runs[0].Result != "ok" {
		t.Errorf("runs %+v", runs)
	}
}

func TestPaddleRunOutcomesAndInterruption(t *testing.T) {
	e := newPaddleEnv(t, 4)
	evs := e.add(6, -time.Hour)
	e.proc.Outcome = func(ev webhooks.Event) (webhooks.Outcome, bool) {
		if ev.Key == evs[3].ID {
			return webhooks.OutcomeError, true // the database failed
		}
		return "", false
	}
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour})
	if !errors.Is(err, reconcile.ErrIncomplete) || sum.Failed != 1 || sum.Processed != 5 || sum.Cursor.ID != evs[2].ID {
		t.Errorf("%+v %v", sum, err)
	}
	e.proc.Outcome = nil
	before := len(e.proc.Processed())
	if _, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{evs[3].ID}, reconciletest.KeysOf(e.proc.Processed()[before:])); diff != "" {
		t.Errorf("the retry (-want +got):\n%s", diff)
	}
	if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM processed_events`); n != 6 {
		t.Errorf("%d claims, want 6", n)
	}
	if _, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true, Types: []string{"x"}}); !errors.Is(err, reconcile.ErrNoCursor) {
		t.Errorf("resume with other filters: %v, want ErrNoCursor", err)
	}
}

func TestPaddleRunStopsAtABound(t *testing.T) {
	for _, c := range []struct {
		name      string
		misbehave paddletest.Misbehaviour
		limits    reconcile.Limits
		want      error
		requests  int
	}{
		{"RepeatPage", paddletest.RepeatPage, reconcile.Limits{}, reconcile.ErrCursorRepeated, 5},
		{"Endless", paddletest.Endless, reconcile.Limits{MaxPages: 20}, reconcile.ErrTooManyPages, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newPaddleEnv(t, 3)
			e.add(5, -time.Hour)
			e.rec.Limits = c.limits
			e.api.Misbehave(c.misbehave)
			_, err := e.rec.Run(context.Background(), reconcile.Options{})
			if !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "reconcile paddle: stopped: ") {
				t.Errorf("error %v, want %v", err, c.want)
			}
			if n := len(e.api.Requests()); n > c.requests {
				t.Errorf("%d requests, want at most %d", n, c.requests)
			}
			runs, _ := e.store.Runs(context.Background(), paddle.Source, 1)
			if len(runs) != 1 || runs[0].Result != "error" {
				t.Errorf("runs %+v", runs)
			}
			if release, err := e.store.Lock(context.Background(), paddle.Source); err != nil {
				t.Errorf("the lock after the run: %v", err)
			} else {
				release()
			}
		})
	}
}

func TestPaddleAPI(t *testing.T) {
	s := paddletest.New(t, paddleKey)
	t.Run("WrongKey", func(t *testing.T) {
		api, _ := paddle.NewAPI(paddle.APIConfig{Key: "pdl_sdbx_apikey_wrong_0000000000", BaseURL: s.URL})
		for _, err := range api.List(context.Background(), reconcile.Window{}) {
			var ae *paddle.APIError
			if !errors.As(err, &ae) || ae.Status != 403 {
				t.Errorf("%v, want a 403", err)
			}
		}
	})
	t.Run("Retries", func(t *testing.T) {
		s.Add("transaction.completed", time.Now().Add(-time.Minute), map[string]any{"id": "txn_1"})
		s.FailNext(503, 1)
		one := 1
		api, _ := paddle.NewAPI(paddle.APIConfig{Key: paddleKey, BaseURL: s.URL, MaxRetries: &one})
		n := 0
		for _, err := range api.List(context.Background(), reconcile.Window{}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 1 {
			t.Errorf("%d events, want 1", n)
		}
	})
	t.Run("HTTPSOnly", func(t *testing.T) {
		if _, err := paddle.NewAPI(paddle.APIConfig{Key: paddleKey, BaseURL: "http://sandbox-api.paddle.com"}); err == nil {
			t.Error("an http:// base that is not loopback is accepted")
		}
	})
}
