package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testProvider is a provider of the test's own: a "paid" event writes an
// order and plans the two steps of a paid checkout, each on the condition
// that the event's transaction wrote the order.
type testProvider struct{}

var testSpec = webhooks.Spec{Source: "test", SignatureHeaders: []string{"X-Test-Signature"}, Types: []string{"test.paid"}}

func (testProvider) Verify(h http.Header, body []byte, _ time.Time) (webhooks.Event, error) {
	if h.Get("X-Test-Signature") != "valid" {
		return webhooks.Event{}, webhooks.Reject("no_valid_signature", nil)
	}
	var e struct {
		ID     string
		Resent bool // the test's stand-in for a sender's signed hint (Stripe: t long after created)
	}
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" {
		return webhooks.Event{}, webhooks.Reject("malformed_json", err)
	}
	return webhooks.Event{Source: "test", Key: e.ID, ID: e.ID, Type: "test.paid", Body: body, Resent: e.Resent}, nil
}

func (testProvider) Plan(ev *webhooks.Event, p *webhooks.Plan) error {
	o := orders.Order{
		Source: "test", ProviderEventID: ev.ID, ExternalID: "ext_" + ev.ID, Status: orders.StatusPaid,
		AmountCents: 1000, Currency: "usd", CustomerEmail: "customer@example.com",
	}
	orders.Create(p, o, orders.Position{})
	cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusPaid)
	p.StepIf(mail.Step("email.confirmation", mail.Email{Template: "order_confirmation"}), cond, args...)
	p.StepIf(fulfillment.Step("fulfillment"), cond, args...)
	return nil
}

// rig is a processor on a fresh database with a real SMTP server and a
// real fulfillment API, served over HTTP like the receiver does.
type rig struct {
	pool *pgxpool.Pool
	smtp *mailtest.Server
	api  *fulfillmenttest.Server
	proc *webhooks.Processor
	url  string
	opts webhooks.Options
}

func kinds(smtpAddr, apiURL string) webhooks.StepKinds {
	k := webhooks.StepKinds{
		mail.KindEmail:              mail.Kind{Sender: mail.SMTPSender{Addr: smtpAddr}, From: "shop@example.test", Domain: "example.test"},
		fulfillment.KindFulfillment: fulfillment.Kind{},
	}
	if apiURL != "" {
		k[fulfillment.KindFulfillment] = fulfillment.Kind{Client: fulfillment.New(apiURL)}
	}
	return k
}

func newRig(t *testing.T, opts webhooks.Options) *rig {
	t.Helper()
	return newRigOn(t, pgtest.NewPool(t), opts)
}

// unpreparedPool is a pool of a fresh test database that prepares nothing
// and keeps no description (pgx's exec mode, which a user may name behind
// a transaction-mode pooler): every statement is parsed and planned where
// it is sent, every parameter sent as text.
func unpreparedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func newRigOn(t *testing.T, pool *pgxpool.Pool, opts webhooks.Options) *rig {
	t.Helper()
	r := &rig{pool: pool, smtp: mailtest.NewServer(t), api: fulfillmenttest.NewServer(t), opts: opts}
	metrics := webhooks.NewMetrics(prometheus.NewRegistry())
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r.proc = webhooks.NewProcessor(r.pool, kinds(r.smtp.Addr(), r.api.URL()), metrics, log, opts)
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/test", webhooks.NewHandler(r.proc, metrics, log, webhooks.Limits{MaxBody: 1 << 20, MaxInflight: 256}).Route(testSpec, testProvider{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/webhooks/test"
	return r
}

// testLog sends the processor's log lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type answer struct {
	status     int
	retryAfter string
	body       string
}

func (r *rig) deliver(t *testing.T, id string) answer {
	t.Helper()
	return r.post(t, id, fmt.Sprintf(`{"id":%q}`, id))
}

// resend delivers the event as a sender's retry: with the hint that has
// the processor look it up first.
func (r *rig) resend(t *testing.T, id string) answer {
	t.Helper()
	return r.post(t, id, fmt.Sprintf(`{"id":%q,"resent":true}`, id))
}

