package server_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/telemetry"
	"github.com/paywebhooks/receiver/internal/telemetry/telemetrytest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

var (
	traceSVG      = flag.String("trace-svg", "", "write the trace of TestTraceOfACheckout as an SVG timeline to this file")
	tracingRounds = flag.Int("tracing-rounds", 1, "BenchmarkDeliveryTracing: rounds of its three modes, interleaved (off, 100 %, 1 %, off, …)")
)

// serve runs r's server as cmd/server does, on a listener of its own (the
// public handler, traced, and the redriver), until the test ends. It
// returns the server's base URL.
func serve(tb testing.TB, r *rt.Receiver) string {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan server.Addrs, 1)
	done := make(chan error, 1)
	go func() { done <- r.Server.Run(ctx, func(a server.Addrs) { addrs <- a }) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("run: %v", err)
		}
	})
	select {
	case a := <-addrs:
		return "http://" + a.HTTP.String()
	case err := <-done:
		tb.Fatalf("run: %v", err)
	case <-time.After(10 * time.Second):
		tb.Fatal("the server did not listen within 10s")
	}
	return ""
}

// listen has the receiver listen on a free loopback port and redrive
// every 100 ms (so a failed step's first back-off is 100 ms too).
var listen = []rt.Option{
	rt.Configure(func(c *config.Config) { c.HTTPAddr = "127.0.0.1:0"; c.ShutdownTimeout = 5 * time.Second }),
	rt.Env("REDRIVE_INTERVAL", "100ms"),
}

// fulfillmentAPI is a fulfillment API that records the traceparent header
// of every call, and answers 503 to the first fail calls.
type fulfillmentAPI struct {
	*httptest.Server
	mu           sync.Mutex
	fail         int
	traceparents []string
}

func newFulfillmentAPI(t *testing.T, fail int) *fulfillmentAPI {
	api := &fulfillmentAPI{fail: fail}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		api.mu.Lock()
		api.traceparents = append(api.traceparents, r.Header.Get("traceparent"))
		failing := api.fail > 0
		api.fail--
		api.mu.Unlock()
		if failing {
			http.Error(w, `{"error":"try later"}`, http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(api.Close)
	return api
}

func (a *fulfillmentAPI) received() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.traceparents...)
}

const buyer = "buyer@example.com"

// checkoutEvent is a paid checkout with its own ids: an order, a
// confirmation email to buyer and a fulfillment call.
func checkoutEvent(id string) []byte {
	return stripeEvent(id, "checkout.session.completed", `{"id":"cs_`+id+`","object":"checkout.session","mode":"payment",`+
		`"payment_status":"paid","status":"complete","amount_total":3000,"currency":"usd","payment_intent":"pi_`+id+`",`+
		`"customer_details":{"email":"`+buyer+`","name":"Test Buyer","address":{"line1":"742 Evergreen Terrace"}},"customer_email":null}`)
}

func deliver(t testing.TB, url string, body []byte, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

func hasAttr(k attribute.Key, v string) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool { return attr(s, k) == v }
}

func all(fs ...func(sdktrace.ReadOnlySpan) bool) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool {
		for _, f := range fs {
			if !f(s) {
				return false
			}
		}
		return true
	}
}

// find returns the one span of spans that match accepts.
func find(t *testing.T, spans []sdktrace.ReadOnlySpan, what string, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %s, want 1:\n%s", len(found), what, telemetrytest.Tree(spans))
	}
	return found[0]
}

func childrenOf(spans []sdktrace.ReadOnlySpan, parent sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, s := range spans {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() {
			names = append(names, s.Name())
		}
	}
	return names
}

