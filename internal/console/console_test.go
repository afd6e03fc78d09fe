package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	consolepkg "github.com/paywebhooks/receiver/internal/console"
	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// token is the test console's ADMIN_TOKEN.
const token = "console-test-token-0123456789abcdef"

// wantCSP is the policy every answer must carry.
const wantCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// console is a receiver with its console served by the test.
type console struct {
	*rt.Receiver
	URL string
}

func newConsole(t testing.TB, opts ...rt.Option) *console {
	t.Helper()
	r := rt.New(t, providers.List(), append([]rt.Option{rt.Env("ADMIN_ADDR", "127.0.0.1:0"), rt.Env("ADMIN_TOKEN", token)}, opts...)...)
	h := r.Server.ConsoleHandler()
	if h == nil {
		t.Fatal("no console handler with ADMIN_ADDR set")
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &console{Receiver: r, URL: ts.URL}
}

// page is one answer of the console.
type page struct {
	Status int
	Header http.Header
	Body   string
}

// client is a way of calling the console: none, a bearer token, or a
// browser's cookie jar after signing in.
type client struct {
	c      *console
	http   *http.Client
	bearer string
	xff    string // X-Forwarded-For: a client behind a proxy (TRUSTED_PROXIES) at this address
	// session is a session cookie sent as it is, not from a jar.
	session string
}

// from is the same client sent through a proxy on behalf of addr.
func (cl *client) from(addr string) *client {
	c := *cl
	c.xff = addr
	return &c
}

func (c *console) anonymous() *client {
	return &client{c: c, http: &http.Client{CheckRedirect: noRedirect}}
}

func (c *console) bearer(tok string) *client {
	return &client{c: c, http: &http.Client{CheckRedirect: noRedirect}, bearer: tok}
}

// browser signs in with the form, as a person would, and keeps the cookie.
func (c *console) browser(t *testing.T) *client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	cl := &client{c: c, http: &http.Client{Jar: jar, CheckRedirect: noRedirect}}
	res := cl.post(t, "/login", url.Values{"token": {token}, "next": {"/events"}}, nil)
	if res.Status != http.StatusSeeOther || res.Header.Get("Location") != "/events" {
		t.Fatalf("sign in: %d %s, body %s", res.Status, res.Header.Get("Location"), res.Body)
	}
	return cl
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (cl *client) do(t *testing.T, req *http.Request) page {
	t.Helper()
	if cl.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+cl.bearer)
	}
	if cl.xff != "" {
		req.Header.Set("X-Forwarded-For", cl.xff)
	}
	if cl.session != "" {
		req.AddCookie(&http.Cookie{Name: "console_session", Value: cl.session})
	}
	res, err := cl.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return page{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

func (cl *client) get(t *testing.T, path string) page {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, cl.c.URL+path, nil)
	return cl.do(t, req)
}

func (cl *client) getJSON(t *testing.T, path string, v any) page {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, cl.c.URL+path, nil)
	req.Header.Set("Accept", "application/json")
	p := cl.do(t, req)
	if p.Status == http.StatusOK {
		if err := json.Unmarshal([]byte(p.Body), v); err != nil {
			t.Fatalf("GET %s: not JSON: %v\n%s", path, err, p.Body)
		}
	}
	return p
}

// post sends a form, with extra headers.
func (cl *client) post(t *testing.T, path string, form url.Values, header http.Header) page {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, cl.c.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	return cl.do(t, req)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page at path, as its form carries it.
func (cl *client) csrf(t *testing.T, path string) string {
	t.Helper()
	p := cl.get(t, path)
	m := csrfInput.FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || m == nil {
		t.Fatalf("GET %s: %d, no CSRF token in\n%s", path, p.Status, p.Body)
	}
	return m[1]
}

func mustStatus(t *testing.T, what string, p page, want int) {
	t.Helper()
	if p.Status != want {
		t.Fatalf("%s: status %d, want %d; body:\n%s", what, p.Status, want, p.Body)
	}
}

func mustContain(t *testing.T, what string, p page, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(p.Body, w) {
			t.Errorf("%s lacks %q; body:\n%s", what, w, p.Body)
		}
	}
}

// ---------------------------------------------------------------------------
// Events the tests deliver.

func checkout(id string) []byte {
	return fmt.Appendf(nil, `{"id":"evt_%[1]s","object":"event","api_version":"2023-10-16","type":"checkout.session.completed",
"data":{"object":{"id":"cs_%[1]s","object":"checkout.session","payment_status":"paid","amount_total":2500,"currency":"usd",
"payment_intent":"pi_%[1]s","customer_details":{"email":"%[1]s@example.com","name":"Buyer %[1]s"}}}}`, id)
}

func invoiceEvent(id, typ, invoice, email string) []byte {
	return fmt.Appendf(nil, `{"id":"evt_%[1]s","object":"event","api_version":"2023-10-16","type":"%[2]s",
"data":{"object":{"id":"%[3]s","object":"invoice","status":"paid","amount_due":900,"amount_paid":900,"currency":"eur",
"customer_email":"%[4]s","attempt_count":1}}}`, id, typ, invoice, email)
}

func purchase(guid string, account int) (body []byte, header http.Header) {
	body = fmt.Appendf(nil, `{"action":"purchased","effective_date":"2026-01-05T00:00:00+00:00",
"sender":{"login":"admin","id":501,"type":"User"},
"marketplace_purchase":{"account":{"type":"Organization","id":%d,"login":"org%d","organization_billing_email":"billing%d@org.example"},
"billing_cycle":"monthly","unit_count":1,"on_free_trial":false,
"plan":{"id":7,"name":"Pro","monthly_price_in_cents":1500,"yearly_price_in_cents":15000,"price_model":"FLAT_RATE","has_free_trial":false,"unit_name":null}}}`,
		account, account, account)
	return body, http.Header{"X-Github-Event": {"marketplace_purchase"}, "X-Github-Delivery": {guid},
		"X-Github-Hook-Id": {"77"}, "Content-Type": {"application/json"}}
}