func (r *rig) post(t *testing.T, id, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
	req.Header.Set("X-Test-Signature", "valid")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("deliver %s: %v", id, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header.Get("Retry-After"), string(b)}
}

func (r *rig) event(id string) webhooks.Event {
	return webhooks.Event{Source: "test", Key: id, ID: id, Type: "test.paid", Body: []byte(fmt.Sprintf(`{"id":%q}`, id))}
}

type stepRow struct {
	Status    string
	LastError string
	Attempts  int
	Done      bool // completed_at set
	GivenBack bool // claimed_at = -infinity
}

func (r *rig) step(t *testing.T, key string) stepRow {
	t.Helper()
	var s stepRow
	err := r.pool.QueryRow(context.Background(), `
SELECT status, coalesce(last_error, ''), attempts, completed_at IS NOT NULL, claimed_at = '-infinity'
FROM processed_events WHERE event_key = $1`, key).Scan(&s.Status, &s.LastError, &s.Attempts, &s.Done, &s.GivenBack)
	if err != nil {
		t.Fatalf("step %s: %v", key, err)
	}
	return s
}

func (r *rig) orders(t *testing.T) int {
	t.Helper()
	var n int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func want(t *testing.T, got answer, status int) {
	t.Helper()
	if got.status != status {
		t.Fatalf("status %d, want %d (%s)", got.status, status, got.body)
	}
}

// waitLeaseExpired waits until every step lease of the event has run out.
func (r *rig) waitLeaseExpired(t *testing.T, eventKey string) {
	t.Helper()
	deadline := time.Now().Add(r.opts.Lease + 10*time.Second)
	for time.Now().Before(deadline) {
		var fresh int
		_ = r.pool.QueryRow(context.Background(), `
SELECT count(*) FROM processed_events
WHERE parent_key = $1 AND status = 'in_progress' AND claimed_at >= now() - $2 * interval '1 millisecond'`,
			eventKey, r.opts.Lease.Milliseconds()).Scan(&fresh)
		if fresh == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("leases never ran out")
}

// crashAfterCommit processes the event in a worker that dies right after
// its transaction commits: the claim, the order and the steps' leases are
// in the database, and no step ran.
func (r *rig) crashAfterCommit(t *testing.T, id string) {
	t.Helper()
	webhooks.SetAfterEventCommit(r.proc, func(webhooks.Event) { runtime.Goexit() })
	died := make(chan struct{})
	go func() {
		defer close(died)
		r.proc.Process(context.Background(), testProvider{}, r.event(id))
	}()
	<-died
	webhooks.SetAfterEventCommit(r.proc, nil)
}

// TestThreeOutcomes shows each outcome of the lease claim and the status the
// sender sees.
func TestThreeOutcomes(t *testing.T) {
	threeOutcomes(t, newRig(t, webhooks.Options{Lease: 5 * time.Minute}))
}

// TestThreeOutcomesUnprepared: the same in the exec mode a user may name
// behind a transaction-mode pooler, where nothing is prepared and every
// parameter goes as text (make test's pass through PgBouncer runs the
// receiver's own mode, cache_describe).
func TestThreeOutcomesUnprepared(t *testing.T) {
	threeOutcomes(t, newRigOn(t, unpreparedPool(t), webhooks.Options{Lease: 5 * time.Minute}))
}

func threeOutcomes(t *testing.T, r *rig) {

	t.Run("KeyComesBack", func(t *testing.T) {
		want(t, r.deliver(t, "evt_1"), 200)
		for _, s := range []string{"evt_1/email.confirmation", "evt_1/fulfillment"} {
			if st := r.step(t, s); st.Status != "done" || !st.Done {
				t.Errorf("%s = %+v, want done with completed_at", s, st)
			}
		}
		if len(r.smtp.Messages()) != 1 || len(r.api.Requests()) != 1 {
			t.Fatalf("emails %d, fulfillment calls %d, want 1 and 1", len(r.smtp.Messages()), len(r.api.Requests()))
		}
	})
	t.Run("AlreadyDone", func(t *testing.T) {
		a := r.deliver(t, "evt_1")
		want(t, a, 200)
		if !strings.Contains(a.body, "duplicate") {
			t.Errorf("body %s, want outcome duplicate", a.body)
		}
		if len(r.smtp.Messages()) != 1 || len(r.api.Requests()) != 1 {
			t.Fatalf("a duplicate repeated a step")
		}
	})
	t.Run("FreshLeaseHeldElsewhere", func(t *testing.T) {
		release := r.api.Hold()
		first := make(chan answer, 1)
		go func() { first <- r.deliver(t, "evt_2") }()
		r.api.WaitHeld(t, 1, 10*time.Second)

		second := r.deliver(t, "evt_2")
		want(t, second, 503)
		if secs, err := strconv.Atoi(second.retryAfter); err != nil || secs < 1 || secs > 300 {
			t.Errorf("Retry-After %q, want seconds until the lease runs out", second.retryAfter)
		}
		release()
		want(t, <-first, 200)
		want(t, r.deliver(t, "evt_2"), 200)
		if n := r.api.CountByKey(fulfillment.IdempotencyKey("evt_2/fulfillment")); n != 1 {
			t.Errorf("fulfillment calls for evt_2 = %d, want 1", n)
		}
	})
}

// deadWorkerLease is the lease of the tests that wait for a dead worker's
// lease to run out and then finish its steps. A step's completion must be
// recorded within a quarter of the lease (RecordTimeout): at 2 s that was
// 500 ms, which a loaded CI machine once took to commit an UPDATE, and the
// step was (correctly) left to run again, failing the test's count.
const deadWorkerLease = 4 * time.Second

// TestResentDeliveries: a delivery the sender marks as a resend is looked
// up before it is claimed, and every outcome is the one the single
// transaction gives: an unknown event is processed, a finished one is a
// duplicate that repeats nothing, a fresh lease answers 503, and a dead
// worker's steps are finished once its lease runs out.
func TestResentDeliveries(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: deadWorkerLease})
	t.Run("NeverSeen", func(t *testing.T) {
		a := r.resend(t, "evt_r1")
		want(t, a, 200)
		if !strings.Contains(a.body, `"processed"`) || r.orders(t) != 1 {
			t.Fatalf("body %s, orders %d: want processed, one order", a.body, r.orders(t))
		}
		if len(r.smtp.Messages()) != 1 || len(r.api.Requests()) != 1 {
			t.Fatalf("emails %d, fulfillment calls %d, want 1 and 1", len(r.smtp.Messages()), len(r.api.Requests()))
		}
	})
	t.Run("Finished", func(t *testing.T) {
		for range 3 {
			a := r.resend(t, "evt_r1")
			want(t, a, 200)
			if !strings.Contains(a.body, `"duplicate"`) {
				t.Errorf("body %s, want outcome duplicate", a.body)
			}
		}
		want(t, r.deliver(t, "evt_r1"), 200)
		if r.orders(t) != 1 || len(r.smtp.Messages()) != 1 || len(r.api.Requests()) != 1 {
			t.Fatalf("a resend repeated work: orders %d, emails %d, calls %d", r.orders(t), len(r.smtp.Messages()), len(r.api.Requests()))
		}
	})
	t.Run("WorkerDied", func(t *testing.T) {
		r.crashAfterCommit(t, "evt_r2")
		a := r.resend(t, "evt_r2")
		want(t, a, 503)
		if a.retryAfter == "" {
			t.Error("503 without Retry-After")
		}
		if len(r.smtp.Messages()) != 1 || len(r.api.Requests()) != 1 {
			t.Fatal("a step ran while another worker's lease was fresh")
		}
		r.waitLeaseExpired(t, "evt_r2")
		want(t, r.resend(t, "evt_r2"), 200)
		if st := r.step(t, "evt_r2/fulfillment"); st.Status != "done" || st.Attempts != 2 {
			t.Errorf("fulfillment step = %+v, want done on attempt 2", st)
		}
		if n := r.api.CountByKey(fulfillment.IdempotencyKey("evt_r2/fulfillment")); n != 1 {
			t.Errorf("fulfillment calls for evt_r2 = %d, want 1", n)
		}
		if r.orders(t) != 2 {
			t.Errorf("orders %d, want 2", r.orders(t))
		}
	})
}

