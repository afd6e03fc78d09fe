package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestHostileInput throws at the running binary what the internet throws at
// a webhook endpoint. Every rejected request gets its contract status and
// leaves no row behind; a slow sender is served or cut off without holding
// up anybody else; a GitHub request replayed with its valid signature is
// acknowledged as a duplicate with no second effect.
func TestHostileInput(t *testing.T) {
	const maxBody = 64 << 10
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env("MAX_BODY_BYTES", fmt.Sprint(maxBody)))
	ctx := context.Background()

	// A sender that stalls half-way through its body. BODY_TIMEOUT (5s by
	// default) must cut it off with a 408; it is checked at the end, so
	// that the rest of the test runs meanwhile.
	stalled := stallBody(t, p.URL)

	good := checkout(1, "hostile")
	now := time.Now()
	signed := func(body []byte) http.Header { return stripeHeader(body, stripeSecret, time.Now()) }
	with := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	tampered := bytes.Replace(good.Body, []byte(`"amount_total":1001`), []byte(`"amount_total":1`), 1)
	if bytes.Equal(tampered, good.Body) {
		t.Fatal("fixture: could not tamper with the amount")
	}
	huge := stripeEvent("evt_hostile_huge", "checkout.session.completed", map[string]any{
		"id": "cs_huge", "payment_status": "paid", "padding": strings.Repeat("x", maxBody+1),
	})
	gh := purchase(1, "hostile")
	ghH := gh.Header()

	rejected := []struct {
		name   string
		method string
		path   string
		header http.Header
		body   []byte
		want   int
	}{
		// Stripe
		{"Stripe/NoSignature", "POST", "/webhooks/stripe", with(signed(good.Body), "Stripe-Signature", ""), good.Body, 400},
		{"Stripe/WrongSecret", "POST", "/webhooks/stripe", stripeHeader(good.Body, "whsec_not_ours", now), good.Body, 400},
		{"Stripe/TamperedBody", "POST", "/webhooks/stripe", signed(good.Body), tampered, 400},
		{"Stripe/GarbledHeader", "POST", "/webhooks/stripe", with(signed(good.Body), "Stripe-Signature", "t=abc,v1=00"), good.Body, 400},
		{"Stripe/OnlyV0", "POST", "/webhooks/stripe", with(signed(good.Body), "Stripe-Signature",
			fmt.Sprintf("t=%d,v0=%s", now.Unix(), hmacHex(stripeSecret, []byte(fmt.Sprintf("%d.%s", now.Unix(), good.Body))))), good.Body, 400},
		{"Stripe/ReplayedOutsideTolerance", "POST", "/webhooks/stripe", stripeHeader(good.Body, stripeSecret, now.Add(-10*time.Minute)), good.Body, 400},
		{"Stripe/SignedInTheFuture", "POST", "/webhooks/stripe", stripeHeader(good.Body, stripeSecret, now.Add(10*time.Minute)), good.Body, 400},
		{"Stripe/TextPlain", "POST", "/webhooks/stripe", with(signed(good.Body), "Content-Type", "text/plain"), good.Body, 400},
		{"Stripe/TruncatedJSON", "POST", "/webhooks/stripe", signed(good.Body[:len(good.Body)/2]), good.Body[:len(good.Body)/2], 400},
		{"Stripe/MalformedJSON", "POST", "/webhooks/stripe", signed([]byte(`{"id": evt_1,}`)), []byte(`{"id": evt_1,}`), 400},
		{"Stripe/NotAnEvent", "POST", "/webhooks/stripe", signed([]byte(`{"object":"charge","id":"ch_1"}`)), []byte(`{"object":"charge","id":"ch_1"}`), 400},
		{"Stripe/NoData", "POST", "/webhooks/stripe", signed([]byte(`{"id":"evt_nodata","object":"event","type":"invoice.paid"}`)),
			[]byte(`{"id":"evt_nodata","object":"event","type":"invoice.paid"}`), 400},
		{"Stripe/TwoEvents", "POST", "/webhooks/stripe", signed(append(append([]byte{}, good.Body...), good.Body...)),
			append(append([]byte{}, good.Body...), good.Body...), 400},
		{"Stripe/EmptyBody", "POST", "/webhooks/stripe", signed(nil), nil, 400},
		{"Stripe/TooLarge", "POST", "/webhooks/stripe", signed(huge), huge, 413},
		{"Stripe/GET", "GET", "/webhooks/stripe", signed(nil), nil, 405},
		{"Stripe/PUT", "PUT", "/webhooks/stripe", signed(good.Body), good.Body, 405},
		{"UnknownRoute", "POST", "/webhooks/paypal", signed(good.Body), good.Body, 404},
		// GitHub
		{"GitHub/NoSignature", "POST", "/webhooks/github", with(ghH, "X-Hub-Signature-256", ""), gh.Body, 400},
		{"GitHub/SHA1Only", "POST", "/webhooks/github", with(ghH, "X-Hub-Signature-256", "", "X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567"), gh.Body, 400},
		{"GitHub/WrongSecret", "POST", "/webhooks/github", with(ghH, "X-Hub-Signature-256", signGitHub(gh.Body, "not-our-secret")), gh.Body, 400},
		{"GitHub/TamperedBody", "POST", "/webhooks/github", ghH, bytes.Replace(gh.Body, []byte(`1500`), []byte(`1`), 1), 400},
		{"GitHub/NoEventHeader", "POST", "/webhooks/github", with(ghH, "X-GitHub-Event", ""), gh.Body, 400},
		{"GitHub/NoDeliveryHeader", "POST", "/webhooks/github", with(ghH, "X-GitHub-Delivery", ""), gh.Body, 400},
		{"GitHub/DeliveryWithSlash", "POST", "/webhooks/github", with(ghH, "X-GitHub-Delivery", "abc/def"), gh.Body, 400},
		{"GitHub/TextPlain", "POST", "/webhooks/github", with(ghH, "Content-Type", "text/plain"), gh.Body, 400},
		{"GitHub/FormWithoutPayload", "POST", "/webhooks/github",
			with(ghH, "Content-Type", "application/x-www-form-urlencoded", "X-Hub-Signature-256", signGitHub([]byte("a=b"), githubSecret)), []byte("a=b"), 400},
		{"GitHub/MalformedJSON", "POST", "/webhooks/github",
			with(ghH, "X-Hub-Signature-256", signGitHub([]byte(`{"action":`), githubSecret)), []byte(`{"action":`), 400},
		{"GitHub/JSONNotAnObject", "POST", "/webhooks/github",
			with(ghH, "X-Hub-Signature-256", signGitHub([]byte(`[1,2]`), githubSecret)), []byte(`[1,2]`), 400},
		{"GitHub/GET", "GET", "/webhooks/github", ghH, nil, 405},
	}
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tc.method, p.URL+tc.path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tc.header
			res, err := deliveryClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("status %d, want %d; body %s", res.StatusCode, tc.want, b)
			}
		})
	}
	assertNothingWritten(t, w, "after every rejected request")

	// A slow sender within the limits is served, and a normal delivery
	// meanwhile is not held up by it.
	t.Run("SlowBodyDoesNotBlockOthers", func(t *testing.T) {
		slow := checkout(2, "hostile")
		slowDone := make(chan error, 1)
		var slowEnd time.Time
		go func() {
			res, err := postReader(ctx, p.URL+slow.Path, slow.Header(), trickle(slow.Body, 20, 75*time.Millisecond))
			slowEnd = time.Now()
			if err == nil && res.Status != 200 {
				err = fmt.Errorf("status %d: %s", res.Status, res.Body)
			}
			slowDone <- err
		}()
		normal := checkout(3, "hostile")
		mustPost(t, p.URL, normal, 200)
		normalEnd := time.Now()
		if err := <-slowDone; err != nil {
			t.Fatalf("slow delivery: %v", err)
		}
		if !normalEnd.Before(slowEnd) {
			t.Errorf("the normal delivery finished after the slow one: it waited for it")
		}
		if n := count(t, w.DB, `SELECT count(*) FROM orders`); n != 2 {
			t.Errorf("orders = %d, want 2", n)
		}
	})

	t.Run("UnknownEventTypesIgnored", func(t *testing.T) {
		res := mustPost(t, p.URL, unknownStripeEvent("evt_hostile_unknown"), 200)
		if !strings.Contains(res.Body, `"ignored"`) {
			t.Errorf("Stripe: body %s, want outcome ignored", res.Body)
		}
		issues := githubDelivery("issues", "hostile-issues-1", []byte(`{"action":"opened","issue":{"number":1}}`))
		res = mustPost(t, p.URL, issues, 200)
		if !strings.Contains(res.Body, `"ignored"`) {
			t.Errorf("GitHub: body %s, want outcome ignored", res.Body)
		}
	})

	t.Run("GitHubFormEncodedPing", func(t *testing.T) {
		body := []byte(url.Values{"payload": {`{"zen":"Keep it logically awesome.","hook_id":4242}`}}.Encode())
		h := with(githubDelivery("ping", "hostile-ping-1", body).Header(), "Content-Type", "application/x-www-form-urlencoded")
		h.Set("X-Hub-Signature-256", signGitHub(body, githubSecret))
		res, err := postRaw(ctx, p.URL+"/webhooks/github", h, body)
		if err != nil || res.Status != 200 {
			t.Fatalf("form-encoded ping: %+v, %v", res, err)
		}
	})

	t.Run("GitHubReplayWithValidSignature", func(t *testing.T) {
		for i, want := range []string{`"processed"`, `"duplicate"`} {
			res, err := postRaw(ctx, p.URL+gh.Path, ghH.Clone(), gh.Body)
			if err != nil || res.Status != 200 || !strings.Contains(res.Body, want) {
				t.Fatalf("copy %d: %+v, %v; want 200 %s", i+1, res, err, want)
			}
		}
		if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE source = 'github_marketplace' AND external_id = $1`, fmt.Sprintf("account:%d", accountID(1))); n != 1 {
			t.Errorf("orders = %d, want 1", n)
		}
		if n := w.mailsByID()[messageID(gh.Ref(stepWelcome))]; n != 1 {
			t.Errorf("welcome emails = %d, want 1", n)
		}
		if n := w.fulfillmentsByKey()[idemKey(gh.Ref(stepFulfillment))]; n != 1 {
			t.Errorf("fulfillment calls = %d, want 1", n)
		}
	})

	t.Run("StalledBodyCutOff", func(t *testing.T) {
		status, err := stalled()
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusRequestTimeout {
			t.Errorf("stalled body answered %d, want 408", status)
		}
		if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'evt_hostile_stalled%'`); n != 0 {
			t.Errorf("the stalled delivery left %d claim rows", n)
		}
	})
	if !p.alive() {
		t.Fatalf("the receiver died: %v", p.waitErr)
	}
}