// ghKey is the event key of world's GitHub purchase: its hook id and GUID,
// then a hash of its body.
var ghKey = func() string {
	const guid = "6c1d2f7e-0000-4000-8000-00000000aaaa"
	body, _ := purchase(guid, 424242)
	return github.Key("77", guid, github.BodyHash(body))
}()

func mustOK(t *testing.T, res rt.Response) {
	t.Helper()
	if res.Status != http.StatusOK {
		t.Fatalf("delivery answered %d: %s", res.Status, res.Body)
	}
}

// world delivers a small history: two done checkouts, an invoice created
// then paid, a GitHub purchase, and a checkout whose fulfillment call the
// API refuses (422), which parks that step.
func world(t *testing.T, c *console) {
	t.Helper()
	mustOK(t, c.Deliver(t, stripe.Spec, checkout("done1"), nil))
	mustOK(t, c.Deliver(t, stripe.Spec, checkout("done2"), nil))
	mustOK(t, c.Deliver(t, stripe.Spec, invoiceEvent("inv_created", "invoice.created", "in_777", "payer@example.com"), nil))
	mustOK(t, c.Deliver(t, stripe.Spec, invoiceEvent("inv_paid", "invoice.paid", "in_777", "payer@example.com"), nil))
	body, h := purchase("6c1d2f7e-0000-4000-8000-00000000aaaa", 424242)
	mustOK(t, c.Deliver(t, github.Spec, body, h))
	c.API.SetStatus(422)
	mustOK(t, c.Deliver(t, stripe.Spec, checkout("bad"), nil))
	c.API.SetStatus(0)
}

type listed struct {
	Events []struct {
		Key   string `json:"key"`
		State string `json:"state"`
	} `json:"events"`
	Next string `json:"next"`
}

func (l listed) keys() []string {
	var out []string
	for _, e := range l.Events {
		out = append(out, e.Key)
	}
	return out
}

// ---------------------------------------------------------------------------

// TestAuth: every page refuses a request without the token, with a wrong
// bearer token or a forged cookie; the sign-in form sets a cookie that is
// HttpOnly and SameSite=Strict; sign-out ends the session; nothing
// rendered carries a secret. (Wrong tokens come from addresses of their
// own, through the test's "proxy": from one client, they would lock it
// out.)
func TestAuth(t *testing.T) {
	c := newConsole(t, rt.Env("TRUSTED_PROXIES", "127.0.0.1"))
	world(t, c)
	paths := []string{"/", "/events", "/events?q=cs_bad", "/events/evt_bad", "/events/evt_bad/replay",
		"/events/evt_bad/steps/fulfillment/run", "/replay-parked"}

	t.Run("NoToken", func(t *testing.T) {
		for _, p := range paths {
			res := c.anonymous().get(t, p)
			mustStatus(t, "GET "+p, res, http.StatusUnauthorized)
			mustContain(t, "GET "+p, res, `name="token"`)
			if got := res.Header.Get("WWW-Authenticate"); got != `Bearer realm="console"` {
				t.Errorf("GET %s: WWW-Authenticate %q", p, got)
			}
			if strings.Contains(res.Body, "evt_bad") && p == "/events" {
				t.Errorf("GET %s shows events to a stranger", p)
			}
		}
		res := c.anonymous().post(t, "/events/evt_bad/replay", nil, nil)
		mustStatus(t, "POST replay", res, http.StatusUnauthorized)
	})
	t.Run("WrongBearer", func(t *testing.T) {
		for i, tok := range []string{"wrong", token + "x", token[:len(token)-1], strings.ToUpper(token), "Bearer"} {
			cl := c.bearer(tok).from(fmt.Sprintf("192.0.2.%d", i+1))
			mustStatus(t, "GET / with bearer "+tok, cl.get(t, "/"), http.StatusUnauthorized)
		}
	})
	t.Run("Bearer", func(t *testing.T) {
		for _, p := range paths {
			mustStatus(t, "GET "+p, c.bearer(token).get(t, p), http.StatusOK)
		}
	})
	t.Run("WrongLogin", func(t *testing.T) {
		res := c.anonymous().from("198.51.100.1").post(t, "/login", url.Values{"token": {"not-the-token"}}, nil)
		mustStatus(t, "POST /login", res, http.StatusUnauthorized)
		mustContain(t, "POST /login", res, "That is not the console&#39;s token.")
		if res.Header.Get("Set-Cookie") != "" {
			t.Errorf("a wrong token got a cookie: %s", res.Header.Get("Set-Cookie"))
		}
	})
	t.Run("Login", func(t *testing.T) {
		res := c.anonymous().post(t, "/login", url.Values{"token": {token}, "next": {"//evil.example/"}}, nil)
		mustStatus(t, "POST /login", res, http.StatusSeeOther)
		if loc := res.Header.Get("Location"); loc != "/" {
			t.Errorf("redirected to %q after sign-in, want / (a next of another host is refused)", loc)
		}
		ck := res.Header.Get("Set-Cookie")
		for _, want := range []string{"console_session=", "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=43200"} {
			if !strings.Contains(ck, want) {
				t.Errorf("cookie %q lacks %s", ck, want)
			}
		}
		if strings.Contains(ck, "Secure") {
			t.Errorf("cookie %q is Secure over plain HTTP: the browser would drop it", ck)
		}
		if strings.Contains(ck, token) {
			t.Errorf("the cookie carries the token: %q", ck)
		}
		b := c.browser(t)
		mustStatus(t, "GET / signed in", b.get(t, "/"), http.StatusOK)
	})
	t.Run("ForgedCookie", func(t *testing.T) {
		for _, v := range []string{"s1.99999999999.AAAA", "s1.99999999999", "", "x", oldCookie(token, time.Now().Add(time.Hour)),
			"s2.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAA"} {
			req, _ := http.NewRequest(http.MethodGet, c.URL+"/", nil)
			req.AddCookie(&http.Cookie{Name: "console_session", Value: v})
			mustStatus(t, "GET / with cookie "+v, c.anonymous().do(t, req), http.StatusUnauthorized)
		}
	})
	t.Run("Logout", func(t *testing.T) {
		b := c.browser(t)
		stolen := b.cookie(t)
		res := b.post(t, "/logout", url.Values{"csrf": {b.csrf(t, "/")}}, nil)
		mustStatus(t, "POST /logout", res, http.StatusSeeOther)
		mustStatus(t, "GET / signed out", b.get(t, "/"), http.StatusUnauthorized)
		// The cookie a browser forgets is refused when it is sent again:
		// copied before sign-out, it opens nothing.
		res = c.withCookie(stolen).get(t, "/")
		mustStatus(t, "GET / with the cookie of a signed-out session", res, http.StatusUnauthorized)
		mustContain(t, "GET / signed out", res, "Your session has ended")
	})
	t.Run("NoSecretRendered", func(t *testing.T) {
		secrets := []string{token, rt.Secret(stripe.Spec), rt.Secret(github.Spec)}
		b := c.browser(t)
		for _, p := range append(paths, "/login", "/events?state=parked") {
			res := b.get(t, p)
			for _, s := range secrets {
				if strings.Contains(res.Body, s) {
					t.Errorf("GET %s renders a secret", p)
				}
			}
		}
	})
}