// TestWorkerDiesBetweenClaimAndCompletion is the seed's second test for a
// step: the worker dies after its claim committed and before the step was
// done. A replay within the lease is answered 503; after the lease runs out
// a replay does the work and answers 200; and the redriver alone, with no
// replay at all, also gets it done.
func TestWorkerDiesBetweenClaimAndCompletion(t *testing.T) {
	t.Run("ReplayAfterLease", func(t *testing.T) {
		r := newRig(t, webhooks.Options{Lease: deadWorkerLease})
		r.crashAfterCommit(t, "evt_dead")
		if r.orders(t) != 1 {
			t.Fatal("the order did not commit with the claim")
		}
		a := r.deliver(t, "evt_dead")
		want(t, a, 503)
		if a.retryAfter == "" {
			t.Error("503 without Retry-After")
		}
		if len(r.smtp.Messages())+len(r.api.Requests()) != 0 {
			t.Fatal("a step ran while another worker's lease was fresh")
		}
		r.waitLeaseExpired(t, "evt_dead")
		want(t, r.deliver(t, "evt_dead"), 200)
		if len(r.smtp.Messages()) != 1 || len(r.api.Requests()) != 1 {
			t.Fatalf("after the lease ran out: emails %d, fulfillment calls %d", len(r.smtp.Messages()), len(r.api.Requests()))
		}
		if st := r.step(t, "evt_dead/fulfillment"); st.Status != "done" || st.Attempts != 2 {
			t.Errorf("fulfillment step = %+v, want done on attempt 2", st)
		}
	})
	t.Run("RedriverAlone", func(t *testing.T) {
		r := newRig(t, webhooks.Options{Lease: deadWorkerLease})
		r.crashAfterCommit(t, "evt_dead")
		if ran, _, err := r.proc.RedriveOnce(context.Background(), 10); err != nil || ran != 0 {
			t.Fatalf("redriver took a fresh lease: ran %d, %v", ran, err)
		}
		r.waitLeaseExpired(t, "evt_dead")
		ran, failed, err := r.proc.RedriveOnce(context.Background(), 10)
		if err != nil || ran != 2 || failed != 0 {
			t.Fatalf("redriver: ran %d failed %d err %v, want 2 steps", ran, failed, err)
		}
		if len(r.smtp.Messages()) != 1 || len(r.api.Requests()) != 1 {
			t.Fatalf("emails %d, fulfillment calls %d", len(r.smtp.Messages()), len(r.api.Requests()))
		}
		want(t, r.deliver(t, "evt_dead"), 200)
	})
}

