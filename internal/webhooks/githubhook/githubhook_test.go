package githubhook_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/pgtest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/webhooks/githubhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// hookID is the X-GitHub-Hook-ID of the test deliveries.
const hookID = "424242"

// newGUID returns a fresh delivery GUID, as GitHub makes them.
func newGUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// header is the headers of a GitHub delivery of body, signed with the test
// receiver's secret.
func header(event, guid, hook string, body []byte) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/test")
	h.Set(githubhook.HeaderEvent, event)
	h.Set(githubhook.HeaderDelivery, guid)
	if hook != "" {
		h.Set(githubhook.HeaderHookID, hook)
	}
	h.Set(githubhook.HeaderSignature256, sign(body, rt.Secret(githubhook.Spec)))
	return h
}

// deliver posts body as a delivery of event with the GUID, and fails the
// test unless the receiver answers want.
func deliver(t *testing.T, r *rt.Receiver, event, guid string, body []byte, want int) rt.Response {
	t.Helper()
	hook := hookID
	if event == "ping" { // a ping names its hook in the body, and the two must agree
		var p struct {
			HookID json.Number `json:"hook_id"`
		}
		_ = json.Unmarshal(body, &p)
		hook = p.HookID.String()
	}
	res := r.Post(t, "/webhooks/github", header(event, guid, hook, body), body)
	if res.Status != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", event, guid, res.Status, want, res.Body)
	}
	return res
}

// deliverFixture delivers testdata/name, whose event type is the part of
// its name before the first dot, with a fresh GUID, and expects 200.
func deliverFixture(t *testing.T, r *rt.Receiver, name string, replace ...string) rt.Response {
	t.Helper()
	event, _, _ := strings.Cut(name, ".")
	return deliver(t, r, event, newGUID(), rt.Fixture(t, name, replace...), 200)
}

type orderRow struct {
	Status        string
	AmountCents   int64
	Currency      string
	CustomerEmail string
	Plan          string
}

func order(t *testing.T, r *rt.Receiver, source, externalID string) (orderRow, bool) {
	t.Helper()
	var o orderRow
	err := r.Pool.QueryRow(context.Background(), `
SELECT status, amount_cents, currency, coalesce(customer_email, ''), coalesce(plan, '')
FROM orders WHERE source = $1 AND external_id = $2`, source, externalID).
		Scan(&o.Status, &o.AmountCents, &o.Currency, &o.CustomerEmail, &o.Plan)
	if err != nil {
		return orderRow{}, false
	}
	return o, true
}

func marketplaceOrder(t *testing.T, r *rt.Receiver, account string) orderRow {
	t.Helper()
	o, ok := order(t, r, githubhook.SourceMarketplace, "account:"+account)
	if !ok {
		t.Fatalf("no marketplace order for account %s", account)
	}
	return o
}

func sponsorsOrder(t *testing.T, r *rt.Receiver, nodeID string) orderRow {
	t.Helper()
	o, ok := order(t, r, githubhook.SourceSponsors, nodeID)
	if !ok {
		t.Fatalf("no sponsors order for %s", nodeID)
	}
	return o
}

// wantMail checks the i-th email received: its recipient and a piece of its
// text.
func wantMail(t *testing.T, r *rt.Receiver, i int, to, contains string) {
	t.Helper()
	msgs := r.SMTP.Messages()
	if len(msgs) <= i {
		t.Fatalf("emails = %d, want at least %d", len(msgs), i+1)
	}
	if len(msgs[i].To) != 1 || msgs[i].To[0] != to {
		t.Errorf("email %d to %v, want %s", i, msgs[i].To, to)
	}
	if !strings.Contains(string(msgs[i].Data), contains) {
		t.Errorf("email %d does not contain %q:\n%s", i, contains, msgs[i].Data)
	}
}