// TestCSRF: a state-changing request made with the cookie needs the
// page's CSRF token (and, when the browser names one, the console's own
// origin); refused, it changes nothing. Scripts with the bearer token need
// none.
func TestCSRF(t *testing.T) {
	c := newConsole(t)
	world(t, c)
	b := c.browser(t)
	fulfil := func() int { return c.API.CountByKey(fulfillment.IdempotencyKey("order:stripe:cs_bad/fulfillment")) }
	before, calls := c.Steps(t, "evt_bad"), fulfil()
	unchanged := func(t *testing.T) {
		t.Helper()
		if diff := cmp.Diff(before, c.Steps(t, "evt_bad")); diff != "" || fulfil() != calls {
			t.Fatalf("a refused request changed the event (-before +after):\n%s; fulfillment calls %d → %d", diff, calls, fulfil())
		}
	}
	csrf := b.csrf(t, "/events/evt_bad/replay")

	t.Run("Missing", func(t *testing.T) {
		res := b.post(t, "/events/evt_bad/replay", url.Values{}, nil)
		mustStatus(t, "POST without CSRF", res, http.StatusForbidden)
		mustContain(t, "POST without CSRF", res, "CSRF token is missing or wrong")
		unchanged(t)
	})
	t.Run("Wrong", func(t *testing.T) {
		mustStatus(t, "POST with a wrong CSRF", b.post(t, "/events/evt_bad/replay", url.Values{"csrf": {csrf + "x"}}, nil),
			http.StatusForbidden)
		unchanged(t)
	})
	t.Run("OtherOrigin", func(t *testing.T) {
		res := b.post(t, "/events/evt_bad/replay", url.Values{"csrf": {csrf}}, http.Header{"Origin": {"http://evil.example"}})
		mustStatus(t, "POST from another origin", res, http.StatusForbidden)
		unchanged(t)
	})
	t.Run("GetChangesNothing", func(t *testing.T) {
		mustStatus(t, "GET replay preview", b.get(t, "/events/evt_bad/replay"), http.StatusOK)
		mustStatus(t, "GET step preview", b.get(t, "/events/evt_bad/steps/fulfillment/run"), http.StatusOK)
		unchanged(t)
	})
	t.Run("OK", func(t *testing.T) {
		res := b.post(t, "/events/evt_bad/replay", url.Values{"csrf": {csrf}}, http.Header{"Origin": {c.URL}})
		mustStatus(t, "POST with the CSRF token", res, http.StatusOK)
		mustContain(t, "replay result", res, `id="state-after">done<`)
	})
	t.Run("BearerNeedsNoCSRF", func(t *testing.T) {
		res := c.bearer(token).post(t, "/events/evt_done1/replay", nil, nil)
		mustStatus(t, "POST with the bearer token", res, http.StatusOK)
		mustContain(t, "replay result", res, ">duplicate<", "No claim changed.")
	})
}

// TestSecurityHeaders: every answer, pages, errors, refusals and assets,
// carries the strict policy; pages are not cached.
func TestSecurityHeaders(t *testing.T) {
	c := newConsole(t)
	world(t, c)
	b := c.browser(t)
	for _, p := range []struct {
		cl   *client
		path string
		code int
	}{
		{c.anonymous(), "/", 401}, {c.anonymous(), "/login", 200}, {b, "/", 200}, {b, "/events", 200},
		{b, "/events/evt_bad", 200}, {b, "/events/evt_nope", 404}, {b, "/nope", 404}, {b, "/events?state=stuck", 400},
		{b, "/assets/console.css", 200}, {b, "/assets/console.js", 200}, {b, "/reconcile", 404},
	} {
		res := p.cl.get(t, p.path)
		mustStatus(t, "GET "+p.path, res, p.code)
		if got := res.Header.Get("Content-Security-Policy"); got != wantCSP {
			t.Errorf("GET %s: CSP %q", p.path, got)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin"} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("GET %s: %s %q", p.path, k, got)
			}
		}
		if !strings.HasPrefix(p.path, "/assets/") && res.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q", p.path, res.Header.Get("Cache-Control"))
		}
		// No inline script or style: the policy would block them.
		for _, bad := range []string{"<script>", "style=", "onclick=", "javascript:", "http://", "https://"} {
			if strings.Contains(res.Body, bad) && !strings.HasPrefix(p.path, "/assets/") && !strings.Contains(p.path, "evt_") {
				t.Errorf("GET %s contains %q", p.path, bad)
			}
		}
	}
}