// TestSlowWorkerCannotCompleteReclaimedStep: completion and release are
// compare-and-set on the claim token, so a worker whose lease was taken
// cannot mark the new holder's work done, and a reclaim never overwrites a
// completion (River #1302).
func TestSlowWorkerCannotCompleteReclaimedStep(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: time.Minute})
	ctx := context.Background()
	r.crashAfterCommit(t, "evt_slow")
	const key = "evt_slow/fulfillment"
	expire := func(ago string) {
		t.Helper()
		if _, err := r.pool.Exec(ctx, `UPDATE processed_events SET claimed_at = now() - $2::interval WHERE event_key = $1`, key, ago); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, status, _ := webhooks.TakeStep(ctx, r.pool, key, time.Minute); ok || status != webhooks.ClaimInProgress {
		t.Fatalf("a fresh lease was taken: ok=%v status=%s", ok, status)
	}
	expire("2 minutes") // the dead worker's lease runs out
	slow, ok, _, err := webhooks.TakeStep(ctx, r.pool, key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("take of an expired lease: %v %v", ok, err)
	}
	expire("2 minutes") // the slow worker's lease runs out in turn
	fresh, ok, _, err := webhooks.TakeStep(ctx, r.pool, key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("reclaim of an expired lease: %v %v", ok, err)
	}
	if err := webhooks.CompleteStep(ctx, r.pool, slow); !errors.Is(err, webhooks.ErrLeaseLost) {
		t.Fatalf("slow worker completed a reclaimed step: %v", err)
	}
	if _, err := webhooks.ReleaseStep(ctx, r.pool, slow, errors.New("late failure")); !errors.Is(err, webhooks.ErrLeaseLost) {
		t.Fatalf("slow worker released a reclaimed step: %v", err)
	}
	if st := r.step(t, key); st.Status != "in_progress" || st.GivenBack || st.Attempts != 3 {
		t.Fatalf("new holder's claim disturbed: %+v", st)
	}
	if err := webhooks.CompleteStep(ctx, r.pool, fresh); err != nil {
		t.Fatalf("new holder could not complete: %v", err)
	}
	// Even with its lease long expired, a done step is never taken back.
	expire("1 hour")
	if _, ok, status, _ := webhooks.TakeStep(ctx, r.pool, key, time.Minute); ok || status != webhooks.ClaimDone {
		t.Fatalf("a done step was reclaimed: ok=%v status=%s", ok, status)
	}
}

