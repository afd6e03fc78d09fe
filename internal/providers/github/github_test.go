package github_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// hookID is the X-GitHub-Hook-ID of the test deliveries.
const hookID = "424242"

// Names of the testdata files, as the suite's events. An event's type is
// the part of its name before the first dot.
const (
	ping         = "ping.json"
	purchased    = "marketplace_purchase.purchased.flat_monthly.json"
	perUnit      = "marketplace_purchase.purchased.per_unit_yearly.json"
	pending      = "marketplace_purchase.pending_change.json"
	changed      = "marketplace_purchase.changed.json"
	cancelled    = "marketplace_purchase.cancelled.json"
	sponsored    = "sponsorship.created.json"
	tierChanged  = "sponsorship.tier_changed.json"
	unsponsored  = "sponsorship.cancelled.json"
	repurchased  = "marketplace_purchase.purchased.april"
	sameBodyCopy = "marketplace_purchase.purchased.copy"
	// The same body under another hook id and GUID.
	otherHookCopy = "marketplace_purchase.purchased.copy.otherhook"
	// Signed bodies sent first under the hook id and GUID of purchased
	// (a name ending in .squat takes its GUID), to take its key.
	pingSquat     = "ping.squat"
	pushSquat     = "push.squat"
	purchaseSquat = "marketplace_purchase.per_unit.squat"
	// A purchase whose JSON repeats its plan: the second says it costs one
	// cent.
	repeatedPurchase = "marketplace_purchase.repeated"
)

// otherHookID is the hook id of a name ending in .otherhook.
const otherHookID = "434343"

// history is one coherent run of handled events (the fuzz target's seeds too).
var history = []string{ping, purchased, perUnit, pending, changed, cancelled, sponsored, tierChanged, unsponsored}

const (
	proPaid       = "github_marketplace account:1001 paid 1500 usd billing@acme.example 7:Pro"
	proCancelled  = "github_marketplace account:1001 cancelled 1500 usd billing@acme.example 7:Pro"
	sponsorPaid   = "github_sponsors S_test_sponsorship_1 paid 1000 usd - $10 a month"
	proCall       = "github_marketplace account:1001 1500 usd billing@acme.example"
	welcomeEmail  = "email.welcome=done"
	fulfilledStep = "fulfillment=done"
)

var (
	welcome      = cf.Mail{To: "billing@acme.example", Contains: "Welcome to the Pro plan"}
	cancellation = cf.Mail{To: "billing@acme.example", Contains: "Your Pro plan has been cancelled"}
	thanks       = cf.Mail{To: rt.NotifyEmail, Contains: "Thank you patron for sponsoring us!"}
)