// TestEventsFilters: every filter, and search by each kind of id an
// operator holds.
func TestEventsFilters(t *testing.T) {
	c := newConsole(t)
	world(t, c)
	all := []string{ghKey, "evt_bad", "evt_done1", "evt_done2", "evt_inv_created", "evt_inv_paid"}
	cases := []struct {
		name, query string
		want        []string
	}{
		{"All", "", all},
		{"Source", "source=github", []string{ghKey}},
		{"Type", "type=invoice.paid", []string{"evt_inv_paid"}},
		{"StateParked", "state=parked", []string{"evt_bad"}},
		{"StateDone", "state=done", slices.DeleteFunc(slices.Clone(all), func(k string) bool { return k == "evt_bad" })},
		{"StateFailed", "state=failed", nil},
		{"Age", "age=1h", all},
		{"RangeBefore", "to=2000-01-01T00:00", nil},
		{"RangeNow", "from=" + time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04"), all},
		{"SourceAndState", "source=stripe&state=parked", []string{"evt_bad"}},
		{"SearchEventID", "q=evt_done2", []string{"evt_done2"}},
		{"SearchGUID", "q=6c1d2f7e-0000-4000-8000-00000000aaaa", []string{ghKey}},
		{"SearchStepKey", "q=evt_bad/fulfillment", []string{"evt_bad"}},
		{"SearchCheckoutSession", "q=cs_bad", []string{"evt_bad"}},
		{"SearchPaymentIntent", "q=pi_done1", []string{"evt_done1"}},
		{"SearchEmail", "q=DONE2@example.com", []string{"evt_done2"}},
		{"SearchInvoice", "q=in_777", []string{"evt_inv_created", "evt_inv_paid"}},
		{"SearchInvoiceEmail", "q=payer@example.com", []string{"evt_inv_created", "evt_inv_paid"}},
		{"SearchMarketplaceAccount", "q=account:424242", []string{ghKey}},
		{"SearchBillingEmail", "q=billing424242@org.example", []string{ghKey}},
		{"SearchNothing", "q=cs_nope", nil},
		{"SearchAndFilter", "q=in_777&type=invoice.created", []string{"evt_inv_created"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l listed
			res := c.bearer(token).getJSON(t, "/events?"+tc.query, &l)
			mustStatus(t, "GET /events?"+tc.query, res, http.StatusOK)
			got := l.keys()
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GET /events?%s (-want +got):\n%s", tc.query, diff)
			}
		})
	}
	t.Run("Page", func(t *testing.T) {
		res := c.bearer(token).get(t, "/events?q=cs_bad")
		mustStatus(t, "search page", res, http.StatusOK)
		mustContain(t, "search page", res, `href="/events/evt_bad"`, `class="badge parked"`, "checkout.session.completed")
	})
	t.Run("ErrBadFilter", func(t *testing.T) {
		for _, q := range []string{"state=stuck", "source=paypal", "age=forever", "from=yesterday", "after=!!"} {
			res := c.bearer(token).get(t, "/events?"+q)
			mustStatus(t, "GET /events?"+q, res, http.StatusBadRequest)
			mustContain(t, "GET /events?"+q, res, `class="problem"`)
		}
	})
}

// TestPagination: keyset pages walk every event once, newest first, ties
// on the received time broken by key, whatever the page size; the HTML
// page links to the next.
func TestPagination(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	// 137 events, many received at the very same instant.
	if _, err := c.Pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, body, outcome, via)
SELECT format('evt_page_%s', lpad(g::text, 4, '0')), 'stripe', 'done', 'event',
       timestamptz '2026-01-01 00:00:00+00' + (g / 10) * interval '1 second', now(),
       format('evt_page_%s', lpad(g::text, 4, '0')), 'invoice.created', '{}', 'processed', 'delivery'
FROM generate_series(1, 137) g`); err != nil {
		t.Fatal(err)
	}
	var want []string
	rows, _ := c.Pool.Query(ctx, `SELECT event_key FROM processed_events WHERE kind = 'event' ORDER BY claimed_at DESC, event_key DESC`)
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		want = append(want, k)
	}
	rows.Close()

	for _, limit := range []int{1, 10, 50, 137, 500} {
		t.Run(fmt.Sprintf("Limit%d", limit), func(t *testing.T) {
			var got []string
			next := fmt.Sprintf("/events?limit=%d", limit)
			for pages := 0; next != ""; pages++ {
				if pages > 200 {
					t.Fatal("pagination does not end")
				}
				var l listed
				mustStatus(t, "GET "+next, c.bearer(token).getJSON(t, next, &l), http.StatusOK)
				if len(l.Events) > limit {
					t.Fatalf("page of %d events, limit %d", len(l.Events), limit)
				}
				got = append(got, l.keys()...)
				next = l.Next
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("HTML", func(t *testing.T) {
		res := c.bearer(token).get(t, "/events?limit=50&source=stripe")
		m := regexp.MustCompile(`href="(/events\?[^"]*after=[^"]+)" id="next"`).FindStringSubmatch(res.Body)
		if m == nil {
			t.Fatalf("no next link:\n%s", res.Body)
		}
		next := strings.ReplaceAll(m[1], "&amp;", "&")
		res = c.bearer(token).get(t, next)
		mustStatus(t, "GET "+next, res, http.StatusOK)
		mustContain(t, "second page", res, want[50], want[99], "⇤ Newest")
		if strings.Contains(res.Body, ">"+want[49]+"<") {
			t.Errorf("the second page repeats the first's last event")
		}
	})
}

// TestEventPage: the stored body pretty-printed and escaped, the API
// version, the timeline with the Idempotency-Key and Message-ID of its
// steps, the reason it was parked, and the order it wrote.
func TestEventPage(t *testing.T) {
	c := newConsole(t)
	world(t, c)
	hostile := []byte(`{"id":"evt_xss","object":"event","api_version":"2023-10-16","type":"checkout.session.completed",
"data":{"object":{"id":"cs_xss","object":"checkout.session","payment_status":"paid","amount_total":100,"currency":"usd",
"payment_intent":"pi_xss","customer_details":{"email":"xss@example.com","name":"<script>alert(1)</script><img src=x onerror=alert(2)>"}}}}`)
	mustOK(t, c.Deliver(t, stripe.Spec, hostile, nil))
	b := c.browser(t)

	t.Run("Parked", func(t *testing.T) {
		res := b.get(t, "/events/evt_bad")
		mustStatus(t, "event page", res, http.StatusOK)
		mustContain(t, "event page",
			res, `id="state">parked<`, `id="api-version">2023-10-16<`,
			`Why step fulfillment was parked`, "422",
			"fulfillment", fulfillment.IdempotencyKey("order:stripe:cs_bad/fulfillment"),
			"email.confirmation", "Message-ID", "@example.test&gt;",
			"cs_bad", "written by this event", "25.00 USD",
			`&#34;payment_status&#34;: &#34;paid&#34;`, // pretty-printed, escaped
			`/events/evt_bad/replay`, `href="/events/evt_bad/resolve" id="resolve"`,
			// Every attempt of every step.
			`id="attempts-fulfillment"`, `<span class="badge parked">parked</span>`, `<td class="num">422</td>`,
			`id="attempts-email.confirmation"`, `<span class="badge done">done</span>`)
	})
	t.Run("Attempts", func(t *testing.T) {
		// A failure: the status the API answered, and its text; the
		// error's class, a Go type, is no text of the page.
		res := b.get(t, "/events/evt_bad")
		rows := attemptRows(t, res, "fulfillment")
		if len(rows) != 1 || !strings.HasPrefix(rows[0], "1 | parked | 422 | fulfillment: status 422") {
			t.Errorf("the fulfillment step's attempts read %q; want 1 parked, answered 422, and the API's answer", rows)
		}
		if text := pageText(res.Body); strings.Contains(text, "*fulfillment.") || strings.Contains(text, "StatusError") {
			t.Errorf("the page shows a Go type:\n%s", text)
		}
		// A success: the code the other side answered it with (the API's
		// 201, the relay's 250).
		res = b.get(t, "/events/evt_done1")
		for step, code := range map[string]string{"fulfillment": "201", "email.confirmation": "250"} {
			if rows := attemptRows(t, res, step); len(rows) != 1 || rows[0] != "1 | done | "+code+" |  | " {
				t.Errorf("the %s step's attempts read %q; want 1 done, answered %s", step, rows, code)
			}
		}
	})
	t.Run("Escaped", func(t *testing.T) {
		res := b.get(t, "/events/evt_xss")
		mustStatus(t, "event page", res, http.StatusOK)
		if strings.Contains(res.Body, "<script>alert") || strings.Contains(res.Body, "<img src=x") {
			t.Fatalf("the stored body is rendered unescaped:\n%s", res.Body)
		}
		mustContain(t, "event page", res, `&lt;script&gt;alert(1)&lt;/script&gt;`)
	})
	t.Run("Invoice", func(t *testing.T) {
		res := b.get(t, "/events/evt_inv_paid")
		mustContain(t, "invoice event", res, "in_777", "9.00 EUR of 9.00 EUR", "written by this event")
	})
	t.Run("GitHubByGUID", func(t *testing.T) {
		res := b.get(t, "/events/6c1d2f7e-0000-4000-8000-00000000aaaa")
		mustStatus(t, "event by GUID", res, http.StatusOK)
		mustContain(t, "event by GUID", res, ghKey, "account:424242", "github_marketplace")
	})
	t.Run("NotFound", func(t *testing.T) {
		mustStatus(t, "missing event", b.get(t, "/events/evt_missing"), http.StatusNotFound)
	})
}

