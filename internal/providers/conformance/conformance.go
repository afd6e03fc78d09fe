// Package conformance is the provider conformance suite: what every
// webhook provider of the receiver must do, run through the real router,
// processor, database, SMTP server and fulfillment API of receivertest.
//
// A provider's test describes itself once, as a Suite (its Spec, its named
// deliveries, the effect each must have), and calls Run:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, suite) }
//
// Run's subtests are the same for every provider:
//
//   - Verify: a signed delivery is accepted, also with the previous secret;
//     a missing signature, a wrong secret, a tampered body and the
//     provider's own bad requests are refused 400 with their reason, and
//     nothing is written for them.
//   - Handled: each Case's deliveries leave exactly the rows, steps, emails
//     and fulfillment calls it lists.
//   - DuplicateDelivery: the History delivered five times leaves what one
//     delivery leaves: the same rows, claims, emails and calls.
//   - ConcurrentDelivery: each event of the History sent 50 times at once
//     has one effect, and every answer is 200 or a 503 lease conflict.
//   - ReplayWithEmptiedClaims: with processed_events truncated, the History
//     delivered again changes nothing and sends nothing.
//   - OutOfOrder: every permutation of each Sequence ends in the state of
//     the sequence in order (with -short, as make check runs it: the
//     sequence reversed and each rotation of it, the orders most likely to
//     break a rule; make test tries them all).
//   - RepeatedMemberName: the signed event with its first member repeated
//     at the end (the same name and value) is answered 200 parked and kept,
//     body and reason, and nothing is written or sent for it.
//   - SharedSamples: payloads captured by other projects (../shared/samples,
//     when present) are acknowledged, and those listed do what they must.
//   - Example: two deliveries made by the Spec's Example (what cmd/loadgen
//     sends) are processed, each for the first time.
//
// Every delivery is signed by the Spec's Sign, with the id Suite.ID gives
// it, and the suite fails at once, naming the trap, when Sign returns a
// header name that is not canonical or Suite.Header replaces a header
// Sign returned (see docs/adding-an-integration.md, "Traps").
//
// A fork copies one provider's test file and rewrites its table.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/json/jsontext"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Suite describes a provider to the conformance tests. Events are named:
// a name is read as testdata/<name> of the provider's package unless
// Events defines it otherwise.
type Suite struct {
	Spec webhooks.Spec
	// Providers are the providers of every receiver the suite starts,
	// Spec's among them: the registry's (providers.List()), or a fork's
	// test's own list (the registry's and its line).
	Providers []registry.Provider
	// Options are passed to every receiver the suite starts.
	Options []rt.Option
	// Events defines the named deliveries that are not a testdata file as
	// it is (a fixture with replacements, or a body built in code).
	Events map[string]Event
	// Header returns the provider's own headers of a delivery of the named
	// event, beside those Spec.Sign returns (GitHub's event type, delivery
	// GUID and hook id); nil when there are none. A redelivery of a name
	// carries the same headers. It may replace Sign's Content-Type (a form
	// body), no other header of Sign's: what the sender signs comes from
	// Sign.
	Header func(name string, body []byte) http.Header
	// ID returns the sender's id of a delivery of the named event, which
	// Spec.Sign signs for a sender that signs one (Standard Webhooks'
	// webhook-id): the same on every delivery of a name. Nil: the id made
	// from the body (webhooks.SignInput.MessageID). Two names of one body
	// with two ids are one event sent as two messages (Polar's one event
	// sent to two endpoints).
	ID func(name string, body []byte) string
	// View lists the business state as text rows: SQL queries returning one
	// text column each. Case.Want and Sample.Want are compared with it; the
	// state compared by the other subtests is r.Snapshot and View together.
	// Without View, Want is compared with r.Snapshot.
	View []string

	// Verify lists the provider's own bad (or unusual but genuine)
	// requests, beside the suite's missing signature, wrong secret,
	// tampered body and previous secret. Its signed event is VerifyEvent,
	// or History[0].
	Verify      []Request
	VerifyEvent string

	// Cases are the handled events and their effects.
	Cases []Case
	// History is one coherent run of events that does something of
	// everything the provider handles: delivered 1 and 5 times, replayed
	// past emptied claims.
	History []string
	// Concurrent are the events each sent 50 times at once; nil: History.
	Concurrent []string
	// Sequences are histories whose every order must end in the same
	// state, by name.
	Sequences map[string][]string
	// Samples, when set, are the team's shared samples of the provider.
	Samples *Samples
}