var suite = cf.Suite{
	Spec:      github.Spec,
	Providers: providers.List(),
	Header:    header,
	View: []string{`SELECT format('%s %s %s %s %s %s %s', source, external_id, status, amount_cents, currency,
       coalesce(customer_email, '-'), coalesce(plan, '-')) FROM orders ORDER BY 1`},
	Events: map[string]cf.Event{
		repurchased:                       {Fixture: purchased, Replace: []string{"2026-01-05T00:00:00+00:00", "2026-04-05T00:00:00+00:00"}},
		sameBodyCopy:                      {Fixture: purchased},
		"marketplace_purchase.form":       {Body: []byte("payload=" + url.QueryEscape(string(fixture(purchased))))},
		"marketplace_purchase.refunded":   {Fixture: purchased, Replace: []string{`"action": "purchased"`, `"action": "refunded"`}},
		"marketplace_purchase.no_account": {Fixture: purchased, Replace: []string{`"id": 1001,`, `"id": null,`}},
		"sponsorship.no_node_id":          {Fixture: sponsored, Replace: []string{`"node_id": "S_test_sponsorship_1",`, ``}},
		"sponsorship.no_action":           {Fixture: sponsored, Replace: []string{`"action": "created",`, ``}},
		"push":                            {Body: []byte(`{"ref":"refs/heads/main"}`)},
		otherHookCopy:                     {Fixture: purchased},
		pingSquat:                         {Body: []byte(`{"zen":"Keep it logically awesome.","hook_id":` + hookID + `,"hook":{"id":` + hookID + `}}`)},
		pushSquat:                         {Body: []byte(`{"ref":"refs/heads/squat"}`)},
		purchaseSquat:                     {Fixture: perUnit},
		repeatedPurchase: {Fixture: purchased, Replace: []string{`"bullets": ["Everything"]`,
			`"bullets": ["Everything"]},` + "\n" + `    "plan": {"monthly_price_in_cents": 1`}},
	},
	VerifyEvent: purchased,
	Verify: []cf.Request{
		{Name: "ErrSHA1Only", Edit: func(h http.Header, _ []byte) {
			h.Del(github.HeaderSignature256)
			h.Set(github.HeaderSignatureSHA1, "sha1=7d38cdd689735b008b3c702edd92eea23791c5f6")
		}, Reason: "sha1_only"},
		{Name: "ErrGarbageSignature", Edit: set(github.HeaderSignature256, "sha256=zzzz"), Reason: "invalid_header"},
		{Name: "ErrShortSignature", Edit: set(github.HeaderSignature256, "sha256=abcd"), Reason: "invalid_header"},
		{Name: "ErrOtherAlgorithm", Edit: set(github.HeaderSignature256, "md5="+strings.Repeat("0", 64)), Reason: "invalid_header"},
		{Name: "ErrFormSignedOverDecodedJSON", Body: []byte("payload=" + url.QueryEscape(string(fixture(purchased)))),
			Signed: fixture(purchased), Edit: set("Content-Type", "application/x-www-form-urlencoded"), Reason: "no_valid_signature"},
		{Name: "ErrMissingEventHeader", Edit: del(github.HeaderEvent), Reason: "missing_event_header"},
		{Name: "ErrMissingDeliveryHeader", Edit: del(github.HeaderDelivery), Reason: "missing_delivery_header"},
		{Name: "ErrDeliveryNotKeySafe", Edit: set(github.HeaderDelivery, "abc/email.welcome"), Reason: "invalid_delivery_header"},
		{Name: "ErrUnsupportedContentType", Edit: set("Content-Type", "text/plain"), Reason: "unsupported_content_type"},
		{Name: "ErrNoContentType", Edit: del("Content-Type"), Reason: "unsupported_content_type"},
		{Name: "ErrNotAnObject", Body: []byte(`[1,2,3]`), Reason: "malformed_json"},
		{Name: "ErrNotJSON", Body: []byte(`this is not json`), Reason: "malformed_json"},
		{Name: "ErrFormWithoutPayload", Body: []byte(`foo=bar`), Edit: set("Content-Type", "application/x-www-form-urlencoded"), Reason: "malformed_form"},
		{Name: "ErrOverLimit", Body: []byte(`{"pad":"` + strings.Repeat("a", 1<<20) + `"}`), Status: 413, Reason: "body_too_large"},
		{Name: "ErrEventTypeMismatch", Edit: set(github.HeaderEvent, "sponsorship"), Reason: "event_type_mismatch"},
		{Name: "ErrPingHookIDMismatch", Body: fixture(ping), Edit: set(github.HeaderEvent, "ping"), Reason: "event_type_mismatch"},
	},
	Cases: []cf.Case{
		{Name: "PurchasedFlatRateMonthly", Deliver: purchased, Want: []string{proPaid}, Steps: []string{welcomeEmail, fulfilledStep},
			Emails: []cf.Mail{welcome}, Calls: []string{proCall}},
		{Name: "PurchasedPerUnitYearly", Deliver: perUnit, Want: []string{"github_marketplace account:2002 paid 20000 usd - 8:Team"},
			Steps: []string{welcomeEmail, fulfilledStep}, Emails: []cf.Mail{{To: rt.NotifyEmail, Contains: "200.00 USD (yearly)"}},
			Calls: []string{"github_marketplace account:2002 20000 usd -"}},
		{Name: "PurchasedFormEncoded", Deliver: "marketplace_purchase.form", Want: []string{proPaid},
			Steps: []string{welcomeEmail, fulfilledStep}, Emails: []cf.Mail{welcome}, Calls: []string{proCall}},
		{Name: "Changed", Given: []string{purchased}, Deliver: changed,
			Want:   []string{"github_marketplace account:1001 paid 5000 usd billing@acme.example 9:Enterprise"},
			Emails: []cf.Mail{welcome}, Calls: []string{proCall}},
		{Name: "PendingChange", Given: []string{purchased}, Deliver: pending, Want: []string{proPaid},
			Emails: []cf.Mail{welcome}, Calls: []string{proCall},
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_type = 'marketplace_purchase'`, 2)},
		{Name: "Cancelled", Given: []string{purchased}, Deliver: cancelled, Want: []string{proCancelled},
			Steps: []string{"email.cancellation=done"}, Emails: []cf.Mail{welcome, cancellation}, Calls: []string{proCall}},
		// Recorded cancelled, so that its purchase, older, changes nothing if
		// it arrives late or is replayed.
		{Name: "CancelledWithoutOrder", Deliver: cancelled, Want: []string{proCancelled}},
		{Name: "OlderPurchaseAfterCancel", Given: []string{cancelled}, Deliver: purchased, Want: []string{proCancelled}},
		{Name: "RepurchaseAfterCancel", Given: []string{purchased, cancelled}, Deliver: repurchased, Want: []string{proPaid},
			Steps:  []string{welcomeEmail, fulfilledStep},
			Emails: []cf.Mail{welcome, cancellation, welcome}, Calls: []string{proCall, proCall}},
		{Name: "OlderCancelAfterRepurchase", Given: []string{repurchased}, Deliver: cancelled, Want: []string{proPaid},
			Emails: []cf.Mail{welcome}, Calls: []string{proCall}},
		// GitHub signs the body only: the same body under a new GUID, or a
		// new hook id and GUID, is a copy; it stores nothing.
		{Name: "SameBodyNewGUID", Given: []string{purchased}, Deliver: sameBodyCopy, Outcome: webhooks.OutcomeDuplicate,
			Want: []string{proPaid}, Emails: []cf.Mail{welcome}, Calls: []string{proCall},
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event'`, 1)},
		{Name: "SameBodyNewHookAndGUID", Given: []string{purchased}, Deliver: otherHookCopy, Outcome: webhooks.OutcomeDuplicate,
			Want: []string{proPaid}, Emails: []cf.Mail{welcome}, Calls: []string{proCall},
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event'`, 1)},
		// No signed body takes the key of another: each squatter, sent
		// first under the purchase's hook id and GUID, is an event of its
		// own, and the purchase is still claimed and acted on.
		{Name: "PurchaseAfterPingSquat", Given: []string{pingSquat}, Deliver: purchased, Want: []string{proPaid},
			Steps: []string{welcomeEmail, fulfilledStep}, Emails: []cf.Mail{welcome}, Calls: []string{proCall},
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_id = '`+guid(purchased)+`'`, 2)},
		{Name: "PurchaseAfterPushSquat", Given: []string{pushSquat}, Deliver: purchased, Want: []string{proPaid},
			Steps: []string{welcomeEmail, fulfilledStep}, Emails: []cf.Mail{welcome}, Calls: []string{proCall}},
		// A signed purchase of another account under the purchase's GUID
		// makes its own order (orders.provider_event_id is the event's key,
		// not the GUID) and blocks nobody's.
		{Name: "PurchaseAfterPurchaseSquat", Given: []string{purchaseSquat}, Deliver: purchased,
			Want:   []string{proPaid, "github_marketplace account:2002 paid 20000 usd - 8:Team"},
			Steps:  []string{welcomeEmail, fulfilledStep},
			Emails: []cf.Mail{{To: rt.NotifyEmail, Contains: "200.00 USD (yearly)"}, welcome},
			Calls:  []string{"github_marketplace account:2002 20000 usd -", proCall}},
		// A body that repeats a member name is kept and parked, never read.
		{Name: "RepeatedMemberNameParked", Deliver: repeatedPurchase, Outcome: webhooks.OutcomeParked,
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event' AND status = 'parked' AND body IS NOT NULL
  AND last_error LIKE 'repeated member name "plan" in the object at "/marketplace_purchase"%'`, 1)},
		{Name: "SponsorshipCreated", Deliver: sponsored, Want: []string{sponsorPaid}, Steps: []string{"email.notice=done"},
			Emails: []cf.Mail{thanks}},
		{Name: "SponsorshipCancelled", Given: []string{sponsored}, Deliver: unsponsored,
			Want:  []string{"github_sponsors S_test_sponsorship_1 cancelled 1000 usd - $10 a month"},
			Steps: []string{"email.notice=done"}, Emails: []cf.Mail{thanks, {To: rt.NotifyEmail, Contains: "Your sponsorship has been cancelled"}}},
		{Name: "SponsorshipTierChanged", Given: []string{sponsored}, Deliver: tierChanged, Want: []string{sponsorPaid},
			Emails: []cf.Mail{thanks}},
		{Name: "SponsorshipWithoutNotifyEmail", Options: []rt.Option{rt.Configure(func(c *config.Config) { c.NotifyEmail = "" })},
			Deliver: sponsored, Want: []string{sponsorPaid}, Steps: []string{"email.notice=skipped"}},
		{Name: "Ping", Deliver: ping,
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_type = 'ping' AND outcome = 'processed'`, 1)},
		{Name: "UnhandledEventType", Deliver: "push", Outcome: webhooks.OutcomeIgnored},
		{Name: "UnhandledAction", Deliver: "marketplace_purchase.refunded", Outcome: webhooks.OutcomeIgnored},
		{Name: "NoAccountIDParked", Deliver: "marketplace_purchase.no_account", Outcome: webhooks.OutcomeParked,
			Check: func(t *testing.T, r *rt.Receiver, _ rt.Response) {
				count(`SELECT count(*) FROM processed_events WHERE status = 'parked'`, 1)(t, r, rt.Response{})
				if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_id = $1`, guid("marketplace_purchase.no_account")); n != 1 {
					t.Errorf("parked events under its GUID = %d, want 1", n)
				}
			}},
		{Name: "NoNodeIDParked", Deliver: "sponsorship.no_node_id", Outcome: webhooks.OutcomeParked},
		{Name: "NoActionParked", Deliver: "sponsorship.no_action", Outcome: webhooks.OutcomeParked},
	},
	History: history,
	Sequences: map[string][]string{
		"Marketplace": {purchased, cancelled},
		"Sponsorship": {sponsored, unsponsored},
	},
	Samples: &cf.Samples{Provider: "github", Glob: "*.payload.json", Header: sampleHeader, Expect: map[string]cf.Sample{
		"ping.payload.json": {},
		"marketplace_purchase_purchased.payload.json": {
			Want:   []string{"github_marketplace account:18404719 paid 1000 usd username@email.com 435:Basic Plan"},
			Emails: []cf.Mail{{To: "username@email.com", Contains: "Welcome to the Basic Plan plan"}},
			Calls:  []string{"github_marketplace account:18404719 1000 usd username@email.com"}},
		"marketplace_purchase_changed.payload.json": {Prime: primer,
			Want:   []string{"github_marketplace account:18404719 paid 10000 usd username@email.com 435:Basic Plan"},
			Emails: []cf.Mail{{To: "username@email.com", Contains: "Welcome"}},
			Calls:  []string{"github_marketplace account:18404719 1000 usd username@email.com"}},
		"marketplace_purchase_cancelled.payload.json": {Prime: primer,
			Want: []string{"github_marketplace account:28536653 cancelled 10000 usd organizationusername@gmail.com 686:Premium Plan"},
			Emails: []cf.Mail{{To: "organizationusername@gmail.com", Contains: "Welcome"},
				{To: "organizationusername@gmail.com", Contains: "Premium Plan plan has been cancelled"}},
			Calls: []string{"github_marketplace account:28536653 10000 usd organizationusername@gmail.com"}},
		"sponsorship_created.payload.json": {Want: []string{"github_sponsors MDExOlNwb25zb3JzaGlwMQ== paid 500 usd - $5 a month"},
			Emails: []cf.Mail{{To: rt.NotifyEmail, Contains: "monalisa"}}},
		"sponsorship_downgraded.payload.json": {},
	}},
}