func wantCounts(t *testing.T, r *rt.Receiver, emails, fulfillments int) {
	t.Helper()
	if n := len(r.SMTP.Messages()); n != emails {
		t.Errorf("emails = %d, want %d", n, emails)
	}
	if n := len(r.API.Requests()); n != fulfillments {
		t.Errorf("fulfillment requests = %d, want %d", n, fulfillments)
	}
}

func reason(err error) string {
	var rej *webhooks.RejectError
	if errors.As(err, &rej) {
		return rej.Reason
	}
	return fmt.Sprintf("not a rejection: %v", err)
}

// TestVerify calls Verify directly, starting with GitHub's documented test
// vector.
func TestVerify(t *testing.T) {
	const (
		vectorSecret = "It's a Secret to Everybody"
		vectorBody   = "Hello, World!"
		vectorSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	vectorHeader := func(sig string) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set(githubhook.HeaderEvent, "ping")
		h.Set(githubhook.HeaderDelivery, newGUID())
		h.Set(githubhook.HeaderSignature256, sig)
		return h
	}
	t.Run("DocumentedTestVector", func(t *testing.T) {
		if got := "sha256=" + hex.EncodeToString(githubhook.Sign([]byte(vectorBody), vectorSecret)); got != vectorSig {
			t.Fatalf("Sign = %s, want %s", got, vectorSig)
		}
		// The signature passes; the body, not being a JSON object, is then refused.
		p := githubhook.New([]string{vectorSecret}, "")
		_, err := p.Verify(vectorHeader(vectorSig), []byte(vectorBody), time.Now())
		if got := reason(err); got != "malformed_json" {
			t.Fatalf("reason %q, want malformed_json (signature accepted, body refused)", got)
		}
	})
	t.Run("DocumentedTestVectorAmongRotatedSecrets", func(t *testing.T) {
		p := githubhook.New([]string{"the-next-secret", vectorSecret}, "")
		_, err := p.Verify(vectorHeader(vectorSig), []byte(vectorBody), time.Now())
		if got := reason(err); got != "malformed_json" {
			t.Fatalf("reason %q, want malformed_json", got)
		}
	})
	t.Run("ErrDocumentedTestVectorWrongSecret", func(t *testing.T) {
		p := githubhook.New([]string{"It's a secret to everybody"}, "")
		_, err := p.Verify(vectorHeader(vectorSig), []byte(vectorBody), time.Now())
		if got := reason(err); got != "no_valid_signature" {
			t.Fatalf("reason %q, want no_valid_signature", got)
		}
	})
	t.Run("SecretIndexAndKey", func(t *testing.T) {
		body := []byte(`{"zen":"Design for failure.","hook_id":424242}`)
		h := header("ping", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "", body)
		p := githubhook.New([]string{"the-next-secret", rt.Secret(githubhook.Spec)}, "")
		ev, err := p.Verify(h, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		want := webhooks.Event{Source: "github", Key: "0:72d3162e-cc78-11e3-81ab-4c9367dc0958",
			ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "ping", Body: body, SecretIndex: 1,
			BodyHash: githubhook.BodyHash("0", body)}
		if diff := cmp.Diff(want, ev, cmpopts.IgnoreFields(webhooks.Event{}, "Payload")); diff != "" {
			t.Fatalf("event (-want +got):\n%s", diff)
		}
		h.Set(githubhook.HeaderHookID, hookID)
		if ev, _ := p.Verify(h, body, time.Now()); ev.Key != hookID+":72d3162e-cc78-11e3-81ab-4c9367dc0958" {
			t.Errorf("key with a hook id = %q", ev.Key)
		}
	})
	t.Run("FormBody", func(t *testing.T) {
		payload := `{"zen":"Speak like a human & mean it?","hook_id":424242}`
		body := []byte("payload=" + url.QueryEscape(payload))
		h := header("ping", newGUID(), hookID, body)
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		ev, err := githubhook.New([]string{rt.Secret(githubhook.Spec)}, "").Verify(h, body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Body) != payload {
			t.Fatalf("body %q, want the payload field %q", ev.Body, payload)
		}
	})
}

// TestBadInput: every forged or malformed delivery is refused with 400 (or
// 413) and its reason, and nothing is written.
func TestBadInput(t *testing.T) {
	r := rt.New(t)
	good := rt.Fixture(t, "marketplace_purchase.purchased.flat_monthly.json")
	form := []byte("payload=" + url.QueryEscape(string(good)))
	big := []byte(`{"pad":"` + strings.Repeat("a", 1<<20) + `"}`)
	h := func(body []byte, edit func(http.Header)) http.Header {
		hd := header("marketplace_purchase", newGUID(), hookID, body)
		if edit != nil {
			edit(hd)
		}
		return hd
	}
	set := func(k, v string) func(http.Header) { return func(h http.Header) { h.Set(k, v) } }
	del := func(k string) func(http.Header) { return func(h http.Header) { h.Del(k) } }
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		status int
		reason string
	}{
		{"ErrMissingSignature", h(good, del(githubhook.HeaderSignature256)), good, 400, "missing_signature"},
		{"ErrSHA1Only", h(good, func(h http.Header) {
			h.Del(githubhook.HeaderSignature256)
			h.Set(githubhook.HeaderSignatureSHA1, "sha1=7d38cdd689735b008b3c702edd92eea23791c5f6")
		}), good, 400, "sha1_only"},
		{"ErrGarbageSignature", h(good, set(githubhook.HeaderSignature256, "sha256=zzzz")), good, 400, "invalid_header"},
		{"ErrShortSignature", h(good, set(githubhook.HeaderSignature256, "sha256=abcd")), good, 400, "invalid_header"},
		{"ErrOtherAlgorithm", h(good, set(githubhook.HeaderSignature256, "md5="+strings.Repeat("0", 64))), good, 400, "invalid_header"},
		{"ErrWrongSecret", h(good, set(githubhook.HeaderSignature256, sign(good, "not-the-secret"))), good, 400, "no_valid_signature"},
		{"ErrTamperedBody", h(good, nil), []byte(strings.Replace(string(good), "1500", "1", 1)), 400, "no_valid_signature"},
		{"ErrFormSignedOverDecodedJSON", h(good, set("Content-Type", "application/x-www-form-urlencoded")), form, 400, "no_valid_signature"},
		{"ErrMissingEventHeader", h(good, del(githubhook.HeaderEvent)), good, 400, "missing_event_header"},
		{"ErrMissingDeliveryHeader", h(good, del(githubhook.HeaderDelivery)), good, 400, "missing_delivery_header"},
		{"ErrDeliveryNotKeySafe", h(good, set(githubhook.HeaderDelivery, "abc/email.welcome")), good, 400, "invalid_delivery_header"},
		{"ErrUnsupportedContentType", h(good, set("Content-Type", "text/plain")), good, 400, "unsupported_content_type"},
		{"ErrNoContentType", h(good, del("Content-Type")), good, 400, "unsupported_content_type"},
		{"ErrNotAnObject", h([]byte(`[1,2,3]`), nil), []byte(`[1,2,3]`), 400, "malformed_json"},
		{"ErrNotJSON", h([]byte(`this is not json`), nil), []byte(`this is not json`), 400, "malformed_json"},
		{"ErrFormWithoutPayload", h([]byte(`foo=bar`), set("Content-Type", "application/x-www-form-urlencoded")), []byte(`foo=bar`), 400, "malformed_form"},
		{"ErrOverLimit", h(big, nil), big, 413, "body_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := r.Post(t, "/webhooks/github", c.header, c.body)
			if res.Status != c.status || !strings.Contains(res.Body, `"reason":"`+c.reason+`"`) {
				t.Fatalf("status %d %s, want %d with reason %s", res.Status, res.Body, c.status, c.reason)
			}
		})
	}
	for _, table := range []string{"processed_events", "orders"} {
		if n := r.Count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s has %d rows after rejected deliveries", table, n)
		}
	}
	wantCounts(t, r, 0, 0)
}