// TestFailingSMTP: the lease is given back at once, the delivery is not
// acknowledged, and the email is sent once the server recovers.
func TestFailingSMTP(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	r.smtp.SetFailure(errors.New("mailbox temporarily unavailable"))
	want(t, r.deliver(t, "evt_mail"), 502)
	st := r.step(t, "evt_mail/email.confirmation")
	if st.Status != "in_progress" || !st.GivenBack || !strings.Contains(st.LastError, "451") {
		t.Fatalf("after SMTP failure the step is %+v, want given back with the error", st)
	}
	// Given back: the next retry proceeds at once instead of a 503 for the lease.
	want(t, r.deliver(t, "evt_mail"), 502)
	r.smtp.SetFailure(nil)
	want(t, r.deliver(t, "evt_mail"), 200)
	if n := len(r.smtp.Messages()); n != 1 {
		t.Errorf("emails = %d, want 1", n)
	}
	if n := len(r.api.Requests()); n != 1 {
		t.Errorf("fulfillment calls = %d, want 1 (it succeeded the first time)", n)
	}
}

// TestFailingFulfillmentAPI: a 5xx gives the lease back, and every attempt
// carries the same Idempotency-Key.
func TestFailingFulfillmentAPI(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	r.api.SetStatus(503)
	want(t, r.deliver(t, "evt_api"), 502)
	want(t, r.deliver(t, "evt_api"), 502)
	r.api.SetStatus(0)
	want(t, r.deliver(t, "evt_api"), 200)
	key := fulfillment.IdempotencyKey("evt_api/fulfillment")
	if n := r.api.CountByKey(key); n != 3 {
		t.Fatalf("attempts with key %s = %d, want 3 (all with the same key)", key, n)
	}
	if n := len(r.api.Requests()); n != 3 {
		t.Fatalf("requests = %d, want 3", n)
	}
	want(t, r.deliver(t, "evt_api"), 200)
	if n := len(r.api.Requests()); n != 3 {
		t.Errorf("a done step was called again")
	}
}

// TestPermanentFailureParks: a 4xx from the fulfillment API is permanent:
// the step is parked for an operator and the delivery acknowledged.
func TestPermanentFailureParks(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	r.api.SetStatus(422)
	if a := r.deliver(t, "evt_bad"); a.status != 200 || !strings.Contains(a.body, `"parked"`) {
		t.Fatalf("delivery answered %d %s, want 200 with outcome parked", a.status, a.body)
	}
	if st := r.step(t, "evt_bad/fulfillment"); st.Status != "parked" || !strings.Contains(st.LastError, "422") {
		t.Fatalf("step = %+v, want parked with the 422", st)
	}
	r.api.SetStatus(0)
	want(t, r.deliver(t, "evt_bad"), 200)
	if n := len(r.api.Requests()); n != 1 {
		t.Errorf("a parked step was retried by a delivery: %d calls", n)
	}
}