// leaks returns every place in spans where one of secrets shows: an
// attribute, an event's attribute, a link's attribute, a status.
func leaks(spans []sdktrace.ReadOnlySpan, secrets map[string]string) []string {
	var out []string
	check := func(s sdktrace.ReadOnlySpan, where, v string) {
		for what, secret := range secrets {
			if secret != "" && strings.Contains(v, secret) {
				out = append(out, fmt.Sprintf("%s: %s carries %s", s.Name(), where, what))
			}
		}
	}
	for _, s := range spans {
		check(s, "its name", s.Name())
		check(s, "its status", s.Status().Description)
		for _, kv := range s.Attributes() {
			check(s, string(kv.Key), kv.Value.String())
			if kv.Key == "pgx.query.parameters" {
				out = append(out, s.Name()+": query parameters recorded")
			}
		}
		for _, e := range s.Events() {
			check(s, "event "+e.Name, e.Name)
			for _, kv := range e.Attributes {
				check(s, "event "+e.Name+" "+string(kv.Key), kv.Value.String())
			}
		}
	}
	return out
}

const (
	receiverScope = telemetry.ScopeName
	otelhttpScope = "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// TestSpanAttributesBounded: what a request says of itself and nobody
// signed (a User-Agent, a path, a Host) reaches the spans cut to
// telemetry.AttributeValueLimit, however long it was sent.
func TestSpanAttributesBounded(t *testing.T) {
	rec := telemetrytest.Install(t)
	r := rt.New(t, providers.List(), listen...)
	url := serve(t, r)
	long := strings.Repeat("A", 16<<10)
	body := checkoutEvent("evt_trace_long_headers")
	h := rt.Signed(stripe.Spec, body, nil)
	h.Set("User-Agent", "Stripe/1.0 "+long)
	if status, answer := deliver(t, url, body, h); status != http.StatusOK {
		t.Fatalf("delivery: %d %s", status, answer)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/"+long, strings.NewReader("{}"))
	req.Header.Set("User-Agent", long)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
	}
	spans := rec.Ended()
	if len(spans) == 0 {
		t.Fatal("no span recorded")
	}
	longestOwn := 0 // the longest value the receiver records itself: whole
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			n := len(kv.Value.String())
			if n > telemetry.AttributeValueLimit {
				t.Errorf("%s: %s is %d bytes, more than %d", s.Name(), kv.Key, n, telemetry.AttributeValueLimit)
			}
			if v := kv.Value.String(); !strings.Contains(v, "AAAA") && n > longestOwn {
				longestOwn = n
			}
		}
	}
	t.Logf("the longest attribute value of the receiver's own: %d bytes (limit %d)", longestOwn, telemetry.AttributeValueLimit)
	if longestOwn > telemetry.AttributeValueLimit/2 {
		t.Errorf("an attribute of the receiver's own is %d bytes: within reach of the limit, %d", longestOwn, telemetry.AttributeValueLimit)
	}
}