// TestEventPageNetworkError: an attempt that got no answer says so, and
// what went wrong in words (a network error), not as its class's Go type.
func TestEventPageNetworkError(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // its port refuses connections
	c := newConsole(t, rt.Env("FULFILLMENT_URL", down.URL))
	if res := c.Deliver(t, stripe.Spec, checkout("down"), nil); res.Status != http.StatusBadGateway {
		t.Fatalf("delivery with the API down: %d %s", res.Status, res.Body)
	}
	res := c.browser(t).get(t, "/events/evt_down")
	rows := attemptRows(t, res, "fulfillment")
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "1 | failed | – | network error: fulfillment: Post ") ||
		!strings.Contains(rows[0], "connection refused") {
		t.Errorf("the fulfillment step's attempts read %q; want 1 failed, no answer, a network error", rows)
	}
	if text := pageText(res.Body); strings.Contains(text, "syscall.") || strings.Contains(text, "*net.") {
		t.Errorf("the page shows a Go type:\n%s", text)
	}
}

var (
	tableRow = regexp.MustCompile(`(?s)<tr class="state-[a-z_]+">(.*?)</tr>`)
	tableTag = regexp.MustCompile(`<[^>]*>`)
)

// attemptRows are the rows of a step's Attempts table, each its cells but
// the start and the time it took, as text, joined by " | ".
func attemptRows(t *testing.T, p page, step string) []string {
	t.Helper()
	_, table, ok := strings.Cut(p.Body, `id="attempts-`+step+`"`)
	if !ok {
		t.Fatalf("no attempts table of step %s in:\n%s", step, p.Body)
	}
	table, _, _ = strings.Cut(table, "</table>")
	var rows []string
	for _, m := range tableRow.FindAllStringSubmatch(table, -1) {
		var cells []string
		for i, cell := range strings.Split(m[1], "</td>") {
			if i != 1 && i != 2 && strings.TrimSpace(cell) != "" {
				cells = append(cells, html.UnescapeString(strings.TrimSpace(tableTag.ReplaceAllString(cell, ""))))
			}
		}
		rows = append(rows, strings.Join(cells, " | "))
	}
	return rows
}

// pageText is what a browser shows of a page: its text, without tags and
// their attributes.
func pageText(body string) string {
	return html.UnescapeString(tableTag.ReplaceAllString(body, ""))
}