// assertNothingWritten checks that no table the receiver writes holds a row
// and that no step left the database.
func assertNothingWritten(t *testing.T, w *world, when string) {
	t.Helper()
	for _, table := range w.writtenTables(t) {
		if n := count(t, w.DB, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s: %d rows in %s", when, n, table)
		}
	}
	if n, m := len(w.SMTP.Messages()), len(w.API.Requests()); n+m != 0 {
		t.Errorf("%s: %d emails and %d fulfillment calls", when, n, m)
	}
}

// writtenTables are the tables a receiver writes for a delivery, as the
// database at hand has them: processed_events (which carries each event's
// body since migration 000003), the business tables and, in a schema from
// before it, webhook_events.
func (w *world) writtenTables(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, table := range []string{"processed_events", "webhook_events", "orders", "invoices", "refunds", "invoice_payment_failures"} {
		if count(t, w.DB, `SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)`, table) == 1 {
			out = append(out, table)
		}
	}
	return out
}

// trickle is a body that arrives in n pieces, every, one after the other:
// a slow sender's pacing.
func trickle(body []byte, n int, every time.Duration) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		size := (len(body) + n - 1) / n
		for len(body) > 0 {
			k := min(size, len(body))
			if _, err := pw.Write(body[:k]); err != nil {
				return
			}
			body = body[k:]
			time.Sleep(every) // the sender's pace, not a synchronisation
		}
		pw.Close()
	}()
	return pr
}

// stallBody opens a connection that sends a signed delivery's headers and
// the first bytes of its body, then nothing. The returned function waits
// (at most 30s: BODY_TIMEOUT is 5s) until the server answers or closes the
// connection, and returns the status it answered (0: none).
func stallBody(t *testing.T, baseURL string) func() (int, error) {
	t.Helper()
	d := checkout(9, "hostile_stalled")
	conn, err := net.Dial("tcp", strings.TrimPrefix(baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST /webhooks/stripe HTTP/1.1\r\nHost: receiver\r\nContent-Length: %d\r\n", len(d.Body))
	for k, v := range d.Header() {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v[0])
	}
	head.WriteString("\r\n")
	head.Write(d.Body[:10])
	if _, err := conn.Write(head.Bytes()); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	return func() (int, error) {
		_ = conn.SetReadDeadline(started.Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return 0, fmt.Errorf("the server kept a stalled body's connection open for %v", time.Since(started).Round(time.Second))
			}
			return 0, nil // closed without an answer: cut off
		}
		res.Body.Close()
		return res.StatusCode, nil
	}
}