// TestTraceOfACheckout: one paid checkout is one trace: the request, its
// verification, the event, its transaction (with its statements), and its
// two steps side by side, the email with its SMTP dialogue and the
// fulfillment call, whose traceparent reaches the API. The spans say what
// the event was and what became of it, and never carry a secret, the body
// or the customer's address. The latency histogram's exemplar and the
// stored step point at the same trace.
func TestTraceOfACheckout(t *testing.T) {
	rec := telemetrytest.Install(t)
	api := newFulfillmentAPI(t, 0)
	r := rt.New(t, providers.List(), append(listen, rt.Env("FULFILLMENT_URL", api.URL))...)
	url := serve(t, r)

	// Checkouts first, so that the one traced finds the pool's connections
	// open and its statements prepared, as in production.
	const warmups = 4
	for i := range warmups {
		warm := fmt.Sprintf("evt_trace_warm_%d", i)
		body := checkoutEvent(warm)
		if status, answer := deliver(t, url, body, rt.Signed(stripe.Spec, body, nil)); status != http.StatusOK {
			t.Fatalf("delivery answered %d %s", status, answer)
		}
		rec.Wait(t, all(telemetrytest.Named("POST /webhooks/stripe"), hasAttr(telemetry.AttrEventID, warm)))
	}

	id := "evt_trace_checkout"
	body := checkoutEvent(id)
	signed := rt.Signed(stripe.Spec, body, nil)
	if status, answer := deliver(t, url, body, signed.Clone()); status != http.StatusOK || !strings.Contains(answer, `"processed"`) {
		t.Fatalf("delivery answered %d %s", status, answer)
	}
	root := rec.Wait(t, all(telemetrytest.Named("POST /webhooks/stripe"), hasAttr(telemetry.AttrEventID, id)))
	spans := rec.Trace(root.SpanContext().TraceID())
	t.Logf("the trace of one checkout:\n%s", telemetrytest.Tree(spans))

	want := `POST /webhooks/stripe
  webhook.process
    webhook.step email.confirmation
      smtp.send
    webhook.step fulfillment
      POST /fulfillments
    webhook.transaction
  webhook.verify
`
	if diff := cmp.Diff(want, telemetrytest.Shape(spans, telemetrytest.Scope(receiverScope, otelhttpScope))); diff != "" {
		t.Errorf("span tree (-want +got):\n%s", diff)
	}
	if root.Parent().IsValid() || root.SpanKind() != trace.SpanKindServer {
		t.Errorf("the request's span has parent %v and kind %v, want a server span at the root", root.Parent(), root.SpanKind())
	}

	// What the spans say.
	for _, c := range []struct {
		span string
		key  attribute.Key
		want string
	}{
		{"POST /webhooks/stripe", telemetry.AttrSource, "stripe"},
		{"POST /webhooks/stripe", telemetry.AttrEventID, id},
		{"POST /webhooks/stripe", telemetry.AttrEventType, "checkout.session.completed"},
		{"POST /webhooks/stripe", telemetry.AttrOutcome, "processed"},
		{"POST /webhooks/stripe", "http.route", "/webhooks/stripe"},
		{"POST /webhooks/stripe", "http.response.status_code", "200"},
		{"webhook.process", telemetry.AttrEventKey, id},
		{"webhook.process", telemetry.AttrVia, "delivery"},
		{"webhook.process", telemetry.AttrOutcome, "processed"},
		{"webhook.transaction", telemetry.AttrClaimed, "true"},
		{"webhook.transaction", telemetry.AttrStepsQueued, "2"},
		{"webhook.transaction", telemetry.AttrStepsLeased, "2"},
		{"webhook.step email.confirmation", telemetry.AttrStep, "email.confirmation"},
		{"webhook.step email.confirmation", telemetry.AttrStepKey, id + "/email.confirmation"},
		{"webhook.step email.confirmation", telemetry.AttrAttempt, "1"},
		{"webhook.step email.confirmation", telemetry.AttrStepOutcome, "done"},
		{"webhook.step fulfillment", telemetry.AttrStepKey, id + "/fulfillment"},
		{"webhook.step fulfillment", telemetry.AttrStepKind, "fulfillment"},
		{"webhook.step fulfillment", telemetry.AttrStepOutcome, "done"},
		{"smtp.send", "server.address", "127.0.0.1"},
		{"POST /fulfillments", "http.response.status_code", "201"},
	} {
		s := find(t, spans, "named "+c.span, telemetrytest.Named(c.span))
		if got := attr(s, c.key); got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.span, c.key, got, c.want)
		}
	}
	// A step planned by this delivery has no link: it is of this trace.
	for _, name := range []string{"webhook.step email.confirmation", "webhook.step fulfillment"} {
		if s := find(t, spans, "named "+name, telemetrytest.Named(name)); len(s.Links()) != 0 || attr(s, telemetry.AttrRunner) != "" {
			t.Errorf("%s: links %v, runner %q; want none: the delivery ran it", name, s.Links(), attr(s, telemetry.AttrRunner))
		}
	}

	// The transaction's statements, named, in one batch (a new event reads
	// no claims: only a copy does, after its transaction); each step
	// records its completion.
	tx := find(t, spans, "named webhook.transaction", telemetrytest.Named("webhook.transaction"))
	batch := find(t, spans, "batch start under the transaction", func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "batch start" && s.Parent().SpanID() == tx.SpanContext().SpanID()
	})
	statements := strings.Join(childrenOf(spans, batch), ", ")
	for _, want := range []string{"SELECT receiver_claim", "INSERT orders"} {
		if !strings.Contains(statements, want) {
			t.Errorf("the batch's statements are %s, want %s among them", statements, want)
		}
	}
	if strings.Contains(statements, "SELECT processed_events") {
		t.Errorf("the batch's statements are %s: a new event's transaction reads its claims", statements)
	}
	for _, name := range []string{"webhook.step email.confirmation", "webhook.step fulfillment"} {
		step := find(t, spans, "named "+name, telemetrytest.Named(name))
		if got := strings.Join(childrenOf(spans, step), ", "); !strings.Contains(got, "UPDATE processed_events") {
			t.Errorf("%s has children %s, want its completion, UPDATE processed_events, among them", name, got)
		}
	}

	// Nothing secret, no body, no address.
	secrets := map[string]string{
		"the signing secret":     rt.Secret(stripe.Spec),
		"the signature":          signed.Get("Stripe-Signature"),
		"the customer's email":   buyer,
		"the customer's name":    "Test Buyer",
		"the customer's address": "Evergreen",
		"the body":               string(body),
		"the session's object":   `"object":"checkout.session"`,
		"the database URL":       r.Config.DatabaseURL,
	}
	if l := leaks(rec.Ended(), secrets); len(l) > 0 {
		t.Errorf("spans leak:\n%s", strings.Join(l, "\n"))
	}

	// The fulfillment API received the trace, as a child of the call.
	call := find(t, spans, "named POST /fulfillments", telemetrytest.Named("POST /fulfillments"))
	got := api.received()
	if len(got) != warmups+1 {
		t.Fatalf("the fulfillment API received %d calls, want %d", len(got), warmups+1)
	}
	sc, ok := telemetry.ParseTraceparent(got[warmups])
	if !ok || sc.TraceID() != root.SpanContext().TraceID() || sc.SpanID() != call.SpanContext().SpanID() || !sc.IsSampled() {
		t.Errorf("the fulfillment API received traceparent %q, want 00-%s-%s-01", got[warmups], root.SpanContext().TraceID(), call.SpanContext().SpanID())
	}

	// The steps are stored with the trace context of the transaction that
	// planned them.
	var stored string
	if err := r.Pool.QueryRow(context.Background(), `SELECT traceparent FROM processed_events WHERE event_key = $1`,
		id+"/fulfillment").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if sc, _ := telemetry.ParseTraceparent(stored); sc.SpanID() != tx.SpanContext().SpanID() || sc.TraceID() != tx.SpanContext().TraceID() {
		t.Errorf("the step is stored with traceparent %q, want the transaction's span %s", stored, tx.SpanContext().SpanID())
	}

	// The latency histogram's exemplar is this trace.
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	exemplar := `# {trace_id="` + root.SpanContext().TraceID().String() + `"}`
	if !strings.Contains(string(metrics), exemplar) {
		t.Errorf("/metrics has no exemplar %s on http_request_duration_seconds", exemplar)
	}

	if *traceSVG != "" {
		f, err := os.Create(*traceSVG)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := telemetrytest.SVG(f, "One checkout.session.completed: POST /webhooks/stripe, trace "+root.SpanContext().TraceID().String(), spans,
			"blue: the receiver's work | green: HTTP in and out, SMTP | orange: PostgreSQL",
			"The transaction is one pipelined round trip: each 'batch query' marks a statement's result as it is read.",
			"The two steps run side by side; each records its completion with a compare-and-set on its lease."); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTraceOfARedrivenStep: a step that failed during the delivery is
// finished by the redriver in a trace of its own, whose step span links to
// the transaction that planned it; so does an operator's replay of the
// event.
func TestTraceOfARedrivenStep(t *testing.T) {
	rec := telemetrytest.Install(t)
	api := newFulfillmentAPI(t, 1) // the delivery's call fails, the redriver's succeeds
	r := rt.New(t, providers.List(), append(listen, rt.Env("FULFILLMENT_URL", api.URL))...)
	url := serve(t, r)

	id := "evt_trace_redriven"
	body := checkoutEvent(id)
	if status, answer := deliver(t, url, body, rt.Signed(stripe.Spec, body, nil)); status != http.StatusBadGateway {
		t.Fatalf("delivery answered %d %s, want 502: the fulfillment API failed", status, answer)
	}
	root := rec.Wait(t, all(telemetrytest.Named("POST /webhooks/stripe"), hasAttr(telemetry.AttrEventID, id)))
	delivery := rec.Trace(root.SpanContext().TraceID())
	tx := find(t, delivery, "named webhook.transaction", telemetrytest.Named("webhook.transaction"))
	failed := find(t, delivery, "named webhook.step fulfillment", telemetrytest.Named("webhook.step fulfillment"))
	if attr(failed, telemetry.AttrStepOutcome) != "failed" || failed.Status().Description != "*fulfillment.StatusError" {
		t.Errorf("the delivery's fulfillment step: outcome %q, status %q; want failed, *fulfillment.StatusError",
			attr(failed, telemetry.AttrStepOutcome), failed.Status().Description)
	}
	t.Logf("the delivery's trace:\n%s", telemetrytest.Tree(delivery))

	redriven := rec.Wait(t, all(telemetrytest.Named("webhook.step fulfillment"), hasAttr(telemetry.AttrRunner, "redriver"),
		hasAttr(telemetry.AttrEventKey, id)))
	later := rec.Trace(redriven.SpanContext().TraceID())
	t.Logf("the redriver's trace:\n%s", telemetrytest.Tree(later))
	if redriven.Parent().IsValid() || redriven.SpanContext().TraceID() == tx.SpanContext().TraceID() {
		t.Errorf("the redriven step's span has parent %v in trace %s, want the root of a trace of its own",
			redriven.Parent(), redriven.SpanContext().TraceID())
	}
	if attr(redriven, telemetry.AttrAttempt) != "2" || attr(redriven, telemetry.AttrStepOutcome) != "done" {
		t.Errorf("the redriven step: attempt %s, outcome %s; want 2, done", attr(redriven, telemetry.AttrAttempt), attr(redriven, telemetry.AttrStepOutcome))
	}
	links := redriven.Links()
	if len(links) != 1 || links[0].SpanContext.TraceID() != tx.SpanContext().TraceID() || links[0].SpanContext.SpanID() != tx.SpanContext().SpanID() {
		t.Fatalf("the redriven step links to %v, want the delivery's transaction %s/%s", links, tx.SpanContext().TraceID(), tx.SpanContext().SpanID())
	}
	t.Logf("the redriven step (trace %s) links to the delivery's transaction: trace %s span %s (%s)",
		redriven.SpanContext().TraceID(), links[0].SpanContext.TraceID(), links[0].SpanContext.SpanID(), links[0].Attributes)
	if diff := cmp.Diff("webhook.step fulfillment\n  POST /fulfillments\n", telemetrytest.Shape(later, telemetrytest.Scope(receiverScope, otelhttpScope))); diff != "" {
		t.Errorf("the redriver's trace (-want +got):\n%s", diff)
	}
	// The second call carried the redriver's trace.
	if got := api.received(); len(got) != 2 || !strings.Contains(got[1], redriven.SpanContext().TraceID().String()) {
		t.Errorf("the fulfillment API received %q, want its second call in trace %s", got, redriven.SpanContext().TraceID())
	}

	// An operator's replay of the event: linked to the same transaction.
	provs := r.Server.Providers()
	ev, err := webhooks.LoadEvent(context.Background(), r.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Server.Processor().Replay(context.Background(), provs["stripe"], ev)
	if err != nil || res.Outcome != webhooks.OutcomeDuplicate {
		t.Fatalf("replay: %v %v, want duplicate", res.Outcome, err)
	}
	replay := rec.Wait(t, all(telemetrytest.Named("webhook.replay"), hasAttr(telemetry.AttrEventKey, id)))
	if l := replay.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != tx.SpanContext().SpanID() {
		t.Errorf("the replay links to %v, want the delivery's transaction %s", l, tx.SpanContext().SpanID())
	}
	if diff := cmp.Diff("webhook.replay\n  webhook.process\n    webhook.transaction\n",
		telemetrytest.Shape(rec.Trace(replay.SpanContext().TraceID()), telemetrytest.Scope(receiverScope))); diff != "" {
		t.Errorf("the replay's trace (-want +got):\n%s", diff)
	}
}

// TestUntracedWhenOff: with tracing off, no span is started anywhere and
// steps are stored without a trace context.
func TestUntracedWhenOff(t *testing.T) {
	if telemetry.Enabled() {
		t.Fatal("tracing on")
	}
	api := newFulfillmentAPI(t, 0)
	r := rt.New(t, providers.List(), append(listen, rt.Env("FULFILLMENT_URL", api.URL))...)
	url := serve(t, r)
	body := checkoutEvent("evt_untraced")
	if status, answer := deliver(t, url, body, rt.Signed(stripe.Spec, body, nil)); status != http.StatusOK {
		t.Fatalf("delivery answered %d %s", status, answer)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE traceparent IS NOT NULL`); n != 0 {
		t.Errorf("%d steps stored with a trace context, want none", n)
	}
	if got := api.received(); len(got) != 1 || got[0] != "" {
		t.Errorf("the fulfillment API received traceparent %q, want none", got)
	}
}

// processCPU is the CPU time this process has used (user and system): the
// receiver's, and its test clients' and servers', never PostgreSQL's. Less
// at the mercy of what else runs on the machine than the wall clock.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeliveryTracing is a paid checkout through the whole receiver
// (its listener, the traced handler, the transaction, an email over SMTP
// and a fulfillment call, all real) with tracing off, then sampling every
// trace, then 1 % of them, spans batched and exported with OTLP over HTTP
// to a collector that reads and drops them. ns/op is wall time per
// delivery with 8 in flight; cpu-ns/op the CPU this process spent per
// delivery (everything but PostgreSQL). Run the three in one go, in
// interleaved rounds so that the machine's other work weighs on each
// alike (a second round of "off" is reported as "off#01"):
//
//	go test -run '^$' -bench DeliveryTracing -benchtime 1000x -tracing-rounds 5 ./internal/server
func BenchmarkDeliveryTracing(b *testing.B) {
	r := rt.New(b, providers.List(), listen...)
	url := serve(b, r)
	sink := telemetrytest.NewSink(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	run := time.Now().UnixNano()
	var seq atomic.Int64
	post := func(b *testing.B) {
		body := checkoutEvent(fmt.Sprintf("evt_bench_%d_%d", run, seq.Add(1)))
		req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", bytes.NewReader(body))
		req.Header = rt.Signed(stripe.Spec, body, nil)
		res, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Errorf("status %d", res.StatusCode)
		}
	}
	// Warm up, untimed: the pool's connections opened and their
	// statements prepared, so that the first mode measured pays for none
	// of it.
	var warm sync.WaitGroup
	for range 8 {
		warm.Go(func() {
			for range 50 {
				post(b)
			}
		})
	}
	warm.Wait()
	b.ResetTimer()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	modes := []struct{ name, ratio string }{{"off", ""}, {"sampled=100%", "1"}, {"sampled=1%", "0.01"}}
	for i := range *tracingRounds * len(modes) {
		mode := modes[i%len(modes)]
		b.Run(mode.name, func(b *testing.B) {
			if mode.ratio != "" {
				b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL())
				b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
				b.Setenv("OTEL_TRACES_SAMPLER_ARG", mode.ratio)
				_, shutdown, err := telemetry.Setup(context.Background(), quiet)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = shutdown(context.Background()) }()
			}
			b.ReportAllocs()
			b.SetParallelism(4)
			cpu0 := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					post(b)
				}
			})
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
