package conformance_test

// A fork, from a test package: a provider (fixtureSource) and a step kind
// ("webhook.out") that no file of the receiver knows, registered the way a
// fork registers its own (forkList stands for the registry with the fork's
// line in internal/providers, server.WithStepKind for the kind), and run through
// the real router and processor to done, then through the conformance
// suite. No core file is edited for them.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixtureSource names the fork's provider: a name no real provider takes,
// so that a fork adding one (an "acme", say) does not collide with it.
// Lower-case letters and underscores, as in a route, a metric label and
// a column.
const fixtureSource = "zz_fork_fixture"

// fixtureSpec is the fork's provider: HMAC-SHA256 of the body, hex, in
// Fixture-Signature; its events are {"id", "type", "order"}.
var fixtureSpec = webhooks.Spec{
	Source:           fixtureSource,
	Secret:           webhooks.Var{Name: "ZZ_FORK_FIXTURE_WEBHOOK_SECRET", Doc: "the fork fixture's signing secret", List: true, Secret: true},
	SignatureHeaders: []string{"Fixture-Signature"},
	Types:            []string{"order.paid"},
	Retention:        24 * time.Hour,
	OrderSources:     []string{fixtureSource},
	New:              func(s webhooks.Settings) (webhooks.Provider, error) { return fixture{secrets: s.Secrets}, nil },
	Sign: func(in webhooks.SignInput) http.Header {
		return http.Header{"Content-Type": {"application/json"}, "Fixture-Signature": {hex.EncodeToString(fixtureMAC(in.Body, in.Secret))}}
	},
}

func fixtureMAC(body []byte, secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return m.Sum(nil)
}

type fixture struct{ secrets []string }

type fixtureEvent struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Order struct {
		ID       string `json:"id"`
		Cents    int64  `json:"cents"`
		Currency string `json:"currency"`
		Email    string `json:"email"`
	} `json:"order"`
}

func (p fixture) Verify(h http.Header, body []byte, _ time.Time) (webhooks.Event, error) {
	sig, err := hex.DecodeString(h.Get("Fixture-Signature"))
	if err != nil || len(sig) != sha256.Size {
		return webhooks.Event{}, webhooks.Reject("invalid_header", errors.New("Fixture-Signature is not 64 hex digits"))
	}
	matched := webhooks.Signatures{sig}.Match(p.secrets, func(mac hash.Hash) { mac.Write(body) })
	if matched < 0 {
		return webhooks.Event{}, webhooks.Reject("no_valid_signature", errors.New("no secret signs the body"))
	}
	var ev fixtureEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.Type == "" {
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("no id or type"))
	}
	return webhooks.Event{Source: fixtureSource, Key: ev.ID, ID: ev.ID, Type: ev.Type, Body: body, Payload: &ev, SecretIndex: matched}, nil
}

func (fixture) Plan(ev *webhooks.Event, p *webhooks.Plan) error {
	e, ok := ev.Payload.(*fixtureEvent)
	if !ok { // a stored event, replayed
		e = new(fixtureEvent)
		if err := json.Unmarshal(ev.Body, e); err != nil {
			return webhooks.Unprocessable("%s: %v", ev.ID, err)
		}
	}
	if ev.Type != "order.paid" {
		return webhooks.ErrUnhandled
	}
	o := orders.Order{Source: fixtureSource, ProviderEventID: ev.ID, ExternalID: e.Order.ID, Status: orders.StatusPaid,
		AmountCents: e.Order.Cents, Currency: e.Order.Currency, CustomerEmail: e.Order.Email}
	orders.Create(p, o, orders.Position{})
	cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusPaid)
	p.StepIf(mail.Step("email.confirmation", mail.Email{Template: "order_confirmation"}), cond, args...)
	p.StepIf(webhooks.Step{Name: "webhook.out", Kind: "webhook.out", Payload: json.RawMessage(`{"url":"https://partner.example/hook"}`)},
		cond, args...)
	return nil
}

// outbox is the fork's step kind: it records each call by step key, with
// the order its condition put in the payload.
type outbox struct {
	mu    sync.Mutex
	calls map[string][]string // step key → order external ids, one per call
}

func (*outbox) Prepare(p json.RawMessage) (json.RawMessage, error) { return p, nil }
func (*outbox) Unconfigured() string                               { return "" }
func (*outbox) Unavailable(json.RawMessage) string                 { return "" }

// Refs says what each call sends that operators can look for downstream:
// a kind of the fork's own shows in `events show` and the console like the
// receiver's own kinds.
func (*outbox) Refs(key string, _ json.RawMessage) []webhooks.Ref {
	return []webhooks.Ref{{Name: "X-Outbox-Id", Value: "out-" + key}}
}

