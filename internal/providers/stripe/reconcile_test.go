package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/pgtest"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// stripeEnv is a reconciler over a fresh database and a fake Stripe API.
type stripeEnv struct {
	api   *stripetest.Server
	pool  *pgxpool.Pool
	store *reconcile.Store
	proc  *reconciletest.ClaimingProcessor
	rec   *reconcile.Events
	now   time.Time
}

func newStripeEnv(t *testing.T, pageSize int64) *stripeEnv {
	t.Helper()
	e := &stripeEnv{api: stripetest.New(t, stripeKey), pool: pgtest.NewPool(t), now: time.Now().Truncate(time.Second)}
	e.store = reconcile.NewStore(e.pool)
	e.proc = &reconciletest.ClaimingProcessor{Pool: e.pool}
	e.rec = &reconcile.Events{Source: stripe.Source, MaxTypes: stripe.MaxListTypes,
		Lister:    newStripeAPI(t, e.api, pageSize),
		Decode:    stripe.DecodeListed,
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
func (e *stripeEnv) add(n int, start time.Duration) []stripetest.Event {
	var out []stripetest.Event
	for i := range n {
		out = append(out, e.api.Add("invoice.paid", e.now.Add(start+time.Duration(i)*time.Minute),
			map[string]any{"id": fmt.Sprintf("in_%d", i), "object": "invoice"}, false))
	}
	return out
}

// deliver claims events as deliveries would have.
func (e *stripeEnv) deliver(t *testing.T, evs ...stripetest.Event) {
	t.Helper()
	for _, ev := range evs {
		reconciletest.MustExec(t, e.pool, `INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type, body, outcome, via)
VALUES ($1, 'stripe', 'done', 'event', now(), $1, $2, $3, 'processed', 'delivery')`, ev.ID, ev.Type, ev.Raw)
	}
}

func eventIDs(evs []stripetest.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func TestStripeRunProcessesExactlyTheMissing(t *testing.T) {
	e := newStripeEnv(t, 3)
	evs := e.add(10, -2*time.Hour)
	delivered := []stripetest.Event{evs[0], evs[3], evs[4], evs[9]}
	e.deliver(t, delivered...)
	var missing []stripetest.Event
	for i, ev := range evs {
		if i != 0 && i != 3 && i != 4 && i != 9 {
			missing = append(missing, ev)
		}
	}
	e.api.Add("invoice.paid", e.now.Add(-5*time.Hour), map[string]any{"id": "in_old"}, false) // before --since

	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 3 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := reconcile.EventSummary{Source: "stripe",
		From:  reconcile.Cursor{Created: e.now.Add(-3 * time.Hour)},
		Found: 10, Known: 4, Processed: 6,
		Cursor:  reconcile.Cursor{ID: evs[9].ID, Created: evs[9].Created},
		Through: evs[9].Created,
	}
	if diff := cmp.Diff(want, sum, cmpCursor); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	got := e.proc.Processed()
	if diff := cmp.Diff(eventIDs(missing), reconciletest.KeysOf(got)); diff != "" {
		t.Errorf("processed, in creation order (-want +got):\n%s", diff)
	}
	for i, ev := range got {
		if ev.Via != webhooks.ViaReconcile || string(ev.Body) != string(missing[i].Raw) || ev.Source != "stripe" {
			t.Errorf("event %s: via %q, source %q, body as the API returned it: %t", ev.Key, ev.Via, ev.Source, string(ev.Body) == string(missing[i].Raw))
		}
	}
	if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM processed_events WHERE via = 'reconcile'`); n != 6 {
		t.Errorf("%d claims via reconcile, want 6", n)
	}
	c, ok, err := e.store.Cursor(context.Background(), stripe.Source, "")
	if err != nil || !ok || c.ID != evs[9].ID {
		t.Errorf("cursor %+v %t %v, want %s", c, ok, err, evs[9].ID)
	}
	runs, err := e.store.Runs(context.Background(), stripe.Source, 10)
	if err != nil || len(runs) != 1 || runs[0].Result != "ok" || runs[0].Trigger != "cli" ||
		runs[0].Tally != (reconcile.Tally{Found: 10, Missed: 6}) || runs[0].FinishedAt.IsZero() {
		t.Errorf("runs %+v, %v", runs, err)
	}
	if s := sum.String(); !strings.Contains(s, "10 found, 4 already known, 6 processed, 0 parked") {
		t.Errorf("summary reads %q", s)
	}

	t.Run("SecondRunChangesNothing", func(t *testing.T) {
		before := len(e.proc.Processed())
		sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 3 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Found != 10 || sum.Known != 10 || sum.Processed != 0 || len(e.proc.Processed()) != before {
			t.Errorf("summary %+v; processor called %d times", sum, len(e.proc.Processed())-before)
		}
	})
	t.Run("ResumeListsOnlyWhatIsNew", func(t *testing.T) {
		newer := e.add(2, -10*time.Minute)
		before := len(e.proc.Processed())
		sum, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Found != 2 || sum.Processed != 2 || !sum.From.Equal(reconcile.Cursor{ID: evs[9].ID, Created: evs[9].Created}) {
			t.Errorf("summary %+v", sum)
		}
		if diff := cmp.Diff(eventIDs(newer), reconciletest.KeysOf(e.proc.Processed()[before:])); diff != "" {
			t.Errorf("processed (-want +got):\n%s", diff)
		}
	})
}

var cmpCursor = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func TestStripeRunDryRunWritesNothing(t *testing.T) {
	e := newStripeEnv(t, 100)
	evs := e.add(5, -time.Hour)
	e.deliver(t, evs[1])
	var reports []reconcile.EventReport
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour, DryRun: true,
		OnEvent: func(r reconcile.EventReport) { reports = append(reports, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 5 || sum.Known != 1 || sum.WouldProcess != 4 || sum.Processed != 0 || !sum.DryRun {
		t.Errorf("summary %+v", sum)
	}
	var disp []string
	for _, r := range reports {
		disp = append(disp, r.ID+" "+string(r.Disposition))
	}
	want := []string{evs[0].ID + " would_process", evs[1].ID + " known", evs[2].ID + " would_process",
		evs[3].ID + " would_process", evs[4].ID + " would_process"}
	if diff := cmp.Diff(want, disp); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if n := len(e.proc.Processed()); n != 0 {
		t.Errorf("processor called %d times", n)
	}
	for _, table := range []string{"reconcile_cursors", "reconcile_runs"} {
		if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d rows in %s", n, table)
		}
	}
	if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM processed_events`); n != 1 {
		t.Errorf("%d claims, want the 1 delivered", n)
	}
	if s := sum.String(); !strings.Contains(s, "(dry run)") || !strings.Contains(s, "4 would be processed") {
		t.Errorf("summary reads %q", s)
	}
	// A dry run needs no lock: it runs while another run holds it.
	release, err := e.store.Lock(context.Background(), stripe.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := e.rec.Run(context.Background(), reconcile.Options{DryRun: true}); err != nil {
		t.Errorf("dry run under another's lock: %v", err)
	}
}

func TestStripeRunResumesAfterAnInterruption(t *testing.T) {
	e := newStripeEnv(t, 4)
	evs := e.add(12, -3*time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.proc.Outcome = func(ev webhooks.Event) (webhooks.Outcome, bool) {
		if ev.Key == evs[7].ID {
			cancel() // the operator's ^C, or SIGTERM, while event 7 is processed
			return webhooks.OutcomeError, true
		}
		return "", false
	}
	sum, err := e.rec.Run(ctx, reconcile.Options{Since: 4 * time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if sum.Processed != 7 || sum.Failed != 1 || sum.Cursor.ID != evs[6].ID {
		t.Errorf("interrupted run: %+v", sum)
	}
	runs, _ := e.store.Runs(context.Background(), stripe.Source, 1)
	if len(runs) != 1 || runs[0].Result != "error" {
		t.Errorf("runs %+v", runs)
	}

	e.proc.Outcome = nil
	before := len(e.proc.Processed())
	sum, err = e.rec.Run(context.Background(), reconcile.Options{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(eventIDs(evs[7:]), reconciletest.KeysOf(e.proc.Processed()[before:])); diff != "" {
		t.Errorf("resumed run processed (-want +got):\n%s", diff)
	}
	if sum.Found != 5 || sum.Processed != 5 {
		t.Errorf("resumed run: %+v", sum)
	}
	if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM processed_events`); n != 12 {
		t.Errorf("%d claims, want 12", n)
	}
}

func TestStripeRunAfterAKillMidBatch(t *testing.T) {
	// A process killed mid-batch never saved the cursor of that batch: the
	// next run lists those events again and finds them claimed.
	e := newStripeEnv(t, 100)
	evs := e.add(6, -time.Hour)
	e.deliver(t, evs[:4]...) // what the killed run had processed
	reconciletest.MustExec(t, e.pool, `INSERT INTO reconcile_cursors (source, scope, event_id, event_created) VALUES ('stripe', '', '', $1)`,
		e.now.Add(-2*time.Hour))
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 6 || sum.Known != 4 || sum.Processed != 2 {
		t.Errorf("summary %+v", sum)
	}
	if diff := cmp.Diff(eventIDs(evs[4:]), reconciletest.KeysOf(e.proc.Processed())); diff != "" {
		t.Errorf("processed (-want +got):\n%s", diff)
	}
}

func TestStripeRunOutcomes(t *testing.T) {
	e := newStripeEnv(t, 100)
	evs := e.add(7, -time.Hour)
	bad, err := e.api.AddRaw([]byte(fmt.Sprintf(`{"id":"evt_nodata","object":"event","type":"invoice.paid","created":%d}`,
		e.now.Add(-time.Hour+90*time.Second).Unix())), false)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]webhooks.Outcome{
		evs[1].ID: webhooks.OutcomeIgnored,
		evs[2].ID: webhooks.OutcomeParked,
		evs[3].ID: webhooks.OutcomeDuplicate, // a delivery claimed it between the check and the claim
		evs[4].ID: webhooks.OutcomeError,
		evs[5].ID: webhooks.OutcomeStepFailed,
	}
	e.proc.Outcome = func(ev webhooks.Event) (webhooks.Outcome, bool) {
		o, ok := outcomes[ev.Key]
		return o, ok
	}
	var reports []string
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour,
		OnEvent: func(r reconcile.EventReport) { reports = append(reports, string(r.Disposition)) }})
	if !errors.Is(err, reconcile.ErrIncomplete) {
		t.Errorf("error %v, want ErrIncomplete", err)
	}
	want := []string{"processed", "ignored", "unreadable", "parked", "raced", "failed", "step_failed", "processed"}
	if diff := cmp.Diff(want, reports); diff != "" {
		t.Errorf("dispositions (-want +got):\n%s", diff)
	}
	if sum.Processed != 2 || sum.Ignored != 1 || sum.Parked != 1 || sum.Raced != 1 || sum.Failed != 1 ||
		sum.StepFailed != 1 || sum.Unreadable != 1 || sum.Missed() != 4 {
		t.Errorf("summary %+v", sum)
	}
	// The cursor stops before the failed event, so that the next run
	// retries it.
	if sum.Cursor.ID != evs[3].ID {
		t.Errorf("cursor %s, want %s (the last before the failure)", sum.Cursor.ID, evs[3].ID)
	}
	_ = bad
	e.proc.Outcome = nil
	before := len(e.proc.Processed())
	sum, err = e.rec.Run(context.Background(), reconcile.Options{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{evs[4].ID}, reconciletest.KeysOf(e.proc.Processed()[before:])); diff != "" {
		t.Errorf("retry processed (-want +got):\n%s", diff)
	}
	if sum.Cursor.ID != evs[6].ID {
		t.Errorf("cursor %s, want %s", sum.Cursor.ID, evs[6].ID)
	}
}

func TestStripeRunStopsWhenEveryEventFails(t *testing.T) {
	e := newStripeEnv(t, 100)
	e.add(20, -time.Hour)
	e.proc.Outcome = func(webhooks.Event) (webhooks.Outcome, bool) { return webhooks.OutcomeError, true }
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour})
	if err == nil || sum.Failed != 5 || !sum.Cursor.IsZero() {
		t.Errorf("error %v, summary %+v; want a stop after 5 failures and no cursor", err, sum)
	}
	if n := reconciletest.Count(t, e.pool, `SELECT count(*) FROM reconcile_cursors`); n != 0 {
		t.Errorf("%d cursors after a run that settled nothing", n)
	}
}

func TestStripeRunFiltersHaveTheirOwnCursor(t *testing.T) {
	e := newStripeEnv(t, 100)
	paid := e.add(2, -time.Hour)
	refund := e.api.Add("charge.refunded", e.now.Add(-30*time.Minute), map[string]any{"id": "ch_1"}, true)
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour,
		Types: []string{"invoice.paid", "invoice.created"}, FailedOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Scope != "types=invoice.created,invoice.paid;failed_only" || sum.Processed != 2 {
		t.Errorf("summary %+v", sum)
	}
	if _, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true}); !errors.Is(err, reconcile.ErrNoCursor) {
		t.Errorf("resume without filters: %v, want ErrNoCursor (the filtered run's cursor is not its)", err)
	}
	sum, err = e.rec.Run(context.Background(), reconcile.Options{Resume: true, Types: []string{"invoice.created", "invoice.paid"}, FailedOnly: true})
	if err != nil || sum.From.ID != paid[1].ID || sum.Found != 0 {
		t.Errorf("resume with the same filters: %+v, %v", sum, err)
	}
	sum, err = e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour})
	if err != nil || sum.Found != 3 || sum.Known != 2 || sum.Processed != 1 {
		t.Errorf("unfiltered: %+v, %v", sum, err)
	}
	if got := reconciletest.KeysOf(e.proc.Processed()); got[len(got)-1] != refund.ID {
		t.Errorf("processed %v", got)
	}
}

func TestStripeRunSettleAndPinnedStart(t *testing.T) {
	e := newStripeEnv(t, 100)
	// The periodic job's options: resume, or look back an hour; leave the
	// last two minutes to their deliveries.
	opts := reconcile.Options{Resume: true, Since: time.Hour, Settle: 2 * time.Minute, Trigger: reconcile.TriggerPeriodic}
	sum, err := e.rec.Run(context.Background(), opts)
	if err != nil || sum.Found != 0 {
		t.Fatalf("%+v, %v", sum, err)
	}
	c, ok, _ := e.store.Cursor(context.Background(), stripe.Source, "")
	if !ok || c.ID != "" || !c.Created.Equal(e.now.Add(-time.Hour)) {
		t.Errorf("cursor %+v %t; want the start of the window pinned", c, ok)
	}

	// Two hours later: everything since the pinned start, but the youngest.
	e.now = e.now.Add(2 * time.Hour)
	old := e.api.Add("invoice.paid", e.now.Add(-190*time.Minute), map[string]any{"id": "in_before"}, false) // before the pin
	mid := e.add(3, -100*time.Minute)
	young := e.api.Add("invoice.paid", e.now.Add(-time.Minute), map[string]any{"id": "in_young"}, false)
	sum, err = e.rec.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(eventIDs(mid), reconciletest.KeysOf(e.proc.Processed())); diff != "" {
		t.Errorf("processed (-want +got):\n%s", diff)
	}
	_ = old
	e.now = e.now.Add(5 * time.Minute)
	if _, err := e.rec.Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got := reconciletest.KeysOf(e.proc.Processed()); len(got) != 4 || got[3] != young.ID {
		t.Errorf("processed %v, want the young event last", got)
	}
	runs, _ := e.store.Runs(context.Background(), stripe.Source, 10)
	if len(runs) != 3 || runs[0].Trigger != "periodic" {
		t.Errorf("runs %+v", runs)
	}
}

func TestStripeRunProgress(t *testing.T) {
	e := newStripeEnv(t, 100)
	e.add(230, -5*time.Hour)
	var found []int
	_, err := e.rec.Run(context.Background(), reconcile.Options{Since: 6 * time.Hour,
		Progress: func(s reconcile.EventSummary) { found = append(found, s.Found) }})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{100, 200, 230}, found); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

func TestStripeRunOneAtATime(t *testing.T) {
	e := newStripeEnv(t, 100)
	e.add(3, -time.Hour)
	inside, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	e.proc.Outcome = func(webhooks.Event) (webhooks.Outcome, bool) {
		if first.CompareAndSwap(false, true) { // the first event of the first run waits
			close(inside)
			<-release
		}
		return "", false
	}
	done := make(chan error)
	go func() {
		_, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour})
		done <- err
	}()
	<-inside
	// Another replica, with its own pool, tries meanwhile.
	other := *e.rec
	other.Store = reconcile.NewStore(reconciletest.OpenPool(t, e.pool.Config().ConnString()))
	if _, err := other.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour}); !errors.Is(err, reconcile.ErrBusy) {
		t.Errorf("concurrent run: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := other.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour}); err != nil {
		t.Errorf("run after the first finished: %v", err)
	}
}

func TestStripeRunOptions(t *testing.T) {
	e := newStripeEnv(t, 100)
	many := make([]string, 21)
	for i := range many {
		many[i] = fmt.Sprint("t.", i)
	}
	if _, err := e.rec.Run(context.Background(), reconcile.Options{Types: many}); err == nil {
		t.Error("21 types accepted")
	}
	if _, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true}); !errors.Is(err, reconcile.ErrNoCursor) {
		t.Errorf("resume with no cursor: %v", err)
	}
}