// snapshot is everything a replay could change: the business rows, every
// claim (status, attempts, error), the mail sent and the fulfillment calls.
func snapshot(t *testing.T, c *console) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range c.Snapshot(t) {
		out[s] = "row"
	}
	rows, err := c.Pool.Query(context.Background(),
		`SELECT event_key, format('%s %s %s', status, attempts, coalesce(last_error, '')) FROM processed_events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		_ = rows.Scan(&k, &v)
		out[k] = v
	}
	rows.Close()
	out["mail"] = fmt.Sprint(len(c.SMTP.Messages()))
	out["fulfillment calls"] = fmt.Sprint(len(c.API.Requests()))
	return out
}

// TestReplay: replaying the parked event from the console, once its cause
// is fixed, runs its parked step once (same Idempotency-Key), and changes
// nothing else: no other claim, row, email or call.
func TestReplay(t *testing.T) {
	c := newConsole(t)
	world(t, c)
	b := c.browser(t)

	preview := b.get(t, "/events/evt_bad/replay")
	mustStatus(t, "preview", preview, http.StatusOK)
	mustContain(t, "preview", preview, "Give back step <strong>fulfillment</strong>", "Leave step email.confirmation done")

	before := snapshot(t, c)
	res := b.post(t, "/events/evt_bad/replay", url.Values{"csrf": {b.csrf(t, "/events/evt_bad/replay")}}, nil)
	mustStatus(t, "replay", res, http.StatusOK)
	mustContain(t, "replay result", res, `id="outcome">processed<`, `id="state-after">done<`, "evt_bad/fulfillment")
	after := snapshot(t, c)

	want := map[string][2]string{
		"evt_bad/fulfillment": {before["evt_bad/fulfillment"], "done 1 "},
		"fulfillment calls":   {before["fulfillment calls"], fmt.Sprint(len(c.API.Requests()))},
	}
	if !strings.HasPrefix(before["evt_bad/fulfillment"], "parked ") {
		t.Fatalf("the step was %q before the replay", before["evt_bad/fulfillment"])
	}
	for k := range after {
		if w, ok := want[k]; ok {
			if after[k] != w[1] {
				t.Errorf("%s: %q after the replay, want %q", k, after[k], w[1])
			}
			continue
		}
		if before[k] != after[k] {
			t.Errorf("the replay changed %s: %q → %q", k, before[k], after[k])
		}
	}
	if len(after) != len(before) {
		t.Errorf("the replay added or removed rows: %d → %d", len(before), len(after))
	}
	key := fulfillment.IdempotencyKey("order:stripe:cs_bad/fulfillment")
	if n := c.API.CountByKey(key); n != 2 { // the refused call, then the replay's
		t.Errorf("fulfillment calls with the step's Idempotency-Key: %d, want 2", n)
	}

	t.Run("Again", func(t *testing.T) {
		before := snapshot(t, c)
		res := b.post(t, "/events/evt_bad/replay", url.Values{"csrf": {b.csrf(t, "/events/evt_bad/replay")}}, nil)
		mustContain(t, "second replay", res, `id="outcome">duplicate<`, "No claim changed.")
		if diff := cmp.Diff(before, snapshot(t, c)); diff != "" {
			t.Errorf("a replay of finished work changed (-before +after):\n%s", diff)
		}
	})
}

// TestReplayParkedWindow: the batch action previews the parked events of
// a window and replays each of them.
func TestReplayParkedWindow(t *testing.T) {
	c := newConsole(t)
	c.API.SetStatus(422)
	mustOK(t, c.Deliver(t, stripe.Spec, checkout("p1"), nil))
	mustOK(t, c.Deliver(t, stripe.Spec, checkout("p2"), nil))
	c.API.SetStatus(0)
	mustOK(t, c.Deliver(t, stripe.Spec, checkout("fine"), nil))
	b := c.browser(t)

	preview := b.get(t, "/replay-parked?age=1h")
	mustStatus(t, "preview", preview, http.StatusOK)
	mustContain(t, "preview", preview, "2 parked events in this window", "evt_p1", "evt_p2", "Replay 2 events")
	if strings.Contains(preview.Body, "evt_fine") {
		t.Error("the preview lists an event that is not parked")
	}
	mustStatus(t, "empty window", b.post(t, "/replay-parked", url.Values{"csrf": {b.csrf(t, "/replay-parked?age=1h")}}, nil),
		http.StatusBadRequest)
	res := b.post(t, "/replay-parked", url.Values{"csrf": {b.csrf(t, "/replay-parked?age=1h")}, "age": {"1h"}}, nil)
	mustStatus(t, "replay parked", res, http.StatusOK)
	mustContain(t, "replay parked", res, "evt_p1", "evt_p2", `id="outcome">processed<`)
	for _, k := range []string{"evt_p1", "evt_p2"} {
		if got := c.Steps(t, k); !slices.Equal(got, []string{"email.confirmation=done", "fulfillment=done"}) {
			t.Errorf("%s steps after the batch replay: %v", k, got)
		}
	}
}

// TestOneEvent: one of anything is written in the singular: the events
// list, the parked window, its action, the overview's parked card and a
// replay's plan.
func TestOneEvent(t *testing.T) {
	c := newConsole(t)
	c.API.SetStatus(422)
	mustOK(t, c.Deliver(t, stripe.Spec, checkout("one"), nil))
	c.API.SetStatus(0)
	b := c.browser(t)
	mustContain(t, "events", b.get(t, "/events"), "<small>1 event ·")
	mustContain(t, "parked window", b.get(t, "/replay-parked?age=1h"), "<p>1 parked event in this window.", "Replay 1 event</button>")
	mustContain(t, "overview", b.get(t, "/"), "<p>event (1 claim) waits for an operator;")
	mustContain(t, "replay's plan", b.get(t, "/events/evt_one/replay"), "(parked, 1 attempt) with its attempts reset")
}

// TestRunStep: a step whose call failed waits for the redriver; "run now"
// runs it at once, ignoring its back-off.
func TestRunStep(t *testing.T) {
	c := newConsole(t, rt.Env("REDRIVE_INTERVAL", "1h"))
	c.API.SetStatus(503)
	res := c.Deliver(t, stripe.Spec, checkout("slow"), nil)
	if res.Status != http.StatusBadGateway {
		t.Fatalf("delivery with the API down: %d %s", res.Status, res.Body)
	}
	c.API.SetStatus(0)
	b := c.browser(t)
	page := b.get(t, "/events/evt_slow")
	mustContain(t, "event page", page, `id="state">failed<`, "/events/evt_slow/steps/fulfillment/run")
	preview := b.get(t, "/events/evt_slow/steps/fulfillment/run")
	mustContain(t, "preview", preview, "ignoring its back-off")
	res2 := b.post(t, "/events/evt_slow/steps/fulfillment/run", url.Values{"csrf": {b.csrf(t, "/events/evt_slow/steps/fulfillment/run")}}, nil)
	mustStatus(t, "run now", res2, http.StatusOK)
	mustContain(t, "run now", res2, "The step ran.", `id="step-after">done<`)
	if got := c.Steps(t, "evt_slow"); !slices.Equal(got, []string{"email.confirmation=done", "fulfillment=done"}) {
		t.Errorf("steps after run now: %v", got)
	}
	t.Run("Done", func(t *testing.T) {
		res := b.post(t, "/events/evt_slow/steps/fulfillment/run", url.Values{"csrf": {b.csrf(t, "/events/evt_slow")}}, nil)
		mustContain(t, "run a done step", res, "The step did not run")
	})
	t.Run("Missing", func(t *testing.T) {
		mustStatus(t, "missing step", b.get(t, "/events/evt_slow/steps/nope/run"), http.StatusNotFound)
	})
}

// TestOverview: the health strip and the charts.
func TestOverview(t *testing.T) {
	c := newConsole(t)
	world(t, c)
	bad := c.Post(t, "/webhooks/stripe", http.Header{"Stripe-Signature": {"t=1,v1=00"}, "Content-Type": {"application/json"}}, checkout("forged"))
	if bad.Status != http.StatusBadRequest {
		t.Fatalf("forged delivery: %d", bad.Status)
	}
	b := c.browser(t)
	res := b.get(t, "/")
	mustStatus(t, "overview", res, http.StatusOK)
	mustContain(t, "overview", res,
		`id="parked"`, `<p class="big">1</p>`, // one parked event
		`id="last-events"`, ">stripe<", ">github<",
		"Rejections by reason", "stripe: ", // the forged delivery
		`<svg class="chart"`, `class="s-done"`, `class="s-parked"`,
		// The chart's parked events are the card's (the event was processed
		// on arrival, its step parked later): one query for both.
		`<span id="parked-in-window">1</span>`, `id="legend-parked"><span class="key s-parked"></span>parked <span class="count">1</span>`,
		`id="legend-done"><span class="key s-done"></span>done <span class="count">5</span>`,
		`id="alerts"`, "off: set <code>ALERT_WEBHOOK_URL</code>")
	var v struct {
		Health struct {
			ParkedEvents int `json:"parked_events"`
			LastEvents   []struct {
				Source string `json:"source"`
				Key    string `json:"key"`
			} `json:"last_events"`
		} `json:"health"`
	}
	c.bearer(token).getJSON(t, "/", &v)
	if v.Health.ParkedEvents != 1 {
		t.Errorf("parked events %d, want 1", v.Health.ParkedEvents)
	}
	want := []string{"stripe evt_bad", "github " + ghKey}
	var got []string
	for _, l := range v.Health.LastEvents {
		if l.Source == "stripe" || l.Source == "github" || l.Key != "" { // other providers: none stored
			got = append(got, l.Source+" "+l.Key)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("last events (-want +got):\n%s", diff)
	}
}

// fakeReconciler records what it is asked.
type fakeReconciler struct {
	calls []string
}

func (f *fakeReconciler) Sources() []string { return []string{"stripe"} }

func (f *fakeReconciler) Reconcile(_ context.Context, source string, window time.Duration, dryRun bool, actor string) (consolepkg.ReconcileReport, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s %s dry=%v %s", source, window, dryRun, strings.Fields(actor)[0]))
	verb := "processed"
	if dryRun {
		verb = "would process"
	}
	return consolepkg.ReconcileReport{Summary: "found 3 events, 1 never delivered", Lines: []string{"evt_missed_1 " + verb}}, nil
}

// TestReconcileAction: shown only when a reconciler is configured; the
// preview is a dry run, the POST runs it, with who asked.
func TestReconcileAction(t *testing.T) {
	r := rt.New(t, providers.List())
	provs := r.Server.Providers()
	fake := &fakeReconciler{}
	con, err := consolepkg.New(consolepkg.Config{Token: token, Addr: "127.0.0.1:0", DB: r.Pool, Processor: r.Server.Processor(), Providers: provs,
		Specs: r.Specs(), Lease: r.Config.LeaseDuration, Reconciler: fake})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(con)
	t.Cleanup(ts.Close)
	c := &console{Receiver: r, URL: ts.URL}
	b := c.browser(t)

	mustContain(t, "overview", b.get(t, "/"), `href="/reconcile"`)
	form := b.get(t, "/reconcile")
	mustStatus(t, "reconcile form", form, http.StatusOK)
	if len(fake.calls) != 0 {
		t.Fatalf("the form alone reconciled: %v", fake.calls)
	}
	preview := b.get(t, "/reconcile?source=stripe&window=24h")
	mustContain(t, "preview", preview, "Preview (dry run)", "evt_missed_1 would process", "Reconcile stripe over 24h")
	mustStatus(t, "unknown source", b.get(t, "/reconcile?source=paypal&window=24h"), http.StatusBadRequest)
	res := b.post(t, "/reconcile", url.Values{"csrf": {b.csrf(t, "/reconcile")}, "source": {"stripe"}, "window": {"24h"}}, nil)
	mustStatus(t, "reconcile", res, http.StatusOK)
	mustContain(t, "reconcile", res, "Result", "evt_missed_1 processed")
	mustStatus(t, "reconcile without CSRF", b.post(t, "/reconcile", url.Values{"source": {"stripe"}, "window": {"24h"}}, nil), http.StatusForbidden)
	want := []string{"stripe 24h0m0s dry=true console", "stripe 24h0m0s dry=false console"}
	if diff := cmp.Diff(want, fake.calls); diff != "" {
		t.Errorf("reconciler calls (-want +got):\n%s", diff)
	}
}

// metric reads a series of the receiver's /metrics (HTTP_ADDR), waiting up
// to a deadline for it to equal want (the claims' gauges are cached for a
// few seconds); it returns the last value read.
func metric(t *testing.T, c *console, name string, want float64) float64 {
	t.Helper()
	var v float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(c.Receiver.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				fmt.Sscan(f[1], &v)
			}
		}
		if v == want || time.Now().After(deadline) {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestResolveAction: the console resolves a parked event with a reason,
// previewed first and CSRF-protected; the event leaves the parked figures
// (the overview's card and chart, the gauges, the parked listing), keeps
// its body, and the page says who and why; a done event is refused.
func TestResolveAction(t *testing.T) {
	c := newConsole(t)
	world(t, c)
	b := c.browser(t)
	if v := metric(t, c, "webhook_parked_events", 1); v != 1 {
		t.Fatalf("webhook_parked_events before: %v, want 1", v)
	}

	preview := b.get(t, "/events/evt_bad/resolve")
	mustStatus(t, "preview", preview, http.StatusOK)
	mustContain(t, "preview", preview, "Close step <strong>fulfillment</strong>", "422", `name="reason"`, `id="do-resolve"`)
	form := url.Values{"csrf": {b.csrf(t, "/events/evt_bad/resolve")}, "reason": {"refunded by hand; never to ship"}}
	mustStatus(t, "resolve without CSRF", b.post(t, "/events/evt_bad/resolve", url.Values{"reason": {"x"}}, nil), http.StatusForbidden)
	mustStatus(t, "resolve without a reason", b.post(t, "/events/evt_bad/resolve", url.Values{"csrf": form["csrf"]}, nil),
		http.StatusBadRequest)

	res := b.post(t, "/events/evt_bad/resolve", form, nil)
	mustStatus(t, "resolve", res, http.StatusOK)
	mustContain(t, "resolve", res, `id="resolved"`, `id="state-after">resolved<`)

	page := b.get(t, "/events/evt_bad")
	mustContain(t, "event page", page, `id="state">resolved<`, `id="resolution"`, "refunded by hand; never to ship",
		"by <strong>console 127.0.0.1</strong>", `&#34;payment_status&#34;: &#34;paid&#34;`)
	if strings.Contains(page.Body, `id="resolve"`) {
		t.Error("the event page still offers to resolve a resolved event")
	}
	overview := b.get(t, "/")
	mustContain(t, "overview", overview, `<p class="big">0</p>`, `<span id="parked-in-window">0</span>`,
		`id="legend-resolved"><span class="key s-resolved"></span>resolved <span class="count">1</span>`)
	if v := metric(t, c, "webhook_parked_events", 0); v != 0 {
		t.Errorf("webhook_parked_events after: %v, want 0", v)
	}
	if v := metric(t, c, "webhook_parked", 0); v != 0 {
		t.Errorf("webhook_parked after: %v, want 0", v)
	}
	var l listed
	b.getJSON(t, "/events?state=resolved", &l)
	if !slices.Equal(l.keys(), []string{"evt_bad"}) {
		t.Errorf("resolved listing %v", l.keys())
	}
	b.getJSON(t, "/events?state=parked", &l)
	if len(l.keys()) != 0 {
		t.Errorf("parked listing after resolve: %v", l.keys())
	}

	again := b.post(t, "/events/evt_bad/resolve", url.Values{"csrf": form["csrf"], "reason": {"again"}}, nil)
	mustStatus(t, "resolve twice", again, http.StatusConflict)
	mustContain(t, "resolve twice", again, "resolved already, by console 127.0.0.1")
	done := b.get(t, "/events/evt_done1/resolve")
	mustContain(t, "resolve a done event", done, `id="refused"`, "evt_done1 is done; only a parked event")
	mustStatus(t, "resolve a missing event", b.get(t, "/events/evt_nope/resolve"), http.StatusNotFound)
}