// Event is a named delivery: a testdata file with replacements (old, new,
// old, new, …), or a body.
type Event struct {
	Fixture string
	Replace []string
	Body    []byte
}

// Request is one request of the Verify subtest: Body (the suite's signed
// event when nil) posted with the headers of a delivery of Signed (Body
// when nil) signed now with the test secret, then changed by Edit, which
// is given what was signed.
type Request struct {
	Name   string
	Body   []byte
	Signed []byte
	Edit   func(h http.Header, signed []byte)
	Status int    // the answer expected: 400 when 0
	Reason string // the rejection's reason, when refused
}

// Case is a handled event and its effect: the Given events are delivered,
// then Deliver; afterwards, Want are the rows of the View, Steps the steps
// of Deliver's event ("<step>=<status>", by name), Emails every email sent
// and Calls every fulfillment call made ("<source> <external id> <amount>
// <currency> <email or ->"). Empty means none.
type Case struct {
	Name    string
	Options []rt.Option // beside Suite.Options
	Given   []string
	Deliver string
	Outcome webhooks.Outcome // what Deliver is answered: processed when ""
	Want    []string
	Steps   []string
	Emails  []Mail
	Calls   []string
	// Check, when set, checks what else the case must show.
	Check func(t *testing.T, r *rt.Receiver, res rt.Response)
}

// Mail is an email expected: its recipient and a piece of its text.
type Mail struct {
	To       string
	Contains string
}

// Samples are the shared samples of a provider, each sent signed to a
// receiver of its own.
type Samples struct {
	Provider string // the folder: ../shared/samples/<Provider>
	Glob     string // the files, "*.json" when ""
	// Header returns a sample's headers beside its signature (GitHub's
	// event type, from the file name). For a delivery built by Prime, the
	// name is the sample's with "#primer" appended.
	Header func(name string, body []byte) http.Header
	// Expect is what a sample must do, by file name. A sample not listed
	// must be acknowledged, and its effect is logged.
	Expect map[string]Sample
}

// Sample is what a shared sample must do, as a Case.
type Sample struct {
	// Prime builds from the sample a delivery to make first (the purchase
	// a cancellation ends): never a copied file.
	Prime   func(tb testing.TB, body []byte) []byte
	Outcome webhooks.Outcome // processed when ""
	Want    []string
	Emails  []Mail
	Calls   []string
}

// Run runs every subtest of the suite.
func Run(t *testing.T, s Suite) {
	t.Run("Verify", s.verify)
	t.Run("Handled", s.handled)
	t.Run("DuplicateDelivery", s.duplicateDelivery)
	t.Run("ConcurrentDelivery", s.concurrentDelivery)
	t.Run("ReplayWithEmptiedClaims", s.replayWithEmptiedClaims)
	t.Run("OutOfOrder", s.outOfOrder)
	t.Run("RepeatedMemberName", s.repeatedMemberName)
	t.Run("SharedSamples", s.sharedSamples)
	t.Run("Example", s.example)
}

