package webhooks_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// objectProvider plans, for every event, the confirmation and the
// fulfillment call of one business object, named by the event's type: two
// events (or an event and another path) that act on the same object.
type objectProvider struct{}

func (objectProvider) Verify(http.Header, []byte, time.Time) (webhooks.Event, error) {
	panic("not delivered over HTTP")
}

func (objectProvider) Plan(ev *webhooks.Event, p *webhooks.Plan) error {
	c := mail.Step("email.confirmation", mail.Email{Template: "order_confirmation", To: "buyer@example.com"})
	c.Object = ev.Type
	f := fulfillment.Step("fulfillment")
	f.Payload = []byte(`{"order": {"id": 1, "source": "test", "external_id": "` + ev.Type + `", "amount_cents": 1000, "currency": "usd"}}`)
	f.Object = ev.Type
	p.Step(c)
	p.Step(f)
	return nil
}

func objectEvent(id, object string) webhooks.Event {
	return webhooks.Event{Source: "test", Key: id, ID: id, Type: object, Body: []byte(`{"id":"` + id + `"}`)}
}

// TestStepsOfAnObject: the steps of a business object (Step.Object) are
// planned once whichever event plans them first, and what they send
// outside derives from the object, not from the event: two events of one
// object make one email and one call, with the object's Message-ID and
// Idempotency-Key; another object has its own.
func TestStepsOfAnObject(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	ctx := context.Background()
	for _, ev := range []webhooks.Event{objectEvent("evt_1", "order:test:cs_1"), objectEvent("evt_2", "order:test:cs_1"),
		objectEvent("evt_1", "order:test:cs_1"), objectEvent("evt_3", "order:test:cs_2")} {
		if res := r.proc.Process(ctx, objectProvider{}, ev); res.Err != nil {
			t.Fatalf("%s: %s %v", ev.Key, res.Outcome, res.Err)
		}
	}
	calls := map[string]int{}
	for _, req := range r.api.Requests() {
		calls[req.IdempotencyKey]++
	}
	k1, k2 := fulfillment.IdempotencyKey("order:test:cs_1/fulfillment"), fulfillment.IdempotencyKey("order:test:cs_2/fulfillment")
	if len(calls) != 2 || calls[k1] != 1 || calls[k2] != 1 {
		t.Errorf("fulfillment calls by Idempotency-Key %v; want one of %s and one of %s", calls, k1, k2)
	}
	ids := map[string]int{}
	for _, m := range r.smtp.Messages() {
		ids[m.MessageID]++
	}
	m1 := mail.MessageID("order:test:cs_1/email.confirmation", "example.test")
	if len(ids) != 2 || ids[m1] != 1 {
		t.Errorf("emails by Message-ID %v; want one of %s and one of the other object's", ids, m1)
	}
	var steps int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE kind = 'step'`).Scan(&steps); err != nil || steps != 4 {
		t.Errorf("%d step rows (%v); want 4: two objects, two steps each", steps, err)
	}
	var owner string
	if err := r.pool.QueryRow(ctx, `SELECT parent_key FROM processed_events WHERE kind = 'step' AND step = 'fulfillment'
AND payload ->> 'step_object' = 'order:test:cs_1'`).Scan(&owner); err != nil || owner != "evt_1" {
		t.Errorf("the first object's call belongs to %q (%v); want evt_1, which planned it first", owner, err)
	}
	refs := webhooks.StepKinds{fulfillment.KindFulfillment: fulfillment.Kind{}}
	var payload []byte
	if err := r.pool.QueryRow(ctx, `SELECT payload FROM processed_events WHERE event_key = 'evt_3/fulfillment'`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if got := refs.Refs(fulfillment.KindFulfillment, "evt_3/fulfillment", payload); len(got) != 1 || got[0].Value != k2 {
		t.Errorf("operators see %v; want the Idempotency-Key %s", got, k2)
	}
}

// TestSuccessAnswerRecorded: what the other side answered a success with
// is kept with the attempt (Answered), as a failure's status is: the
// fulfillment API's 201, the SMTP relay's 250.
func TestSuccessAnswerRecorded(t *testing.T) {
	r := newRig(t, webhooks.Options{Lease: 5 * time.Minute})
	r.api.SetStatus(201)
	want(t, r.deliver(t, "evt_answered"), 200)
	got := map[string]int{}
	rows, err := r.pool.Query(context.Background(), `SELECT step_key, coalesce(status_code, 0) FROM step_attempts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var code int
		if err := rows.Scan(&k, &code); err != nil {
			t.Fatal(err)
		}
		got[k] = code
	}
	if got["evt_answered/fulfillment"] != 201 || got["evt_answered/email.confirmation"] != 250 {
		t.Errorf("answers recorded %v; want the API's 201 and the relay's 250", got)
	}
}
