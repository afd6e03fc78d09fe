package console_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	consolepkg "github.com/paywebhooks/receiver/internal/console"
	"github.com/paywebhooks/receiver/internal/pgtest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// The console's sign-in, attacked: guessing the token, replaying a cookie
// after sign-out, a page on another name (DNS rebinding), a redirect off
// the console after sign-in, a cookie sent in clear behind a TLS proxy.

// ---------------------------------------------------------------------------
// Helpers

// cookie is the session cookie the browser holds.
func (cl *client) cookie(t *testing.T) string {
	t.Helper()
	u, _ := url.Parse(cl.c.URL)
	for _, ck := range cl.http.Jar.Cookies(u) {
		if ck.Name == "console_session" {
			return ck.Value
		}
	}
	t.Fatal("the browser holds no session cookie")
	return ""
}

// withCookie is a client that sends the session cookie v, as someone who
// copied it would (Secure or not).
func (c *console) withCookie(v string) *client {
	return &client{c: c, http: &http.Client{CheckRedirect: noRedirect}, session: v}
}

// oldCookie is a cookie of the console before sessions were stored: its
// expiry and an HMAC of it under a key derived from the token. Anyone who
// held one could replay it for 12 hours, signed out or not.
func oldCookie(token string, expires time.Time) string {
	k := hmac.New(sha256.New, []byte(token))
	k.Write([]byte("paywebhooks console session v1"))
	payload := "s1." + strconv.FormatInt(expires.Unix(), 10)
	mac := hmac.New(sha256.New, k.Sum(nil))
	mac.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// clock is a time the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// logLines collects what a console logs.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

// bare is a console of its own on pool, with the test's clock, served by
// the test: for what depends on time, and for two replicas on one
// database. The client address is X-Forwarded-For's, as TRUSTED_PROXIES
// makes it for a proxy the console trusts.
func bare(t *testing.T, pool *pgxpool.Pool, clk *clock, mod ...func(*consolepkg.Config)) (*console, *logLines) {
	t.Helper()
	logs := &logLines{}
	cfg := consolepkg.Config{
		Token: token, DB: pool, Addr: "127.0.0.1:0", Lease: 5 * time.Minute, Now: clk.Now,
		Log: slog.New(slog.NewJSONHandler(logs, nil)),
		ClientIP: func(r *http.Request) string {
			if v := r.Header.Get("X-Forwarded-For"); v != "" {
				return v
			}
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			return host
		},
	}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := consolepkg.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(c)
	t.Cleanup(ts.Close)
	return &console{URL: ts.URL}, logs
}

func signIn(t *testing.T, cl *client, tok string) page {
	t.Helper()
	return cl.post(t, "/login", url.Values{"token": {tok}, "next": {"/events"}}, nil)
}

// mustThrottled checks a 429 with a Retry-After of at most max seconds.
func mustThrottled(t *testing.T, what string, p page, max int) {
	t.Helper()
	mustStatus(t, what, p, http.StatusTooManyRequests)
	n, err := strconv.Atoi(p.Header.Get("Retry-After"))
	if err != nil || n < 1 || n > max {
		t.Errorf("%s: Retry-After %q, want 1 to %d seconds", what, p.Header.Get("Retry-After"), max)
	}
	if ck := p.Header.Get("Set-Cookie"); ck != "" {
		t.Errorf("%s: a throttled sign-in set a cookie: %s", what, ck)
	}
}

// ---------------------------------------------------------------------------
// Throttling

// TestSignInThrottled: after a handful of wrong tokens from one client,
// sign-in and bearer requests from it are answered 429 with Retry-After,
// the right token included; other clients and signed-in browsers are not
// affected; behind a proxy the console does not trust, X-Forwarded-For
// does not make a new client.
func TestSignInThrottled(t *testing.T) {
	c := newConsole(t, rt.Env("TRUSTED_PROXIES", "127.0.0.1"))
	signedIn := c.browser(t).from("192.0.2.50")
	const wrongTokens = 5

	t.Run("Login", func(t *testing.T) {
		cl := c.anonymous().from("192.0.2.10")
		for i := range wrongTokens {
			mustStatus(t, fmt.Sprintf("wrong token %d", i+1), signIn(t, cl, "wrong-token"), http.StatusUnauthorized)
		}
		res := signIn(t, cl, token)
		mustThrottled(t, "the right token after 5 wrong ones", res, 15*60)
		mustContain(t, "the throttled sign-in", res, "Too many wrong tokens")
		mustThrottled(t, "a bearer request from the same client", c.bearer(token).from("192.0.2.10").get(t, "/"), 15*60)
		mustThrottled(t, "GET /events JSON", c.bearer(token).from("192.0.2.10").getJSON(t, "/events", &listed{}), 15*60)
	})
	t.Run("Bearer", func(t *testing.T) {
		for i := range wrongTokens {
			mustStatus(t, fmt.Sprintf("wrong bearer %d", i+1), c.bearer("wrong-token").from("192.0.2.11").get(t, "/"),
				http.StatusUnauthorized)
		}
		mustThrottled(t, "the right bearer token after 5 wrong ones", c.bearer(token).from("192.0.2.11").get(t, "/"), 15*60)
		mustThrottled(t, "sign-in after 5 wrong bearer tokens", signIn(t, c.anonymous().from("192.0.2.11"), token), 15*60)
	})
	t.Run("OtherClients", func(t *testing.T) {
		mustStatus(t, "another client's sign-in", signIn(t, c.anonymous().from("192.0.2.12"), token), http.StatusSeeOther)
		mustStatus(t, "another client's bearer", c.bearer(token).from("2001:db8::1").get(t, "/"), http.StatusOK)
		mustStatus(t, "a signed-in browser at a locked-out address", signedIn.from("192.0.2.10").get(t, "/"), http.StatusOK)
	})
	t.Run("IPv6By64", func(t *testing.T) {
		for i := range wrongTokens {
			cl := c.bearer("wrong-token").from(fmt.Sprintf("2001:db8:5:6::%x", i+1))
			mustStatus(t, fmt.Sprintf("wrong bearer %d", i+1), cl.get(t, "/"), http.StatusUnauthorized)
		}
		mustThrottled(t, "another address of the same /64", c.bearer(token).from("2001:db8:5:6:ffff::9").get(t, "/"), 15*60)
	})
	t.Run("UntrustedForwardedFor", func(t *testing.T) {
		direct := newConsole(t) // no TRUSTED_PROXIES: the client is the socket's peer
		for i := range wrongTokens {
			res := signIn(t, direct.anonymous().from(fmt.Sprintf("203.0.113.%d", i+1)), "wrong-token")
			mustStatus(t, fmt.Sprintf("wrong token %d", i+1), res, http.StatusUnauthorized)
		}
		cl := direct.anonymous().from("203.0.113.99")
		mustThrottled(t, "the right token under a new, made-up X-Forwarded-For", signIn(t, cl, token), 15*60)
	})
}

// TestSignInThrottleRecovers: a locked-out client signs in again once the
// lockout has passed.
func TestSignInThrottleRecovers(t *testing.T) {
	clk := newClock()
	c, logs := bare(t, pgtest.NewPool(t), clk)
	cl := c.anonymous().from("192.0.2.20")
	for range 5 {
		mustStatus(t, "wrong token", signIn(t, cl, "wrong-token"), http.StatusUnauthorized)
	}
	mustThrottled(t, "the right token", signIn(t, cl, token), 15*60)
	if !logs.contains(`"console: client locked out after wrong tokens"`) || !logs.contains(`"client":"192.0.2.20"`) {
		t.Errorf("the lockout is not logged with the client:\n%s", logs.buf.String())
	}
	clk.Add(consolepkg.DefaultLockout - time.Second)
	mustThrottled(t, "a second before the lockout ends", signIn(t, cl, token), 1)
	clk.Add(time.Second)
	mustStatus(t, "once the lockout has passed", signIn(t, cl, token), http.StatusSeeOther)
}

// TestSignInNotLockedOutByOthers: wrong tokens from many addresses never
// lock out a client that gave none. 125 wrong bearer tokens from 25
// addresses (5 each, past the overall cap of 100), then the right bearer
// token from a new address is answered, and so is a sign-in; about one
// wrong token every 9 s (the cap's refill) from 20 addresses keeps the
// budget spent, and the right token from a new address still gets in each
// time. Past the cap, one wrong token locks its address out.
func TestSignInNotLockedOutByOthers(t *testing.T) {
	clk := newClock()
	c, logs := bare(t, pgtest.NewPool(t), clk)
	wrong := 0
	for a := range 25 {
		for range 5 {
			res := c.bearer("wrong-token").from(fmt.Sprintf("10.0.0.%d", a+1)).get(t, "/")
			if res.Status == http.StatusUnauthorized {
				wrong++
			} else if res.Status != http.StatusTooManyRequests {
				t.Fatalf("wrong token from 10.0.0.%d: %d", a+1, res.Status)
			}
		}
	}
	if !logs.contains(`reached the overall cap`) {
		t.Error("the overall cap is not logged")
	}
	mustStatus(t, "the right bearer token from a new address after 125 wrong ones from 25", c.bearer(token).from("198.51.100.77").get(t, "/"),
		http.StatusOK)
	mustStatus(t, "a sign-in from another new address", signIn(t, c.anonymous().from("198.51.100.78"), token), http.StatusSeeOther)
	if wrong > 100+5 {
		t.Errorf("%d of 125 wrong tokens were checked: past the cap of 100, each of the 5 other addresses gets one", wrong)
	}

	per := consolepkg.DefaultLockout / 100
	for i := range 60 {
		clk.Add(per)
		mustStatus(t, fmt.Sprintf("trickle %d: a wrong token", i+1),
			c.bearer("wrong-token").from(fmt.Sprintf("10.1.0.%d", i%20+1)).get(t, "/"), http.StatusUnauthorized)
		if i%10 == 9 {
			mustStatus(t, fmt.Sprintf("trickle %d: the right token from a new address", i+1),
				c.bearer(token).from(fmt.Sprintf("198.51.101.%d", i)).get(t, "/events"), http.StatusOK)
		}
	}
	cl := c.bearer("wrong-token").from("203.0.113.5")
	mustStatus(t, "a new address's wrong token while the budget is spent", cl.get(t, "/"), http.StatusUnauthorized)
	mustThrottled(t, "its right token next", c.bearer(token).from("203.0.113.5").get(t, "/"), 15*60)
}

// ---------------------------------------------------------------------------
// Sessions

// TestSessions: a session is a row shared by every replica: sign-out on
// one ends it on all, and its copied cookie opens nothing; it ends at its
// expiry; expired rows are deleted; a new token ends every session.
func TestSessions(t *testing.T) {
	dbURL := pgtest.NewDB(t)
	pool := func() *pgxpool.Pool {
		p, err := pgxpool.New(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	clk := newClock()
	a, _ := bare(t, pool(), clk) // two replicas, each with its own pool
	b, _ := bare(t, pool(), clk)
	db := pool()
	rows := func(where string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM console_sessions WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("LogoutOnEveryReplica", func(t *testing.T) {
		browser := a.browser(t)
		ck := browser.cookie(t)
		mustStatus(t, "replica b with a's cookie", b.withCookie(ck).get(t, "/"), http.StatusOK)
		onB := b.withCookie(ck)
		mustStatus(t, "POST /logout on b", onB.post(t, "/logout", url.Values{"csrf": {onB.csrf(t, "/")}}, nil), http.StatusSeeOther)
		for name, c := range map[string]*console{"a": a, "b": b} {
			res := c.withCookie(ck).get(t, "/events")
			mustStatus(t, "replica "+name+" after sign-out", res, http.StatusUnauthorized)
			if got := res.Header.Get("Set-Cookie"); !strings.Contains(got, "Max-Age=0") {
				t.Errorf("replica %s does not clear the ended session's cookie: %q", name, got)
			}
			res = c.withCookie(ck).post(t, "/events/evt_x/replay", url.Values{"csrf": {"anything"}}, nil)
			mustStatus(t, "a POST with the signed-out cookie", res, http.StatusUnauthorized)
		}
		if n := rows(`revoked_at IS NOT NULL`); n != 1 {
			t.Errorf("%d revoked sessions stored, want 1", n)
		}
	})
	t.Run("CSRFBoundToSession", func(t *testing.T) {
		one, two := a.browser(t), a.browser(t)
		res := one.post(t, "/logout", url.Values{"csrf": {two.csrf(t, "/")}}, nil)
		mustStatus(t, "sign-out with another session's CSRF token", res, http.StatusForbidden)
		mustStatus(t, "the session after the refused sign-out", one.get(t, "/"), http.StatusOK)
	})
	t.Run("Expires", func(t *testing.T) {
		browser := a.browser(t)
		clk.Add(12*time.Hour - time.Second)
		mustStatus(t, "a second before expiry", browser.get(t, "/"), http.StatusOK)
		clk.Add(time.Second)
		mustStatus(t, "at expiry", browser.get(t, "/"), http.StatusUnauthorized)
	})
	t.Run("ExpiredRowsDeleted", func(t *testing.T) {
		if n := rows(`expires_at <= '` + clk.Now().Format(time.RFC3339) + `'`); n == 0 {
			t.Fatal("no expired session to delete")
		}
		a.browser(t) // any sign-in deletes the expired ones
		if n := rows(`expires_at <= '` + clk.Now().Format(time.RFC3339) + `'`); n != 0 {
			t.Errorf("%d expired sessions left after a sign-in", n)
		}
		if n := rows(`true`); n != 1 {
			t.Errorf("%d sessions stored, want only the new one", n)
		}
	})
	t.Run("NoIDStored", func(t *testing.T) {
		browser := a.browser(t)
		id := strings.Split(browser.cookie(t), ".")[1]
		raw, _ := base64.RawURLEncoding.DecodeString(id)
		if n := rows(fmt.Sprintf(`position('\x%x'::bytea in id_hash) > 0`, raw)); n != 0 {
			t.Error("the session id is stored as it is: a copy of the table would sign in")
		}
	})
	t.Run("NewToken", func(t *testing.T) {
		browser := a.browser(t)
		rotated, _ := bare(t, db, clk, func(c *consolepkg.Config) { c.Token = "another-token-0123456789abcdef" })
		mustStatus(t, "a session of the old token", rotated.withCookie(browser.cookie(t)).get(t, "/"), http.StatusUnauthorized)
	})
}

// ---------------------------------------------------------------------------
// Redirects

// TestRedirectAfterSignIn: after sign-in the console redirects only to
// a path of its own; anything a browser could read as another host goes
// to "/".
func TestRedirectAfterSignIn(t *testing.T) {
	c, _ := bare(t, pgtest.NewPool(t), newClock())
	for _, tc := range []struct{ next, want string }{
		{"/events", "/events"},
		{"/events?q=cs_1&state=parked", "/events?q=cs_1&state=parked"},
		{"/events/evt_1%2Ffulfillment", "/events/evt_1%2Ffulfillment"},
		{"", "/"},
		{"//evil.example/", "/"},
		{"/\t/evil.example", "/"},
		{"/%09/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/%0a/evil.example", "/"},
		{"/\r\n/evil.example", "/"},
		{"/%0D%0A/evil.example", "/"},
		{"/\\evil.example", "/"},
		{"/%5Cevil.example", "/"},
		{"/%5c%5cevil.example", "/"},
		{"\\/evil.example", "/"},
		{"/%2F/evil.example", "/"},
		{"/%2f%2fevil.example", "/"},
		{"/ /evil.example", "/"},
		{"/\x00/evil.example", "/"},
		{"/%00/evil.example", "/"},
		{"/%7F/evil.example", "/"},
		{"/%zz", "/"},
		{"https://evil.example/", "/"},
		{"http:evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"evil.example", "/"},
		{"/" + strings.Repeat("a", 4096), "/"},
	} {
		res := c.anonymous().post(t, "/login", url.Values{"token": {token}, "next": {tc.next}}, nil)
		mustStatus(t, fmt.Sprintf("sign-in with next %q", tc.next), res, http.StatusSeeOther)
		if got := res.Header.Get("Location"); got != tc.want {
			t.Errorf("sign-in with next %q redirects to %q, want %q", tc.next, got, tc.want)
		}
		page := c.anonymous().get(t, "/login?next="+url.QueryEscape(tc.next))
		if want := fmt.Sprintf(`name="next" value="%s"`, tc.want); !strings.Contains(page.Body, want) &&
			!strings.Contains(page.Body, strings.ReplaceAll(want, "&", "&amp;")) {
			t.Errorf("GET /login?next=%q: the form does not carry %s", tc.next, want)
		}
	}
}

// ---------------------------------------------------------------------------
// Host

// TestHost: a request whose Host is not the console's address, or a name
// ADMIN_HOSTS lists, is refused 421 before anything else, the right token
// included: a rebound name (evil.example pointed at the console's address)
// reads nothing and guesses nothing.
func TestHost(t *testing.T) {
	c := newConsole(t, rt.Env("ADMIN_HOSTS", "console.example.com,ops.example.com:8443"))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(c.URL, "http://"))
	get := func(host string, cl *client, path string) page {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, c.URL+path, nil)
		req.Host = host
		return cl.do(t, req)
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port,
		"console.example.com.evil.example", "ops.example.com", "127.0.0.1:1"} {
		for _, path := range []string{"/", "/login", "/events", "/assets/console.css"} {
			res := get(host, c.bearer(token), path)
			mustStatus(t, "GET "+path+" with Host "+host, res, http.StatusMisdirectedRequest)
			if strings.Contains(res.Body, "<form") || strings.Contains(res.Body, "evt_") {
				t.Errorf("the refusal shows a page: %s", res.Body)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/login", strings.NewReader(url.Values{"token": {"guess"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Host = host
		mustStatus(t, "POST /login with Host "+host, c.anonymous().do(t, req), http.StatusMisdirectedRequest)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "console.example.com",
		"CONSOLE.example.com:443", "ops.example.com:8443"} {
		mustStatus(t, "GET / with Host "+host, get(host, c.bearer(token), "/"), http.StatusOK)
	}
}

// ---------------------------------------------------------------------------
// Secure cookie

// TestSecureCookie: the session cookie is Secure with ADMIN_COOKIE_SECURE,
// or when a proxy of TRUSTED_PROXIES says the browser spoke https; never
// on a client's own word.
func TestSecureCookie(t *testing.T) {
	signIn := func(c *console, header http.Header) string {
		t.Helper()
		res := c.anonymous().post(t, "/login", url.Values{"token": {token}}, header)
		mustStatus(t, "sign-in", res, http.StatusSeeOther)
		ck := res.Header.Get("Set-Cookie")
		for _, want := range []string{"HttpOnly", "SameSite=Strict"} {
			if !strings.Contains(ck, want) {
				t.Errorf("cookie %q lacks %s", ck, want)
			}
		}
		return ck
	}
	secure := func(ck string) bool { return strings.Contains(ck, "; Secure") }
	https := http.Header{"X-Forwarded-Proto": {"https"}}

	t.Run("AdminCookieSecure", func(t *testing.T) {
		c := newConsole(t, rt.Env("ADMIN_COOKIE_SECURE", "true"))
		ck := signIn(c, nil)
		if !secure(ck) {
			t.Errorf("ADMIN_COOKIE_SECURE=true, cookie %q", ck)
		}
		parsed, err := http.ParseSetCookie(ck)
		if err != nil {
			t.Fatal(err)
		}
		b := c.withCookie(parsed.Value)
		res := b.post(t, "/logout", url.Values{"csrf": {b.csrf(t, "/")}}, nil)
		mustStatus(t, "sign-out", res, http.StatusSeeOther)
		if ck := res.Header.Get("Set-Cookie"); !secure(ck) {
			t.Errorf("the sign-out's cookie is not Secure: %q", ck)
		}
	})
	t.Run("TrustedProxy", func(t *testing.T) {
		c := newConsole(t, rt.Env("TRUSTED_PROXIES", "127.0.0.1"))
		if ck := signIn(c, https); !secure(ck) {
			t.Errorf("X-Forwarded-Proto: https from a trusted proxy, cookie %q", ck)
		}
		if ck := signIn(c, http.Header{"X-Forwarded-Proto": {"http"}}); secure(ck) {
			t.Errorf("X-Forwarded-Proto: http, cookie %q", ck)
		}
	})
	t.Run("UntrustedProxy", func(t *testing.T) {
		c := newConsole(t, rt.Env("TRUSTED_PROXIES", "10.0.0.0/8"))
		if ck := signIn(c, https); secure(ck) {
			t.Errorf("X-Forwarded-Proto: https from a peer that is no trusted proxy, cookie %q", ck)
		}
	})
}