func TestConformance(t *testing.T) { cf.Run(t, suite) }

// header is the GitHub headers of a delivery of the named event: its type,
// a delivery GUID of its own (a squatter's: purchased's), and the hook id (a
// ping's, from its body; a name ending in .otherhook, otherHookID).
func header(name string, body []byte) http.Header {
	event, _, _ := strings.Cut(name, ".")
	h := http.Header{}
	h.Set(github.HeaderEvent, event)
	h.Set(github.HeaderDelivery, guid(name))
	if strings.HasSuffix(name, ".squat") {
		h.Set(github.HeaderDelivery, guid(purchased))
	}
	h.Set(github.HeaderHookID, hookID)
	if strings.HasSuffix(name, ".otherhook") {
		h.Set(github.HeaderHookID, otherHookID)
	}
	if event == "ping" {
		var p struct {
			HookID json.Number `json:"hook_id"`
		}
		_ = json.Unmarshal(body, &p)
		h.Set(github.HeaderHookID, p.HookID.String())
	}
	if strings.HasSuffix(name, ".form") {
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return h
}

// guid is the delivery GUID of a name, as GitHub makes them.
func guid(name string) string {
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:16])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// sampleHeader names a shared sample's event type from its file name.
func sampleHeader(name string, body []byte) http.Header {
	event, _, _ := strings.Cut(strings.TrimSuffix(name, ".payload.json"), "_")
	if strings.HasPrefix(name, "marketplace_purchase_") {
		event = "marketplace_purchase"
	}
	return header(event+"."+name, body)
}