// TestHandledEvents sends each handled event and checks the contract's
// effect: the order row, the emails and the fulfillment calls.
func TestHandledEvents(t *testing.T) {
	t.Run("PurchasedFlatRateMonthly", func(t *testing.T) {
		r := rt.New(t)
		guid := newGUID()
		deliver(t, r, "marketplace_purchase", guid, rt.Fixture(t, "marketplace_purchase.purchased.flat_monthly.json"), 200)
		want := orderRow{"paid", 1500, "usd", "billing@acme.example", "7:Pro"}
		if o := marketplaceOrder(t, r, "1001"); o != want {
			t.Fatalf("order = %+v, want %+v", o, want)
		}
		wantCounts(t, r, 1, 1)
		wantMail(t, r, 0, "billing@acme.example", "Welcome to the Pro plan")
		req := r.API.Requests()[0].Body
		if req.OrderID == 0 || req.Source != "github_marketplace" || req.ExternalID != "account:1001" ||
			req.AmountCents != 1500 || req.Currency != "usd" || req.CustomerEmail != "billing@acme.example" {
			t.Errorf("fulfillment request = %+v", req)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE $1 AND status = 'done'`, "%"+guid+"%"); n != 3 {
			t.Errorf("done claims holding the GUID = %d, want 3 (event, email.welcome, fulfillment)", n)
		}
	})
	t.Run("PurchasedPerUnitYearly", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "marketplace_purchase.purchased.per_unit_yearly.json")
		want := orderRow{"paid", 5 * 4000, "usd", "", "8:Team"}
		if o := marketplaceOrder(t, r, "2002"); o != want {
			t.Fatalf("order = %+v, want %+v", o, want)
		}
		wantCounts(t, r, 1, 1)
		wantMail(t, r, 0, rt.NotifyEmail, "200.00 USD (yearly)")
	})
	t.Run("PurchasedFormEncoded", func(t *testing.T) {
		r := rt.New(t)
		body := []byte("payload=" + url.QueryEscape(string(rt.Fixture(t, "marketplace_purchase.purchased.flat_monthly.json"))))
		h := header("marketplace_purchase", newGUID(), hookID, body)
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		if res := r.Post(t, "/webhooks/github", h, body); res.Status != 200 {
			t.Fatalf("status %d %s", res.Status, res.Body)
		}
		if o := marketplaceOrder(t, r, "1001"); o.Status != "paid" || o.AmountCents != 1500 {
			t.Fatalf("order = %+v", o)
		}
		wantCounts(t, r, 1, 1)
	})
	t.Run("Changed", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json")
		deliverFixture(t, r, "marketplace_purchase.changed.json")
		want := orderRow{"paid", 5000, "usd", "billing@acme.example", "9:Enterprise"}
		if o := marketplaceOrder(t, r, "1001"); o != want {
			t.Fatalf("order = %+v, want %+v", o, want)
		}
		wantCounts(t, r, 1, 1) // the purchase's only
	})
	t.Run("Cancelled", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json")
		deliverFixture(t, r, "marketplace_purchase.cancelled.json")
		if o := marketplaceOrder(t, r, "1001"); o.Status != "cancelled" {
			t.Fatalf("order status %q, want cancelled", o.Status)
		}
		wantCounts(t, r, 2, 1)
		wantMail(t, r, 1, "billing@acme.example", "Your Pro plan has been cancelled")
	})
	t.Run("CancelledWithoutOrder", func(t *testing.T) {
		// Recorded cancelled, so that its purchase, older, changes nothing
		// if it arrives late (or is replayed).
		r := rt.New(t)
		deliverFixture(t, r, "marketplace_purchase.cancelled.json")
		if o := marketplaceOrder(t, r, "1001"); o.Status != "cancelled" {
			t.Fatalf("order status %q, want recorded cancelled", o.Status)
		}
		deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json")
		if o := marketplaceOrder(t, r, "1001"); o.Status != "cancelled" {
			t.Fatalf("order status %q after the older purchase, want still cancelled", o.Status)
		}
		wantCounts(t, r, 0, 0)
	})
	t.Run("RepurchaseAfterCancel", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json")
		deliverFixture(t, r, "marketplace_purchase.cancelled.json")
		deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json",
			"2026-01-05T00:00:00+00:00", "2026-04-05T00:00:00+00:00")
		if o := marketplaceOrder(t, r, "1001"); o.Status != "paid" {
			t.Fatalf("order status %q, want paid again", o.Status)
		}
		wantCounts(t, r, 3, 2) // welcome, cancellation, welcome; two fulfillments
	})
	t.Run("PendingChange", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json")
		res := deliverFixture(t, r, "marketplace_purchase.pending_change.json")
		if !strings.Contains(res.Body, `"processed"`) {
			t.Errorf("body %s, want outcome processed", res.Body)
		}
		if o := marketplaceOrder(t, r, "1001"); o.Plan != "7:Pro" || o.AmountCents != 1500 {
			t.Fatalf("a pending change changed the order: %+v", o)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_type = 'marketplace_purchase'`); n != 2 {
			t.Errorf("stored events = %d, want 2 (the pending change is recorded)", n)
		}
		wantCounts(t, r, 1, 1)
	})
	t.Run("SponsorshipCreated", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "sponsorship.created.json")
		want := orderRow{"paid", 1000, "usd", "", "$10 a month"}
		if o := sponsorsOrder(t, r, "S_test_sponsorship_1"); o != want {
			t.Fatalf("order = %+v, want %+v", o, want)
		}
		wantCounts(t, r, 1, 0)
		wantMail(t, r, 0, rt.NotifyEmail, "Thank you patron for sponsoring us!")
	})
	t.Run("SponsorshipCancelled", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "sponsorship.created.json")
		deliverFixture(t, r, "sponsorship.cancelled.json")
		if o := sponsorsOrder(t, r, "S_test_sponsorship_1"); o.Status != "cancelled" {
			t.Fatalf("order status %q, want cancelled", o.Status)
		}
		wantCounts(t, r, 2, 0)
		wantMail(t, r, 1, rt.NotifyEmail, "Your sponsorship has been cancelled")
	})
	t.Run("SponsorshipTierChanged", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "sponsorship.created.json")
		res := deliverFixture(t, r, "sponsorship.tier_changed.json")
		if !strings.Contains(res.Body, `"processed"`) {
			t.Errorf("body %s, want outcome processed", res.Body)
		}
		want := orderRow{"paid", 1000, "usd", "", "$10 a month"}
		if o := sponsorsOrder(t, r, "S_test_sponsorship_1"); o != want {
			t.Fatalf("order = %+v, want %+v (tier_changed writes nothing)", o, want)
		}
		wantCounts(t, r, 1, 0)
	})
	t.Run("SponsorshipWithoutNotifyEmail", func(t *testing.T) {
		r := rt.New(t, rt.Configure(func(c *config.Config) { c.NotifyEmail = "" }))
		deliverFixture(t, r, "sponsorship.created.json")
		if o := sponsorsOrder(t, r, "S_test_sponsorship_1"); o.Status != "paid" {
			t.Fatalf("order status %q, want paid", o.Status)
		}
		wantCounts(t, r, 0, 0)
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND status = 'skipped' AND last_error = 'no recipient address'`); n != 1 {
			t.Errorf("skipped step claims = %d, want 1 (a notice with no recipient is recorded skipped)", n)
		}
	})
	t.Run("Ping", func(t *testing.T) {
		r := rt.New(t)
		res := deliverFixture(t, r, "ping.json")
		if !strings.Contains(res.Body, `"processed"`) {
			t.Errorf("body %s, want outcome processed", res.Body)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_type = 'ping' AND outcome = 'processed'`); n != 1 {
			t.Errorf("stored pings = %d, want 1", n)
		}
		if n := r.Count(t, `SELECT count(*) FROM orders`); n != 0 {
			t.Errorf("a ping wrote %d orders", n)
		}
		wantCounts(t, r, 0, 0)
	})
	t.Run("UnhandledEventType", func(t *testing.T) {
		r := rt.New(t)
		res := deliver(t, r, "push", newGUID(), []byte(`{"ref":"refs/heads/main"}`), 200)
		if !strings.Contains(res.Body, `"ignored"`) {
			t.Errorf("body %s, want outcome ignored", res.Body)
		}
	})
	t.Run("UnhandledAction", func(t *testing.T) {
		r := rt.New(t)
		res := deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json", `"action": "purchased"`, `"action": "refunded"`)
		if !strings.Contains(res.Body, `"ignored"`) {
			t.Errorf("body %s, want outcome ignored", res.Body)
		}
	})
	t.Run("NoAccountIDParked", func(t *testing.T) {
		r := rt.New(t)
		guid := newGUID()
		body := rt.Fixture(t, "marketplace_purchase.purchased.flat_monthly.json", `"id": 1001,`, `"id": null,`)
		res := deliver(t, r, "marketplace_purchase", guid, body, 200)
		if !strings.Contains(res.Body, `"parked"`) {
			t.Fatalf("body %s, want outcome parked", res.Body)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key = $1 AND status = 'parked'`, hookID+":"+guid); n != 1 {
			t.Errorf("parked claims = %d, want 1", n)
		}
		if n := r.Count(t, `SELECT count(*) FROM orders`); n != 0 {
			t.Errorf("a parked event wrote %d orders", n)
		}
		deliver(t, r, "marketplace_purchase", guid, body, 200) // its redelivery is acknowledged too
	})
	t.Run("NoNodeIDParked", func(t *testing.T) {
		r := rt.New(t)
		res := deliverFixture(t, r, "sponsorship.created.json", `"node_id": "S_test_sponsorship_1",`, ``)
		if !strings.Contains(res.Body, `"parked"`) {
			t.Fatalf("body %s, want outcome parked", res.Body)
		}
	})
	t.Run("NoActionParked", func(t *testing.T) {
		r := rt.New(t)
		res := deliverFixture(t, r, "sponsorship.created.json", `"action": "created",`, ``)
		if !strings.Contains(res.Body, `"parked"`) {
			t.Fatalf("body %s, want outcome parked", res.Body)
		}
	})
}

// history is one coherent run of handled events.
var history = []string{
	"ping.json",
	"marketplace_purchase.purchased.flat_monthly.json",
	"marketplace_purchase.purchased.per_unit_yearly.json",
	"marketplace_purchase.pending_change.json",
	"marketplace_purchase.changed.json",
	"marketplace_purchase.cancelled.json",
	"sponsorship.created.json",
	"sponsorship.tier_changed.json",
	"sponsorship.cancelled.json",
}

// TestDuplicateDelivery: redeliveries (same GUID, same hook) and copies to
// other hooks (same GUID, another hook id) each answer 200 and leave one
// effect.
func TestDuplicateDelivery(t *testing.T) {
	t.Run("DuplicateDelivery", func(t *testing.T) {
		once, many := rt.New(t), rt.New(t)
		for _, f := range history {
			event, _, _ := strings.Cut(f, ".")
			guid, body := newGUID(), rt.Fixture(t, f)
			deliver(t, once, event, guid, body, 200)
			for range 3 {
				deliver(t, many, event, guid, body, 200)
			}
		}
		if diff := cmp.Diff(once.Snapshot(t), many.Snapshot(t)); diff != "" {
			t.Fatalf("state after three deliveries differs from one (-once +many):\n%s", diff)
		}
		if a, b := len(once.SMTP.Messages()), len(many.SMTP.Messages()); a != b || a == 0 {
			t.Errorf("emails: once %d, three times %d", a, b)
		}
		if a, b := len(once.API.Requests()), len(many.API.Requests()); a != b || a == 0 {
			t.Errorf("fulfillment calls: once %d, three times %d", a, b)
		}
	})
	t.Run("SameGUIDTwoHooks", func(t *testing.T) {
		r := rt.New(t)
		guid, body := newGUID(), rt.Fixture(t, "marketplace_purchase.purchased.flat_monthly.json")
		for _, hook := range []string{"111", "222", "111"} {
			res := r.Post(t, "/webhooks/github", header("marketplace_purchase", guid, hook, body), body)
			if res.Status != 200 {
				t.Fatalf("hook %s: status %d %s", hook, res.Status, res.Body)
			}
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_key LIKE $1`, "%"+guid); n != 2 {
			t.Errorf("event claims = %d, want 2 (one per hook)", n)
		}
		if n := r.Count(t, `SELECT count(*) FROM orders`); n != 1 {
			t.Errorf("orders = %d, want 1", n)
		}
		wantCounts(t, r, 1, 1)
	})
}