func (s *Suite) verify(t *testing.T) {
	t.Parallel()
	r := s.receiver(t)
	name := s.VerifyEvent
	if name == "" {
		name = s.History[0]
	}
	body := s.Body(t, name)
	signedWith := func(secret string, b []byte) http.Header {
		return s.sign(t, s.id(name, body), b, secret, time.Now(), s.header(name, body))
	}
	post := func(t *testing.T, q Request) {
		b := q.Body
		if b == nil {
			b = body
		}
		signed := q.Signed
		if signed == nil {
			signed = b
		}
		h := signedWith(rt.Secret(s.Spec), signed)
		if q.Edit != nil {
			q.Edit(h, signed)
		}
		res := r.Post(t, s.Spec.Route(), h, b)
		want := q.Status
		if want == 0 {
			want = http.StatusBadRequest
		}
		if res.Status != want || (q.Reason != "" && !strings.Contains(res.Body, `"reason":"`+q.Reason+`"`)) {
			t.Fatalf("status %d %s; want %d with reason %q", res.Status, strings.TrimSpace(res.Body), want, q.Reason)
		}
	}
	unsigned := func(h http.Header, _ []byte) {
		for _, k := range s.Spec.SignatureHeaders {
			h.Del(k)
		}
	}
	refused := []Request{
		{Name: "ErrMissingSignature", Edit: unsigned, Reason: "missing_signature"},
		{Name: "ErrWrongSecret", Edit: func(h http.Header, _ []byte) {
			for k, v := range signedWith("wrong-"+rt.Secret(s.Spec), body) {
				h[k] = v
			}
		}, Reason: "no_valid_signature"},
		{Name: "ErrTamperedBody", Body: append(bytes.Clone(body), ' '), Signed: body, Reason: "no_valid_signature"},
	}
	var accepted []Request
	for _, q := range s.Verify {
		if q.Status/100 == 2 {
			accepted = append(accepted, q)
		} else {
			refused = append(refused, q)
		}
	}
	for _, q := range refused {
		t.Run(q.Name, func(t *testing.T) { post(t, q) })
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events`); n != 0 {
		t.Errorf("%d claims written for refused requests", n)
	}
	if st := s.state(t, r); len(st) != 0 {
		t.Errorf("refused requests wrote %v", st)
	}
	if len(r.SMTP.Messages())+len(r.API.Requests()) != 0 {
		t.Errorf("refused requests sent %d emails and %d calls", len(r.SMTP.Messages()), len(r.API.Requests()))
	}
	t.Run("OK", func(t *testing.T) { post(t, Request{Status: http.StatusOK}) })
	t.Run("PreviousSecret", func(t *testing.T) {
		post(t, Request{Status: http.StatusOK, Edit: func(h http.Header, _ []byte) {
			for k, v := range signedWith(rt.OldSecret(s.Spec), body) {
				h[k] = v
			}
		}})
	})
	for _, q := range accepted {
		t.Run(q.Name, func(t *testing.T) { post(t, q) })
	}
}

func (s *Suite) handled(t *testing.T) {
	for _, c := range s.Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			r := s.receiver(t, c.Options...)
			for _, g := range c.Given {
				s.DeliverOK(t, r, g)
			}
			res := s.DeliverOK(t, r, c.Deliver)
			s.expect(t, r, res, c.Outcome, c.Want, c.Emails, c.Calls)
			steps := r.Steps(t, s.eventKey(t, r, res))
			if diff := cmp.Diff(c.Steps, steps, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("steps of %s (-want +got):\n%s", c.Deliver, diff)
			}
			if c.Check != nil {
				c.Check(t, r, res)
			}
		})
	}
}

// expect checks a delivery's answer and the receiver's rows, emails and
// calls.
func (s *Suite) expect(t *testing.T, r *rt.Receiver, res rt.Response, outcome webhooks.Outcome, want []string, mails []Mail, calls []string) {
	t.Helper()
	if outcome == "" {
		outcome = webhooks.OutcomeProcessed
	}
	if got := Outcome(res); got != outcome {
		t.Errorf("outcome %q, want %q", got, outcome)
	}
	if diff := cmp.Diff(want, s.view(t, r), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	msgs := r.SMTP.Messages()
	if len(msgs) != len(mails) {
		got := make([]string, len(msgs))
		for i, m := range msgs {
			got[i] = strings.Join(m.To, ",")
		}
		t.Errorf("emails to %v, want %d", got, len(mails))
	}
	for i, m := range mails[:min(len(mails), len(msgs))] {
		if to := strings.Join(msgs[i].To, ","); to != m.To {
			t.Errorf("email %d to %s, want %s", i, to, m.To)
		}
		if !strings.Contains(string(msgs[i].Data), m.Contains) {
			t.Errorf("email %d does not contain %q:\n%s", i, m.Contains, msgs[i].Data)
		}
	}
	if diff := cmp.Diff(calls, Calls(r), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("fulfillment calls (-want +got):\n%s", diff)
	}
	for _, q := range r.API.Requests() {
		if q.SignatureError != "" {
			t.Errorf("fulfillment call %s: the API refused its signature: %s", q.IdempotencyKey, q.SignatureError)
		}
	}
}

func (s *Suite) duplicateDelivery(t *testing.T) {
	t.Parallel()
	once, many := s.receiver(t), s.receiver(t)
	for _, name := range s.History {
		s.DeliverOK(t, once, name)
		s.DeliverOK(t, many, name)
		for range 4 {
			if res := s.DeliverOK(t, many, name); Outcome(res) != webhooks.OutcomeDuplicate {
				t.Errorf("%s delivered again: outcome %q, want duplicate", name, Outcome(res))
			}
		}
	}
	if len(s.state(t, once)) == 0 {
		t.Fatal("the History writes nothing: it cannot show duplicates have no effect")
	}
	s.same(t, "once", once, "five times", many)
}

func (s *Suite) concurrentDelivery(t *testing.T) {
	t.Parallel()
	names := s.Concurrent
	if names == nil {
		names = s.History
	}
	ref, r := s.receiver(t), s.receiver(t)
	for _, name := range names {
		s.DeliverOK(t, ref, name)
		body := s.Body(t, name)
		h := s.signed(t, name, body)
		statuses := make([]rt.Response, 50)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() {
				<-start
				statuses[i] = r.Post(t, s.Spec.Route(), h, body)
			})
		}
		close(start)
		wg.Wait()
		ok, busy := 0, 0
		for i, res := range statuses {
			switch {
			case res.Status == http.StatusOK:
				ok++
			case res.Status == http.StatusServiceUnavailable && Outcome(res) == webhooks.OutcomeLeaseConflict && res.Header.Get("Retry-After") != "":
				busy++
			default:
				t.Errorf("%s, request %d: status %d %s, want 200 or a 503 lease conflict", name, i, res.Status, res.Body)
			}
		}
		if ok == 0 {
			t.Errorf("%s: no request of 50 answered 200", name)
		}
		t.Logf("%s: 50 at once: %d answered 200, %d a 503 lease conflict", name, ok, busy)
	}
	s.same(t, "one at a time", ref, "50 at once", r)
}

func (s *Suite) replayWithEmptiedClaims(t *testing.T) {
	t.Parallel()
	r := s.receiver(t)
	for _, name := range s.History {
		s.DeliverOK(t, r, name)
	}
	before := s.state(t, r)
	emails, calls := len(r.SMTP.Messages()), len(r.API.Requests())
	if _, err := r.Pool.Exec(context.Background(), `TRUNCATE processed_events`); err != nil {
		t.Fatal(err)
	}
	for _, name := range s.History {
		s.DeliverOK(t, r, name)
	}
	if diff := cmp.Diff(before, s.state(t, r)); diff != "" {
		t.Errorf("the replay changed the state (-before +after):\n%s", diff)
	}
	if e, c := len(r.SMTP.Messages())-emails, len(r.API.Requests())-calls; e != 0 || c != 0 {
		t.Errorf("the replay sent %d emails and made %d fulfillment calls", e, c)
	}
}

func (s *Suite) outOfOrder(t *testing.T) {
	names := make([]string, 0, len(s.Sequences))
	for n := range s.Sequences {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		seq := s.Sequences[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run := func(order []string) []string {
				r := s.receiver(t)
				for _, n := range order {
					s.DeliverOK(t, r, n)
				}
				return s.converged(t, r)
			}
			want := run(seq)
			orders := Permutations(seq)[1:]
			if testing.Short() {
				orders = fewOrders(seq)
			}
			for _, p := range orders {
				if diff := cmp.Diff(want, run(p)); diff != "" {
					t.Errorf("%v diverges from %v (-in order +this order):\n%s", p, seq, diff)
				}
			}
		})
	}
}

func (s *Suite) repeatedMemberName(t *testing.T) {
	t.Parallel()
	name := s.VerifyEvent
	if name == "" {
		name = s.History[0]
	}
	body := s.Body(t, name)
	// The first member, repeated as the last: the same name and value, so
	// that whatever a decoder keeps, the event reads the same; it is
	// parked all the same.
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		t.Fatalf("%s is not a JSON object: %v", name, err)
	}
	start := dec.InputOffset()
	if _, err := dec.ReadToken(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := dec.ReadValue(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	member := bytes.TrimLeft(body[start:dec.InputOffset()], " \t\r\n")
	end := bytes.LastIndexByte(body, '}')
	repeated := append(append(bytes.Clone(body[:end]), ','), member...)
	repeated = append(repeated, body[end:]...)

	r := s.receiver(t)
	res := r.Post(t, s.Spec.Route(), rt.Signed(s.Spec, repeated, s.header(name, repeated)), repeated)
	if res.Status != http.StatusOK || Outcome(res) != webhooks.OutcomeParked {
		t.Fatalf("status %d %s, want 200 parked", res.Status, strings.TrimSpace(res.Body))
	}
	var status, lastError string
	var stored []byte
	err := r.Pool.QueryRow(context.Background(), `
SELECT status, coalesce(last_error, ''), body FROM processed_events WHERE kind = 'event' AND source = $1`, s.Spec.Source).
		Scan(&status, &lastError, &stored)
	if err != nil {
		t.Fatalf("the event's claim: %v", err)
	}
	if status != string(webhooks.ClaimParked) || !strings.HasPrefix(lastError, "repeated member name") || len(stored) == 0 {
		t.Errorf("claim %s with error %q and a body of %d bytes; want parked, a repeated member name, the body kept",
			status, lastError, len(stored))
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'step'`); n != 0 {
		t.Errorf("%d steps planned for it", n)
	}
	if st := s.state(t, r); len(st) != 0 {
		t.Errorf("it wrote %v", st)
	}
	if len(r.SMTP.Messages())+len(r.API.Requests()) != 0 {
		t.Errorf("it sent %d emails and %d calls", len(r.SMTP.Messages()), len(r.API.Requests()))
	}
	// A copy is answered as the event is: parked.
	res = r.Post(t, s.Spec.Route(), rt.Signed(s.Spec, repeated, s.header(name, repeated)), repeated)
	if res.Status != http.StatusOK || Outcome(res) != webhooks.OutcomeParked {
		t.Errorf("the same delivery again: status %d %s, want 200 parked", res.Status, strings.TrimSpace(res.Body))
	}
}