// primer is the purchase that precedes a sample that changes or cancels
// one: built in memory from its previous purchase, or its own.
func primer(tb testing.TB, body []byte) []byte {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		tb.Fatal(err)
	}
	mp := raw["marketplace_purchase"]
	if prev := raw["previous_marketplace_purchase"]; len(prev) > 0 {
		mp = prev
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"action": json.RawMessage(`"purchased"`), "marketplace_purchase": mp,
		"effective_date": raw["effective_date"]})
	return b
}

// fixture reads a testdata file when the suite is built.
func fixture(name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return b
}

func set(k, v string) func(http.Header, []byte) { return func(h http.Header, _ []byte) { h.Set(k, v) } }
func del(k string) func(http.Header, []byte)    { return func(h http.Header, _ []byte) { h.Del(k) } }

func count(sql string, want int) func(*testing.T, *rt.Receiver, rt.Response) {
	return func(t *testing.T, r *rt.Receiver, _ rt.Response) {
		if n := r.Count(t, sql); n != want {
			t.Errorf("%s = %d, want %d", sql, n, want)
		}
	}
}

// repeat returns the JSON object body with member appended as its last.
func repeat(body []byte, member string) []byte {
	b := bytes.TrimRight(body, " \t\r\n")
	return append(append(bytes.Clone(b[:len(b)-1]), ","+member+"}"...), '\n')
}