// TestConcurrentDelivery sends one delivery by 50 concurrent requests.
func TestConcurrentDelivery(t *testing.T) {
	run := func(t *testing.T, r *rt.Receiver, event string, body []byte) (string, []int) {
		guid := newGUID()
		statuses := make([]int, 50)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range statuses {
			wg.Go(func() {
				<-start
				statuses[i] = r.Post(t, "/webhooks/github", header(event, guid, hookID, body), body).Status
			})
		}
		close(start)
		wg.Wait()
		return guid, statuses
	}
	t.Run("MarketplaceChanged", func(t *testing.T) {
		r := rt.New(t)
		deliverFixture(t, r, "marketplace_purchase.purchased.flat_monthly.json")
		guid, statuses := run(t, r, "marketplace_purchase", rt.Fixture(t, "marketplace_purchase.changed.json"))
		for i, s := range statuses {
			if s != 200 {
				t.Errorf("request %d answered %d", i, s)
			}
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE $1`, "%"+guid+"%"); n != 1 {
			t.Errorf("claims = %d, want 1", n)
		}
		if o := marketplaceOrder(t, r, "1001"); o.Plan != "9:Enterprise" {
			t.Errorf("order = %+v", o)
		}
	})
	t.Run("Purchased", func(t *testing.T) {
		r := rt.New(t)
		_, statuses := run(t, r, "marketplace_purchase", rt.Fixture(t, "marketplace_purchase.purchased.flat_monthly.json"))
		busy := 0
		for i, s := range statuses {
			switch s {
			case 200:
			case 503:
				busy++
			default:
				t.Errorf("request %d answered %d, want 200 or 503", i, s)
			}
		}
		t.Logf("50 concurrent copies: %d answered 200, %d answered 503 (lease held)", len(statuses)-busy, busy)
		if n := r.Count(t, `SELECT count(*) FROM orders`); n != 1 {
			t.Fatalf("orders = %d, want exactly 1", n)
		}
		wantCounts(t, r, 1, 1)
	})
}

// sampleEvent is the X-GitHub-Event of a shared sample, from its file name.
func sampleEvent(name string) string {
	switch {
	case name == "ping.payload.json":
		return "ping"
	case strings.HasPrefix(name, "marketplace_purchase_"):
		return "marketplace_purchase"
	case strings.HasPrefix(name, "sponsorship_"):
		return "sponsorship"
	}
	return ""
}

// sample is the part of a shared sample the conformance test reads.
type sample struct {
	Action   string `json:"action"`
	Purchase *struct {
		Account struct {
			ID int64 `json:"id"`
		} `json:"account"`
	} `json:"marketplace_purchase"`
	Previous    json.RawMessage `json:"previous_marketplace_purchase"`
	Sponsorship *struct {
		NodeID string `json:"node_id"`
	} `json:"sponsorship"`
}

// primer is the purchase that must precede a sample that changes or
// cancels one: built in memory from the sample's previous purchase, or from
// its own, never from a copied file.
func primer(t *testing.T, body []byte, s sample) []byte {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	mp := raw["marketplace_purchase"]
	if len(s.Previous) > 0 {
		mp = s.Previous
	}
	b, err := json.Marshal(map[string]json.RawMessage{"action": json.RawMessage(`"purchased"`), "marketplace_purchase": mp,
		"effective_date": raw["effective_date"]})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// knownSamples are the orders the samples of octokit/webhooks must leave,
// worked out by hand from their fields.
var knownSamples = map[string]orderRow{
	"marketplace_purchase_purchased.payload.json": {"paid", 1000, "usd", "username@email.com", "435:Basic Plan"},
	"marketplace_purchase_changed.payload.json":   {"paid", 10 * 1000, "usd", "username@email.com", "435:Basic Plan"},
	"marketplace_purchase_cancelled.payload.json": {"cancelled", 10000, "usd", "organizationusername@gmail.com", "686:Premium Plan"},
	"sponsorship_created.payload.json":            {"paid", 500, "usd", "", "$5 a month"},
}

// TestSharedSamples signs and sends every sample of /work/shared/samples/
// github (captured by octokit/webhooks, not by us), each to a receiver of
// its own, and checks its contract effect.
func TestSharedSamples(t *testing.T) {
	dir := rt.SharedSamples(t, "github")
	files, _ := filepath.Glob(filepath.Join(dir, "*.payload.json"))
	if len(files) == 0 {
		t.Skipf("no samples in %s", dir)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			event := sampleEvent(name)
			if event == "" {
				t.Fatalf("no event type for sample %s", name)
			}
			var s sample
			if err := json.Unmarshal(body, &s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			r := rt.New(t)
			primed := ""
			if event == "marketplace_purchase" && (s.Action == "changed" || s.Action == "cancelled") {
				deliver(t, r, event, newGUID(), primer(t, body, s), 200)
				before := marketplaceOrder(t, r, fmt.Sprint(s.Purchase.Account.ID))
				primed = fmt.Sprintf("after a purchase built from it (%+v); ", before)
			}
			emails, calls := len(r.SMTP.Messages()), len(r.API.Requests())
			res := deliver(t, r, event, newGUID(), body, 200)
			emails, calls = len(r.SMTP.Messages())-emails, len(r.API.Requests())-calls

			var effect string
			switch {
			case event == "ping" || s.Action == "pending_tier_change":
				if n := r.Count(t, `SELECT count(*) FROM orders`); n != 0 {
					t.Fatalf("%s %s wrote %d orders", event, s.Action, n)
				}
				effect = "no order written"
			case event == "marketplace_purchase":
				account := fmt.Sprint(s.Purchase.Account.ID)
				o := marketplaceOrder(t, r, account)
				effect = fmt.Sprintf("order account:%s %+v", account, o)
				if want, ok := knownSamples[name]; ok && o != want {
					t.Errorf("order = %+v, want %+v", o, want)
				}
			case event == "sponsorship":
				o := sponsorsOrder(t, r, s.Sponsorship.NodeID)
				effect = fmt.Sprintf("order %s %+v", s.Sponsorship.NodeID, o)
				if want, ok := knownSamples[name]; ok && o != want {
					t.Errorf("order = %+v, want %+v", o, want)
				}
			}
			wantSteps := map[string][2]int{"purchased": {1, 1}, "cancelled": {1, 0}, "created": {1, 0}}[s.Action]
			if emails != wantSteps[0] || calls != wantSteps[1] {
				t.Errorf("emails %d, fulfillment calls %d; want %d, %d", emails, calls, wantSteps[0], wantSteps[1])
			}
			t.Logf("%s: X-GitHub-Event %s, action %q -> %d %s; %s%s; emails %d, fulfillment calls %d",
				name, event, s.Action, res.Status, strings.TrimSpace(res.Body), primed, effect, emails, calls)
		})
	}
}

// sign is X-Hub-Signature-256 of body with secret.
func sign(body []byte, secret string) string {
	return "sha256=" + hex.EncodeToString(githubhook.Sign(body, secret))
}