func (s *Suite) sharedSamples(t *testing.T) {
	if s.Samples == nil {
		t.Skip("the provider has no shared samples")
	}
	sm := s.Samples
	dir := rt.SharedSamples(t, sm.Provider)
	glob := sm.Glob
	if glob == "" {
		glob = "*.json"
	}
	files, _ := filepath.Glob(filepath.Join(dir, glob))
	if len(files) == 0 {
		t.Skipf("no samples in %s", dir)
	}
	header := func(name string, body []byte) http.Header {
		if sm.Header == nil {
			return nil
		}
		return sm.Header(name, body)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, known := sm.Expect[name]
			r := s.receiver(t)
			if want.Prime != nil {
				primer := want.Prime(t, body)
				h := s.sign(t, "", primer, rt.Secret(s.Spec), time.Now(), header(name+"#primer", primer))
				if res := r.Post(t, s.Spec.Route(), h, primer); res.Status != http.StatusOK {
					t.Fatalf("primer: status %d %s", res.Status, res.Body)
				}
			}
			res := r.Post(t, s.Spec.Route(), s.sign(t, "", body, rt.Secret(s.Spec), time.Now(), header(name, body)), body)
			if res.Status != http.StatusOK {
				t.Fatalf("status %d %s, want 200", res.Status, res.Body)
			}
			if known {
				s.expect(t, r, res, want.Outcome, want.Want, want.Emails, want.Calls)
			}
			t.Logf("%s -> %s; rows %q; steps %v; %d emails, fulfillment calls %q", name, Outcome(res),
				s.view(t, r), r.Steps(t, s.eventKey(t, r, res)), len(r.SMTP.Messages()), Calls(r))
		})
	}
}