// TestSameGUIDManyHooks: one GUID is shared by every hook that receives the
// event. The same body, whichever hook, GUID or content type it comes
// with, is one event: one claim, one order, one email and one call, and
// every later copy is answered duplicate. Bodies that differ (an App's
// hook adds its installation) are an event each, with one order between
// them.
func TestSameGUIDManyHooks(t *testing.T) {
	post := func(t *testing.T, r *rt.Receiver, body []byte, hook, guid, ctype string) string {
		t.Helper()
		h := rt.Signed(github.Spec, body, header(purchased, body))
		h.Set(github.HeaderHookID, hook)
		h.Set(github.HeaderDelivery, guid)
		h.Set("Content-Type", ctype)
		res := r.Post(t, "/webhooks/github", h, body)
		if res.Status != 200 {
			t.Fatalf("hook %s: status %d %s", hook, res.Status, res.Body)
		}
		return string(cf.Outcome(res))
	}
	events := func(t *testing.T, r *rt.Receiver, want int) {
		t.Helper()
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_key LIKE $1`, "%"+guid(purchased)+"%"); n != want {
			t.Errorf("event claims = %d, want %d", n, want)
		}
		if diff := cmp.Diff([]string{proCall}, cf.Calls(r)); diff != "" || len(r.SMTP.Messages()) != 1 {
			t.Errorf("emails %d, calls (-want +got):\n%s", len(r.SMTP.Messages()), diff)
		}
	}
	t.Run("SameBody", func(t *testing.T) {
		r := rt.New(t, providers.List())
		body := fixture(purchased)
		form := []byte("payload=" + url.QueryEscape(string(body)))
		var got []string
		for _, d := range []struct {
			hook, guid, ctype string
			body              []byte
		}{
			{"111", guid(purchased), "application/json", body},
			{"222", guid(purchased), "application/json", body},
			{"111", guid(purchased), "application/json", body},
			{"333", "a-guid-of-its-own", "application/json", body},
			{"222", guid(purchased), "application/x-www-form-urlencoded", form},
		} {
			got = append(got, post(t, r, d.body, d.hook, d.guid, d.ctype))
		}
		if diff := cmp.Diff([]string{"processed", "duplicate", "duplicate", "duplicate", "duplicate"}, got); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
		events(t, r, 1)
	})
	t.Run("BodiesThatDiffer", func(t *testing.T) {
		r := rt.New(t, providers.List())
		body := fixture(purchased)
		app := repeat(body, `"installation": {"id": 7}`)
		got := []string{post(t, r, body, "111", guid(purchased), "application/json"),
			post(t, r, app, "222", guid(purchased), "application/json")}
		if diff := cmp.Diff([]string{"processed", "processed"}, got); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
		events(t, r, 2)
	})
}

// TestVerify calls Verify directly, starting with GitHub's documented test
// vector.
func TestVerify(t *testing.T) {
	const (
		vectorSecret = "It's a Secret to Everybody"
		vectorBody   = "Hello, World!"
		vectorSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	reason := func(err error) string {
		var rej *webhooks.RejectError
		if errors.As(err, &rej) {
			return rej.Reason
		}
		return fmt.Sprintf("not a rejection: %v", err)
	}
	h := func(event, hook, sig string) http.Header {
		h := header(event, nil)
		h.Set("Content-Type", "application/json")
		h.Set(github.HeaderDelivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		h.Set(github.HeaderHookID, hook)
		h.Set(github.HeaderSignature256, sig)
		return h
	}
	if got := "sha256=" + hex.EncodeToString(github.Sign([]byte(vectorBody), vectorSecret)); got != vectorSig {
		t.Fatalf("Sign = %s, want the documented %s", got, vectorSig)
	}
	// The vector's signature passes; its body, not a JSON object, is then refused.
	for _, c := range []struct {
		name    string
		secrets []string
		want    string
	}{
		{"DocumentedTestVector", []string{vectorSecret}, "malformed_json"},
		{"DocumentedTestVectorAmongRotatedSecrets", []string{"the-next-secret", vectorSecret}, "malformed_json"},
		{"ErrDocumentedTestVectorWrongSecret", []string{"It's a secret to everybody"}, "no_valid_signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := github.New(c.secrets, "").Verify(h("ping", "", vectorSig), []byte(vectorBody), time.Now())
			if got := reason(err); got != c.want {
				t.Fatalf("reason %q, want %q", got, c.want)
			}
		})
	}
	t.Run("SecretIndexAndKey", func(t *testing.T) {
		body := []byte(`{"zen":"Design for failure.","hook_id":424242}`)
		p := github.New([]string{"the-next-secret", rt.Secret(github.Spec)}, "")
		sig := "sha256=" + hex.EncodeToString(github.Sign(body, rt.Secret(github.Spec)))
		ev, err := p.Verify(h("ping", "", sig), body, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		want := webhooks.Event{Source: "github", Key: "0:72d3162e-cc78-11e3-81ab-4c9367dc0958:" + hex.EncodeToString(sum[:8]),
			ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "ping", Body: body, SecretIndex: 1, BodyHash: sum[:]}
		if diff := cmp.Diff(want, ev, cmpopts.IgnoreFields(webhooks.Event{}, "Payload")); diff != "" {
			t.Fatalf("event (-want +got):\n%s", diff)
		}
		if ev, _ := p.Verify(h("ping", hookID, sig), body, time.Now()); ev.Key != hookID+":72d3162e-cc78-11e3-81ab-4c9367dc0958:"+hex.EncodeToString(sum[:8]) {
			t.Errorf("key with a hook id = %q", ev.Key)
		}
	})
	t.Run("FormBody", func(t *testing.T) {
		payload := `{"zen":"Speak like a human & mean it?","hook_id":424242}`
		body := []byte("payload=" + url.QueryEscape(payload))
		hd := h("ping", hookID, "sha256="+hex.EncodeToString(github.Sign(body, rt.Secret(github.Spec))))
		hd.Set("Content-Type", "application/x-www-form-urlencoded")
		ev, err := github.New([]string{rt.Secret(github.Spec)}, "").Verify(hd, body, time.Now())
		if err != nil || string(ev.Body) != payload {
			t.Fatalf("body %q, %v; want the payload field %q", ev.Body, err, payload)
		}
	})
}