// TestEventPageSharedGUID: a GUID that two stored events share opens
// neither: the page says so and names both keys, each of which opens its
// own event.
func TestEventPageSharedGUID(t *testing.T) {
	c := newConsole(t)
	const guid = "5a1d0000-0000-4000-8000-00000000c0de"
	keys := []string{"11:" + guid + ":aaaaaaaaaaaaaaaa", "12:" + guid + ":bbbbbbbbbbbbbbbb"}
	for i, k := range keys {
		if _, err := c.Pool.Exec(context.Background(), `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, body, outcome, via)
VALUES ($1, 'github', 'done', 'event', now() - $2 * interval '1 minute', now(), $3, 'ping', '{"zen":"x"}', 'processed', 'delivery')`,
			k, 2-i, guid); err != nil {
			t.Fatal(err)
		}
	}
	b := c.browser(t)
	res := b.get(t, "/events/"+guid)
	mustStatus(t, "shared GUID", res, http.StatusConflict)
	mustContain(t, "shared GUID", res, guid+" names 2 events", keys[0], keys[1], "name one by its key")
	for _, k := range keys {
		mustStatus(t, "event by key", b.get(t, "/events/"+url.PathEscape(k)), http.StatusOK)
	}
}

// TestSearchMoneyIDs: a subscription, dispute or customer id finds the last
// event applied to it through its table's index, even when no body of the
// newest events names it.
func TestSearchMoneyIDs(t *testing.T) {
	c := newConsole(t)
	ctx := context.Background()
	for _, k := range []string{"evt_sub_last", "evt_dp_last", "evt_cus_last"} {
		if _, err := c.Pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, body, outcome, via)
VALUES ($1, 'stripe', 'done', 'event', now(), now(), $1, 'ping', '{"names":"nothing"}', 'processed', 'delivery')`, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Pool.Exec(ctx, `
INSERT INTO subscriptions (source, external_id, status, event_at, provider_event_id) VALUES ('stripe', 'sub_old1', 'active', now(), 'evt_sub_last');
INSERT INTO disputes (source, external_id, amount_cents, currency, status, event_at, provider_event_id)
VALUES ('stripe', 'dp_old1', 500, 'usd', 'needs_response', now(), 'evt_dp_last');
INSERT INTO customers (source, customer_id, email, event_at, provider_event_id) VALUES ('stripe', 'cus_old1', 'c@example.com', now(), 'evt_cus_last');`); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{"sub_old1": {"evt_sub_last"}, "dp_old1": {"evt_dp_last"}, "cus_old1": {"evt_cus_last"}, "sub_none": nil} {
		var l listed
		res := c.bearer(token).getJSON(t, "/events?q="+q, &l)
		mustStatus(t, "search "+q, res, http.StatusOK)
		if diff := cmp.Diff(want, l.keys()); diff != "" {
			t.Errorf("search %s (-want +got):\n%s", q, diff)
		}
	}
}
