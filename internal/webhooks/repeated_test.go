package webhooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestRepeatedName: a member name repeated in one object, however it is
// spelled, is found and named with the object it is in; the same name in
// two objects, and a body that is no JSON, are not its business.
func TestRepeatedName(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       string // the error's text; "" for none
	}{
		{"NoRepeat", `{"id":"evt_1","data":{"object":{"id":"cs_1","amount_total":1000}}}`, ""},
		{"SameNameInTwoObjects", `{"a":{"id":1},"b":{"id":1},"c":[{"id":1},{"id":1}]}`, ""},
		{"NotJSON", `{"id":`, ""},
		{"Empty", ``, ""},
		{"TopLevel", `{"id":"evt_1","data":{"object":{"customer_email":"a@example.com"}},"data":{"object":{"amount_total":1}}}`,
			`repeated member name "data" in the object at "/": the event is not acted on`},
		{"Nested", `{"id":"evt_1","data":{"object":{"amount_total":1000,"amount_total":1}}}`,
			`repeated member name "amount_total" in the object at "/data/object": the event is not acted on`},
		{"InAnArray", `{"lines":[{"id":"il_1"},{"id":"il_2","id":"il_3"}]}`,
			`repeated member name "id" in the object at "/lines/1": the event is not acted on`},
		{"EscapedSpelling", `{"email":"a@example.com","\u0065mail":"b@example.com"}`,
			`repeated member name "email" in the object at "/": the event is not acted on`},
		{"InvalidUTF8Elsewhere", "{\"n\":\"\xff\",\"n\":1}",
			`repeated member name "n" in the object at "/": the event is not acted on`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := webhooks.RepeatedName([]byte(c.body))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case c.want != "" && (err == nil || err.Error() != c.want || !errors.Is(err, webhooks.ErrRepeatedName)):
				t.Errorf("error %v, want %q wrapping ErrRepeatedName", err, c.want)
			}
		})
	}
}

// TestRepeatedNameParked: an event whose body repeats a member name is
// kept and parked with the reason, answered 200 parked, and never planned:
// no order, no step, no email, no call. A copy is answered parked, and an
// operator's replay parks it again instead of acting on it.
func TestRepeatedNameParked(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, webhooks.Options{})
	const id = "evt_repeated"
	body := `{"id":"` + id + `","email":"a@example.com","email":"b@example.com"}`
	parked := func(t *testing.T, a answer) {
		t.Helper()
		want(t, a, 200)
		if !strings.Contains(a.body, `"outcome":"parked"`) {
			t.Errorf("answered %s, want parked", a.body)
		}
		var status, lastError string
		var stored []byte
		if err := r.pool.QueryRow(ctx, `SELECT status, last_error, body FROM processed_events WHERE event_key = $1`, id).
			Scan(&status, &lastError, &stored); err != nil {
			t.Fatal(err)
		}
		if status != "parked" || !strings.HasPrefix(lastError, `repeated member name "email"`) || string(stored) != body {
			t.Errorf("claim %s, %q, body %q: want parked with the reason and the body", status, lastError, stored)
		}
		if n := r.orders(t); n != 0 {
			t.Errorf("%d orders, want none", n)
		}
		var steps int
		_ = r.pool.QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE kind = 'step'`).Scan(&steps)
		if steps+len(r.smtp.Messages())+len(r.api.Requests()) != 0 {
			t.Errorf("%d steps, %d emails, %d calls: want none", steps, len(r.smtp.Messages()), len(r.api.Requests()))
		}
	}
	parked(t, r.post(t, id, body))
	t.Run("Copy", func(t *testing.T) { parked(t, r.post(t, id, body)) })
	t.Run("Resent", func(t *testing.T) {
		parked(t, r.post(t, id, strings.Replace(body, `"email":"a`, `"resent":true,"email":"a`, 1)))
	})
	t.Run("Replay", func(t *testing.T) {
		ev, err := webhooks.LoadEvent(ctx, r.pool, id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.proc.Replay(ctx, testProvider{}, ev)
		if err != nil || res.Outcome != webhooks.OutcomeParked {
			t.Fatalf("replay: %+v, %v; want parked", res, err)
		}
		parked(t, answer{status: 200, body: `{"outcome":"parked"}`})
	})
}