func (s *Suite) example(t *testing.T) {
	if s.Spec.Example == nil {
		t.Skip("the Spec has no Example")
	}
	t.Parallel()
	r := s.receiver(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 2 {
		ex := s.Spec.Example(rnd, time.Now())
		for k := range ex.Header {
			if ck := http.CanonicalHeaderKey(k); k != ck {
				t.Fatalf("Example's header name %q is not canonical (%q)", k, ck)
			}
		}
		h := s.sign(t, ex.ID, ex.Body, rt.Secret(s.Spec), time.Now(), ex.Header)
		res := r.Post(t, s.Spec.Route(), h, ex.Body)
		if res.Status != http.StatusOK || Outcome(res) != webhooks.OutcomeProcessed {
			t.Fatalf("example %d (%s): status %d %s, want 200 processed\n%s", i, ex.ID, res.Status, res.Body, ex.Body)
		}
		if res := r.Post(t, s.Spec.Route(), s.sign(t, ex.ID, ex.Body, rt.Secret(s.Spec), time.Now(), ex.Header), ex.Body); Outcome(res) != webhooks.OutcomeDuplicate {
			t.Errorf("example %d sent again: status %d %s, want 200 duplicate", i, res.Status, res.Body)
		}
	}
	t.Logf("two examples processed: %q; %d emails, fulfillment calls %q", s.view(t, r), len(r.SMTP.Messages()), Calls(r))
}

// receiver starts a receiver of the suite's providers with its options
// and opts.
func (s *Suite) receiver(t testing.TB, opts ...rt.Option) *rt.Receiver {
	t.Helper()
	if !slices.ContainsFunc(s.Providers, func(p registry.Provider) bool { return p.Spec.Source == s.Spec.Source }) {
		t.Fatalf("conformance: Suite.Providers does not list %s: give the suite the registry's list (providers.List()), "+
			"which has its line", s.Spec.Source)
	}
	if check := s.Spec.Secret.Check; check != nil {
		for _, secret := range []string{rt.Secret(s.Spec), rt.OldSecret(s.Spec)} {
			if err := check(secret); err != nil {
				t.Fatalf("conformance: %s's Check refuses the test secret %q (%v), and so would every test receiver's start-up: "+
					"a secret whose text has a form says how its development and test values are written, with Secret.Dev "+
					"(docs/adding-an-integration.md, \"Traps\")", s.Spec.Secret.Name, secret, err)
			}
		}
	}
	return rt.New(t, s.Providers, append(slices.Clip(s.Options), opts...)...)
}

// Body returns the body of the named event.
func (s *Suite) Body(tb testing.TB, name string) []byte {
	tb.Helper()
	ev, ok := s.Events[name]
	switch {
	case !ok:
		return rt.Fixture(tb, name)
	case ev.Body != nil:
		return ev.Body
	}
	return rt.Fixture(tb, ev.Fixture, ev.Replace...)
}

func (s *Suite) header(name string, body []byte) http.Header {
	if s.Header == nil {
		return nil
	}
	return s.Header(name, body)
}

// id is the sender's id of a delivery of the named event: Suite.ID's, or
// "" (Sign makes one from the body).
func (s *Suite) id(name string, body []byte) string {
	if s.ID == nil {
		return ""
	}
	return s.ID(name, body)
}

// signed is the headers of a delivery of the named event's body, signed
// now with the test secret.
func (s *Suite) signed(tb testing.TB, name string, body []byte) http.Header {
	tb.Helper()
	return s.sign(tb, s.id(name, body), body, rt.Secret(s.Spec), time.Now(), s.header(name, body))
}

// sign is Spec.Sign's headers of body signed with secret at at under the
// sender's id, with extra headers added. It fails the test on the two
// traps a provider's Sign can fall in (docs/adding-an-integration.md,
// "Traps"): a header name that is not canonical, which the tests'
// h.Del(name) and h.Set(name, …) would miss (leaving a signature in place
// that the test believes removed), and an extra header replacing one Sign
// returned, which would be sent unsigned (a webhook-id given by Header
// instead of ID).
func (s *Suite) sign(tb testing.TB, id string, body []byte, secret string, at time.Time, extra http.Header) http.Header {
	tb.Helper()
	if s.Spec.Sign == nil {
		tb.Fatalf("%s: the Spec has no Sign: the suite cannot make deliveries", s.Spec.Source)
	}
	h := s.Spec.Sign(webhooks.SignInput{Body: body, Secret: secret, At: at, ID: id})
	for k := range h {
		if ck := http.CanonicalHeaderKey(k); k != ck {
			tb.Fatalf("%s: Spec.Sign returned the header name %q, not its canonical form %q: http.Header's Get, Set "+
				"and Del look for the canonical name only, so a test's h.Del(%q) would leave the signature in place. "+
				"Build Sign's header with h.Set, or write the key as %q (docs/adding-an-integration.md, Traps)",
				s.Spec.Source, k, ck, k, ck)
		}
	}
	for k, v := range extra {
		ck := http.CanonicalHeaderKey(k)
		if _, ok := h[ck]; ok && ck != "Content-Type" {
			tb.Fatalf("%s: the suite's Header replaces %s, which Spec.Sign returned: a header the sender signs must come "+
				"from Sign (an id it signs, from Suite.ID), or the delivery is sent with a value nobody signed "+
				"(docs/adding-an-integration.md, Traps)", s.Spec.Source, ck)
		}
		h[ck] = v
	}
	return h
}

// Deliver posts the named event to r, signed now.
func (s *Suite) Deliver(tb testing.TB, r *rt.Receiver, name string) rt.Response {
	tb.Helper()
	body := s.Body(tb, name)
	return r.Post(tb, s.Spec.Route(), s.signed(tb, name, body), body)
}

// DeliverOK delivers the named event and fails the test unless it is
// answered 200.
func (s *Suite) DeliverOK(tb testing.TB, r *rt.Receiver, name string) rt.Response {
	tb.Helper()
	res := s.Deliver(tb, r, name)
	if res.Status != http.StatusOK {
		tb.Fatalf("%s: status %d %s, want 200", name, res.Status, res.Body)
	}
	return res
}

// view is the rows of the View, or the snapshot without one.
func (s *Suite) view(tb testing.TB, r *rt.Receiver) []string {
	if len(s.View) == 0 {
		return r.Snapshot(tb)
	}
	return rows(tb, r, s.View...)
}

// state is everything the suite compares: the snapshot and the View.
func (s *Suite) state(tb testing.TB, r *rt.Receiver) []string {
	return append(r.Snapshot(tb), rows(tb, r, s.View...)...)
}

// converged is the state with each order's creating event masked: in
// another order of events, another event may create it.
func (s *Suite) converged(tb testing.TB, r *rt.Receiver) []string {
	snap := r.Snapshot(tb)
	for i, row := range snap {
		if f := strings.Split(row, " "); f[0] == "order" && len(f) > 2 {
			f[2] = "-"
			snap[i] = strings.Join(f, " ")
		}
	}
	return append(snap, rows(tb, r, s.View...)...)
}

// same compares two receivers that were sent the same events: rows,
// claims, emails (by Message-ID) and fulfillment calls (by
// Idempotency-Key).
func (s *Suite) same(t *testing.T, aName string, a *rt.Receiver, bName string, b *rt.Receiver) {
	t.Helper()
	compare := func(what string, f func(*rt.Receiver) []string) {
		if diff := cmp.Diff(f(a), f(b), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s differ (-%s +%s):\n%s", what, aName, bName, diff)
		}
	}
	compare("rows", func(r *rt.Receiver) []string { return s.state(t, r) })
	compare("claims", func(r *rt.Receiver) []string {
		return rows(t, r, `SELECT format('%s %s %s', event_key, kind, status) FROM processed_events ORDER BY event_key`)
	})
	compare("emails", func(r *rt.Receiver) []string {
		var ids []string
		for _, m := range r.SMTP.Messages() {
			ids = append(ids, m.MessageID)
		}
		return sorted(ids)
	})
	compare("fulfillment calls", func(r *rt.Receiver) []string {
		var keys []string
		for _, q := range r.API.Requests() {
			keys = append(keys, q.IdempotencyKey)
		}
		return sorted(keys)
	})
}

// eventKey is the claim key of the event a response answered for.
func (s *Suite) eventKey(tb testing.TB, r *rt.Receiver, res rt.Response) string {
	tb.Helper()
	var a struct{ Event string }
	_ = json.Unmarshal([]byte(res.Body), &a)
	var key string
	_ = r.Pool.QueryRow(context.Background(), `
SELECT event_key FROM processed_events WHERE kind = 'event' AND source = $2 AND (event_key = $1 OR event_id = $1)
ORDER BY claimed_at DESC LIMIT 1`, a.Event, s.Spec.Source).Scan(&key)
	return key
}

// Outcome is the outcome a response to a delivery names.
func Outcome(res rt.Response) webhooks.Outcome {
	var a struct{ Outcome webhooks.Outcome }
	_ = json.Unmarshal([]byte(res.Body), &a)
	return a.Outcome
}

// Calls lists the fulfillment calls r received, in order, as "<source>
// <external id> <amount> <currency> <email or ->".
func Calls(r *rt.Receiver) []string {
	var out []string
	for _, q := range r.API.Requests() {
		b := q.Body
		email := b.CustomerEmail
		if email == "" {
			email = "-"
		}
		out = append(out, fmt.Sprintf("%s %s %d %s %s", b.Source, b.ExternalID, b.AmountCents, b.Currency, email))
	}
	return out
}

// rows runs queries returning one text column and returns their rows, in
// order.
func rows(tb testing.TB, r *rt.Receiver, queries ...string) []string {
	tb.Helper()
	var out []string
	for _, q := range queries {
		rs, err := r.Pool.Query(context.Background(), q)
		if err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
		for rs.Next() {
			var s string
			if err := rs.Scan(&s); err != nil {
				tb.Fatalf("%s: %v", q, err)
			}
			out = append(out, s)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	return out
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// fewOrders returns s reversed and every rotation of s (each event first
// once, the others following in order), without s itself or repeats.
func fewOrders(s []string) [][]string {
	out := [][]string{}
	add := func(p []string) {
		if !slices.Equal(p, s) && !slices.ContainsFunc(out, func(q []string) bool { return slices.Equal(p, q) }) {
			out = append(out, p)
		}
	}
	r := slices.Clone(s)
	slices.Reverse(r)
	add(r)
	for i := 1; i < len(s); i++ {
		add(append(slices.Clone(s[i:]), s[:i]...))
	}
	return out
}

// Permutations returns every order of s, s itself first: what OutOfOrder
// tries, and what a provider's own must-show tables may walk.
func Permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{slices.Clone(s)}
	}
	var out [][]string
	for i := range s {
		rest := append(slices.Clone(s[:i]), s[i+1:]...)
		for _, p := range Permutations(rest) {
			out = append(out, append([]string{s[i]}, p...))
		}
	}
	return out
}