// TestReplayRunsWhatItReopens: an operator's replay gives back a parked
// step and runs it itself, and says so (processed), even when the
// redriver polls in between: the redriver leaves a reopened step to the
// replay for one lease, after which it would run it (a replay that died).
func TestReplayRunsWhatItReopens(t *testing.T) {
	ctx := context.Background()
	const lease = 5 * time.Minute
	r := newRig(t, webhooks.Options{Lease: lease})
	r.api.SetStatus(422)
	if a := r.deliver(t, "evt_reopen"); a.status != 200 || !strings.Contains(a.body, `"parked"`) {
		t.Fatalf("delivery answered %d %s, want 200 with outcome parked", a.status, a.body)
	}
	r.api.SetStatus(0)
	hooked := false
	webhooks.SetAfterReopen(r.proc, func(webhooks.Event) {
		hooked = true
		var due time.Duration
		if err := r.pool.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM next_attempt_at - now()) * 1e9, 0)::bigint
			FROM processed_events WHERE event_key = 'evt_reopen/fulfillment'`).Scan(&due); err != nil {
			t.Fatal(err)
		}
		if due <= lease-time.Minute || due > lease {
			t.Errorf("the reopened step is due for the redriver in %v, want one lease (%v)", due, lease)
		}
		if ran, _, err := r.proc.RedriveOnce(ctx, 10); err != nil || ran != 0 {
			t.Errorf("the redriver ran %d steps (%v) between the replay's reopening and its take, want 0", ran, err)
		}
	})
	ev, err := webhooks.LoadEvent(ctx, r.pool, "evt_reopen")
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.proc.Replay(ctx, testProvider{}, ev)
	if err != nil || res.Outcome != webhooks.OutcomeProcessed {
		t.Fatalf("replay: %+v, %v; want processed", res, err)
	}
	if !hooked {
		t.Fatal("the replay reopened nothing")
	}
	if st := r.step(t, "evt_reopen/fulfillment"); st.Status != "done" || st.Attempts != 1 {
		t.Errorf("step = %+v, want done at its first attempt since the replay", st)
	}
	if n := len(r.api.Requests()); n != 2 {
		t.Errorf("the fulfillment API was called %d times, want 2 (the refused call and the replay's)", n)
	}
}

// TestStepErrorsNameNoCustomer: a fulfillment API that echoes the order's
// customer_email in its refusal, as APIs often do, leaves no address in
// last_error, in the attempt's recorded error, or in any log line.
func TestStepErrorsNameNoCustomer(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Email string `json:"customer_email"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"error":"no account for %s"}`, body.Email)
	}))
	t.Cleanup(api.Close)
	var logs strings.Builder
	var mu sync.Mutex
	pool, smtp := pgtest.NewPool(t), mailtest.NewServer(t)
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	proc := webhooks.NewProcessor(pool, kinds(smtp.Addr(), api.URL), webhooks.NewMetrics(prometheus.NewRegistry()), log,
		webhooks.Options{Lease: 5 * time.Minute})
	ev := webhooks.Event{Source: "test", Key: "evt_leak", ID: "evt_leak", Type: "test.paid", Body: []byte(`{"id":"evt_leak"}`)}
	if res := proc.Process(context.Background(), testProvider{}, ev); res.Outcome != webhooks.OutcomeParked {
		t.Fatalf("outcome %s (%v), want parked", res.Outcome, res.Err)
	}
	var lastError, attemptError string
	if err := pool.QueryRow(context.Background(), `