func (k *outbox) Run(_ context.Context, key string, payload json.RawMessage) error {
	var p struct {
		URL   string        `json:"url"`
		Order *orders.Order `json:"order"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Order == nil || p.URL == "" {
		return errors.New("webhook.out: payload without url or order")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[key] = append(k.calls[key], p.Order.ExternalID)
	return nil
}

func (k *outbox) all() map[string][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string][]string{}
	for key, c := range k.calls {
		out[key] = append([]string(nil), c...)
	}
	return out
}

// forkList is the registry with the fork's line added.
func forkList() []registry.Provider {
	return append(providers.List(), registry.Provider{Spec: fixtureSpec})
}

func forkSuite(out *outbox) cf.Suite {
	return cf.Suite{
		Spec:      fixtureSpec,
		Providers: forkList(),
		Options:   []rt.Option{rt.WithServer(server.WithStepKind("webhook.out", out))},
		View:      []string{`SELECT format('%s %s %s %s %s', source, external_id, status, amount_cents, currency) FROM orders ORDER BY 1`},
		Events: map[string]cf.Event{
			"paid":   {Body: []byte(`{"id":"fx_evt_1","type":"order.paid","order":{"id":"A-1","cents":1200,"currency":"eur","email":"buyer@fixture.test"}}`)},
			"paid2":  {Body: []byte(`{"id":"fx_evt_2","type":"order.paid","order":{"id":"A-2","cents":500,"currency":"eur"}}`)},
			"viewed": {Body: []byte(`{"id":"fx_evt_3","type":"order.viewed","order":{"id":"A-1"}}`)},
		},
		Verify: []cf.Request{
			{Name: "ErrGarbageSignature", Edit: func(h http.Header, _ []byte) { h.Set("Fixture-Signature", "zz") }, Reason: "invalid_header"},
		},
		Cases: []cf.Case{
			{Name: "Paid", Deliver: "paid", Want: []string{fixtureSource + " A-1 paid 1200 eur"},
				Steps: []string{"email.confirmation=done", "webhook.out=done"}, Emails: []cf.Mail{{To: "buyer@fixture.test", Contains: "is confirmed"}}},
			{Name: "PaidWithoutEmail", Deliver: "paid2", Want: []string{fixtureSource + " A-2 paid 500 eur"},
				Steps: []string{"email.confirmation=skipped", "webhook.out=done"}},
			{Name: "Unhandled", Deliver: "viewed", Outcome: webhooks.OutcomeIgnored},
		},
		History:   []string{"paid", "paid2", "viewed"},
		Sequences: map[string][]string{"TwoOrders": {"paid", "paid2"}},
	}
}

// TestForkDelivery runs one delivery of the fork's provider through the
// real router to done, its own step kind included, and a redelivery that
// changes nothing.
func TestForkDelivery(t *testing.T) {
	out := &outbox{calls: map[string][]string{}}
	s := forkSuite(out)
	r := rt.New(t, s.Providers, s.Options...)
	if res := s.DeliverOK(t, r, "paid"); cf.Outcome(res) != webhooks.OutcomeProcessed {
		t.Fatalf("outcome %s", res.Body)
	}
	if res := s.DeliverOK(t, r, "paid"); cf.Outcome(res) != webhooks.OutcomeDuplicate {
		t.Fatalf("redelivery outcome %s", res.Body)
	}
	if got := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'fx_evt_1%' AND status = 'done'`); got != 3 {
		t.Errorf("done claims of the event = %d, want 3 (the event, its email, its webhook.out)", got)
	}
	calls := out.all()
	if len(calls) != 1 || len(calls["fx_evt_1/webhook.out"]) != 1 || calls["fx_evt_1/webhook.out"][0] != "A-1" {
		t.Errorf("webhook.out calls = %v, want one for A-1 under fx_evt_1/webhook.out", calls)
	}

	// What operators see of each step: its kind says what it sent.
	d, err := ops.Show(context.Background(), r.Pool, "fx_evt_1")
	if err != nil {
		t.Fatal(err)
	}
	d.AddRefs(r.Server.Processor().Kinds())
	refs := map[string]string{}
	for _, c := range d.Claims {
		for _, ref := range c.Refs {
			refs[c.Step+" "+ref.Name] = ref.Value
		}
	}
	want := map[string]string{
		"webhook.out X-Outbox-Id":       "out-fx_evt_1/webhook.out",
		"email.confirmation Message-ID": mail.MessageID("fx_evt_1/email.confirmation", "example.test"),
	}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("refs of the event's steps (-want +got):\n%s", diff)
	}
}

// TestForkConformance runs the conformance suite on the fork: what a fork
// copies from a provider's test file.
func TestForkConformance(t *testing.T) {
	cf.Run(t, forkSuite(&outbox{calls: map[string][]string{}}))
}