SELECT coalesce(p.last_error, ''), coalesce((SELECT string_agg(a.error, ' ') FROM step_attempts a WHERE a.step_key = p.event_key), '')
FROM processed_events p WHERE p.event_key = 'evt_leak/fulfillment'`).Scan(&lastError, &attemptError); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	for what, text := range map[string]string{"last_error": lastError, "the attempt's error": attemptError, "the log": logged} {
		if strings.Contains(text, "customer@example.com") {
			t.Errorf("%s names the customer: %s", what, text)
		}
	}
	if !strings.Contains(lastError, "no account for ***@example.com") {
		t.Errorf("last_error %q, want the API's refusal with the address redacted", lastError)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAttemptsRunOut: after MaxAttempts failures the step is parked and the
// delivery acknowledged, so a sender does not retry for ever.
func TestAttemptsRunOut(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute, MaxAttempts: 2})
	r.smtp.SetFailure(errors.New("down"))
	want(t, r.deliver(t, "evt_flaky"), 502)
	want(t, r.deliver(t, "evt_flaky"), 200)
	if st := r.step(t, "evt_flaky/email.confirmation"); st.Status != "parked" || st.Attempts != 2 {
		t.Fatalf("step = %+v, want parked after 2 attempts", st)
	}
}

// TestStepTimeout: a call that hangs is cut at StepTimeout, well under the
// lease, and its lease is given back rather than left to run out.
func TestStepTimeout(t *testing.T) {
	lease := 2 * time.Second
	r := newRig(t, webhooks.Options{Lease: lease})
	release := r.api.Hold()
	defer release()
	start := time.Now()
	want(t, r.deliver(t, "evt_hang"), 502)
	if took := time.Since(start); took >= lease {
		t.Errorf("a hanging call held the delivery %s, not less than the lease %s", took, lease)
	}
	if st := r.step(t, "evt_hang/fulfillment"); !st.GivenBack {
		t.Errorf("step = %+v, want its lease given back", st)
	}
	if webhooks.StepTimeout(5*time.Minute) != 30*time.Second || webhooks.StepTimeout(lease) != lease/4 {
		t.Errorf("StepTimeout is not min(lease/4, 30s)")
	}
}

// TestDeterministicKeys: the same Idempotency-Key and Message-ID on every
// attempt of a step, and different ones across steps and events.
func TestDeterministicKeys(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	r.smtp.SetFailure(errors.New("down"))
	r.api.SetStatus(500)
	want(t, r.deliver(t, "evt_a"), 502)
	r.smtp.SetFailure(nil)
	r.api.SetStatus(0)
	want(t, r.deliver(t, "evt_a"), 200)
	want(t, r.deliver(t, "evt_b"), 200)

	keys := map[string]int{}
	for _, req := range r.api.Requests() {
		keys[req.IdempotencyKey]++
	}
	ka, kb := fulfillment.IdempotencyKey("evt_a/fulfillment"), fulfillment.IdempotencyKey("evt_b/fulfillment")
	if len(keys) != 2 || keys[ka] != 2 || keys[kb] != 1 {
		t.Fatalf("idempotency keys = %v, want %s twice and %s once", keys, ka, kb)
	}
	ids := map[string]bool{}
	for _, m := range r.smtp.Messages() {
		ids[m.MessageID] = true
	}
	ma, mb := mail.MessageID("evt_a/email.confirmation", "example.test"), mail.MessageID("evt_b/email.confirmation", "example.test")
	if len(ids) != 2 || !ids[ma] || !ids[mb] {
		t.Fatalf("Message-IDs = %v, want %s and %s", ids, ma, mb)
	}
	if ma == mail.MessageID("evt_a/email.receipt", "example.test") || ka == fulfillment.IdempotencyKey("evt_a/email.confirmation") {
		t.Error("different steps share a key")
	}
}

// TestStepPlannedElsewhereCannotRunHere: a step taken over by a process
// that cannot run it (no fulfillment API configured, as on a replica during
// a rolling deploy) is given back, not crashed on, and a process that can
// run it finishes it.
func TestStepPlannedElsewhereCannotRunHere(t *testing.T) {
	opts := webhooks.Options{Lease: deadWorkerLease, Backoff: 50 * time.Millisecond}
	r := newRig(t, opts)
	r.crashAfterCommit(t, "evt_moved")
	r.waitLeaseExpired(t, "evt_moved")

	bare := webhooks.NewProcessor(r.pool, kinds(r.smtp.Addr(), ""), webhooks.NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
	ran, failed, err := bare.RedriveOnce(context.Background(), 10)
	if err != nil || ran != 2 || failed != 1 {
		t.Fatalf("redriver without a fulfillment API: ran %d failed %d err %v, want 2 and 1", ran, failed, err)
	}
	st := r.step(t, "evt_moved/fulfillment")
	if st.Status != "in_progress" || !st.GivenBack || !strings.Contains(st.LastError, "FULFILLMENT_URL") {
		t.Fatalf("fulfillment step = %+v, want given back with the reason", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.step(t, "evt_moved/fulfillment").Status != "done" {
		if time.Now().After(deadline) {
			t.Fatal("the configured process never finished the step")
		}
		if _, _, err := r.proc.RedriveOnce(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(r.api.Requests()); n != 1 {
		t.Errorf("fulfillment calls = %d, want 1", n)
	}
}

// TestSenderHangsUp: a verified event is processed to the end even when the
// sender disconnects while its transaction waits (GitHub gives up after
// 10 s and never redelivers).
func TestSenderHangsUp(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	ctx := context.Background()
	lock, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	cctx, hangUp := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, r.url, strings.NewReader(`{"id":"evt_gone"}`))
	req.Header.Set("X-Test-Signature", "valid")
	sent := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		sent <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		_ = r.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivery never waited on the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	hangUp()
	if err := <-sent; err == nil {
		t.Fatal("the client did not hang up")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for r.orders(t) != 1 || len(r.api.Requests()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after the sender hung up: %d orders, %d fulfillment calls, want 1 and 1", r.orders(t), len(r.api.Requests()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCopyKeepsItsConnection: a copy of an event travels in one round trip
// like a new one, its writes skipped by receiver_claimed(), and the batch's
// implicit transaction ends cleanly, so the connection goes back to the pool
// instead of being closed (which a transaction left open would force).
func TestCopyKeepsItsConnection(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	ctx := context.Background()
	if res := r.proc.Process(ctx, testProvider{}, r.event("evt_once")); res.Outcome != webhooks.OutcomeProcessed {
		t.Fatalf("first delivery: %+v", res)
	}
	before := r.pool.Stat().NewConnsCount()
	for range 20 {
		if res := r.proc.Process(ctx, testProvider{}, r.event("evt_once")); res.Outcome != webhooks.OutcomeDuplicate {
			t.Fatalf("copy: %+v, want duplicate", res)
		}
	}
	if n := r.pool.Stat().NewConnsCount() - before; n != 0 {
		t.Errorf("20 copies opened %d new connections, want 0", n)
	}
	if n := r.orders(t); n != 1 {
		t.Errorf("orders = %d, want 1", n)
	}
}

// TestRedriverRunsInParallel: the redriver keeps REDRIVE_PARALLELISM steps
// running at once, never more, each under its own lease, and drains the
// whole backlog once they end.
func TestRedriverRunsInParallel(t *testing.T) {
	opts := webhooks.Options{Lease: time.Minute, RedriveParallelism: 4}
	r := newRig(t, opts)
	const events = 10
	for i := range events {
		r.crashAfterCommit(t, fmt.Sprintf("evt_backlog_%02d", i))
	}
	// The dead workers' leases have run out (given back, as after a failure).
	if _, err := r.pool.Exec(context.Background(), `UPDATE processed_events SET claimed_at = '-infinity' WHERE kind = 'step'`); err != nil {
		t.Fatal(err)
	}
	release := r.api.Hold()
	done := make(chan [3]int, 1)
	go func() {
		ran, failed, err := r.proc.RedriveOnce(context.Background(), 100)
		e := 0
		if err != nil {
			e = 1
		}
		done <- [3]int{ran, failed, e}
	}()
	r.api.WaitHeld(t, 4, 20*time.Second)
	// Four calls hold the four slots: for a while (well under the step
	// timeout, 15 s), no fifth call starts.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n := len(r.api.Requests()); n != 4 {
			t.Fatalf("fulfillment calls in flight: %d, want exactly the parallelism, 4", n)
		}
	}
	release()
	res := <-done
	if res != [3]int{2 * events, 0, 0} {
		t.Fatalf("redriver: ran %d, failed %d, errors %d; want %d steps run", res[0], res[1], res[2], 2*events)
	}
	if n := len(r.api.Requests()); n != events {
		t.Errorf("fulfillment calls = %d, want %d (one per event)", n, events)
	}
}
