package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Attacks on the operator console of the built binary: guessing the
// token, replaying a cookie after sign-out (on another replica), a page
// served under another name that resolves to the console (DNS rebinding),
// a redirect off the console after sign-in, a session cookie sent in clear
// behind a TLS proxy. Run them against another binary with E2E_SERVER_BIN
// to see what it does.

// consoleCall is one request to the console.
type consoleCall struct {
	method, path string
	host         string // the Host header ("": the URL's)
	form         string // an urlencoded body, as written
	bearer       string
	cookie       string // the session cookie's value
	xff          string // X-Forwarded-For, as a proxy sends it
	header       http.Header
}

// consoleAnswer is what the console answered.
type consoleAnswer struct {
	Status int
	Header http.Header
	Body   string
}

// session is the value of the session cookie the answer sets ("" if none).
func (a consoleAnswer) session() string {
	for _, line := range a.Header.Values("Set-Cookie") {
		if ck, err := http.ParseSetCookie(line); err == nil && ck.Name == "console_session" && ck.MaxAge >= 0 {
			return ck.Value
		}
	}
	return ""
}

// consoleTransport sends one request and hands back the answer as it is:
// a redirect is not followed, nor its Location parsed (a client would
// refuse to read some that a browser follows).
var consoleTransport = &http.Transport{}

// do sends c to the console at base, through rt (nil: consoleTransport).
func (c consoleCall) do(t *testing.T, base string, rt http.RoundTripper) consoleAnswer {
	t.Helper()
	if rt == nil {
		rt = consoleTransport
	}
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if c.form != "" || method == http.MethodPost {
		body = strings.NewReader(c.form)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.host != "" {
		req.Host = c.host
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "console_session", Value: c.cookie})
	}
	if c.xff != "" {
		req.Header.Set("X-Forwarded-For", c.xff)
	}
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, c.path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return consoleAnswer{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

func signInForm(token, next string) string {
	return "token=" + url.QueryEscape(token) + "&next=" + next
}

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleSignIn signs in at admin and returns the session cookie.
func consoleSignIn(t *testing.T, admin string) string {
	t.Helper()
	a := consoleCall{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, "/")}.do(t, admin, nil)
	if a.Status != http.StatusSeeOther || a.session() == "" {
		t.Fatalf("sign-in: %d, no session cookie: %s", a.Status, a.Body)
	}
	return a.session()
}

// consoleSignOut signs the session out at admin, with its page's CSRF
// token, as the sign-out button does.
func consoleSignOut(t *testing.T, admin, cookie string) {
	t.Helper()
	page := consoleCall{path: "/", cookie: cookie}.do(t, admin, nil)
	m := consoleCSRF.FindStringSubmatch(page.Body)
	if page.Status != http.StatusOK || m == nil {
		t.Fatalf("GET / signed in: %d, no CSRF token", page.Status)
	}
	a := consoleCall{method: http.MethodPost, path: "/logout", form: "csrf=" + url.QueryEscape(m[1]), cookie: cookie}.do(t, admin, nil)
	if a.Status != http.StatusSeeOther {
		t.Fatalf("POST /logout: %d %s", a.Status, a.Body)
	}
}

// consoleLockout is ADMIN_LOCKOUT in these tests: short, so that a test
// sees a client recover, long enough for a handful of requests to
// finish within it on a loaded machine (the test retries when they did
// not).
const consoleLockout = 4 * time.Second

// TestConsoleSignInThrottled: after five wrong tokens from one client
// (its address as TRUSTED_PROXIES makes it), its sign-in and bearer
// requests are answered 429 with Retry-After, the right token included,
// while another client signs in; after ADMIN_LOCKOUT it signs in again.
func TestConsoleSignInThrottled(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "console", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken,
		"TRUSTED_PROXIES", "127.0.0.1", "ADMIN_LOCKOUT", consoleLockout.String()))
	admin := consoleAdminURL(t, p)

	var client string
	for round := 1; ; round++ {
		client = fmt.Sprintf("192.0.2.%d", round)
		var start time.Time
		for i := range 5 {
			if i == 4 {
				start = time.Now() // the lockout runs from the fifth wrong token
			}
			a := consoleCall{method: http.MethodPost, path: "/login", form: signInForm("wrong-token-"+strconv.Itoa(i), "/"), xff: client}.do(t, admin, nil)
			if a.Status != http.StatusUnauthorized {
				t.Fatalf("wrong token %d from %s: %d, want 401", i+1, client, a.Status)
			}
		}
		login := consoleCall{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, "/"), xff: client}.do(t, admin, nil)
		bearer := consoleCall{path: "/", bearer: consoleToken, xff: client}.do(t, admin, nil)
		if elapsed := time.Since(start); (login.Status != http.StatusTooManyRequests || bearer.Status != http.StatusTooManyRequests) &&
			elapsed >= consoleLockout && round < 3 {
			t.Logf("round %d took %v, longer than the lockout: again", round, elapsed)
			continue
		}
		for what, a := range map[string]consoleAnswer{"sign-in": login, "bearer request": bearer} {
			if a.Status != http.StatusTooManyRequests {
				t.Fatalf("the right token's %s after 5 wrong ones from %s: %d, want 429", what, client, a.Status)
			}
			if n, err := strconv.Atoi(a.Header.Get("Retry-After")); err != nil || n < 1 || time.Duration(n)*time.Second > consoleLockout {
				t.Errorf("%s: Retry-After %q, want 1 to %v", what, a.Header.Get("Retry-After"), consoleLockout)
			}
			if a.session() != "" {
				t.Errorf("a throttled %s got a session cookie", what)
			}
		}
		break
	}
	t.Logf("client %s locked out: 429 with Retry-After, the right token included", client)

	other := consoleCall{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, "/"), xff: "192.0.2.200"}.do(t, admin, nil)
	if other.Status != http.StatusSeeOther || other.session() == "" {
		t.Errorf("another client's sign-in meanwhile: %d, want 303 with a cookie", other.Status)
	}
	if !p.out.contains(`"console: client locked out after wrong tokens"`) {
		t.Error("the lockout is not logged")
	}

	// The right token, tried until it is accepted (a throttled try does not
	// extend the lockout).
	start := time.Now()
	waitFor(t, 10*consoleLockout, "the locked-out client to sign in again", func() bool {
		a := consoleCall{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, "/"), xff: client}.do(t, admin, nil)
		if a.Status != http.StatusSeeOther && a.Status != http.StatusTooManyRequests {
			t.Fatalf("sign-in while waiting: %d", a.Status)
		}
		return a.Status == http.StatusSeeOther
	})
	t.Logf("signed in again %v later", time.Since(start).Round(100*time.Millisecond))
	if code := p.Term(t, 30*time.Second); code != 0 {
		t.Errorf("the receiver exited %d after SIGTERM", code)
	}
}

// TestConsoleNotLockedOutByOthers: 125 wrong tokens from 25 addresses (5
// each, so every one of them is locked out) leave the operator's right
// token, from an address that has not failed, accepted: 200 for a bearer
// request, 303 with a session for a sign-in. (Before, an overall throttle
// answered both 429: the attackers locked the operator out.)
func TestConsoleNotLockedOutByOthers(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "console", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken,
		"TRUSTED_PROXIES", "127.0.0.1"))
	admin := consoleAdminURL(t, p)
	counts := map[int]int{}
	for a := range 25 {
		for range 5 {
			r := consoleCall{path: "/", bearer: "wrong-token", xff: fmt.Sprintf("10.0.0.%d", a+1)}.do(t, admin, nil)
			counts[r.Status]++
		}
	}
	if counts[http.StatusOK] != 0 || counts[http.StatusUnauthorized] == 0 {
		t.Fatalf("125 wrong tokens from 25 addresses answered %v", counts)
	}
	t.Logf("125 wrong bearer tokens from 25 addresses (10.0.0.1-25, 5 each): answers by status %v", counts)
	b := consoleCall{path: "/", bearer: consoleToken, xff: "198.51.100.77"}.do(t, admin, nil)
	if b.Status != http.StatusOK {
		t.Errorf("the right bearer token from a new address: %d (Retry-After %q), want 200", b.Status, b.Header.Get("Retry-After"))
	}
	s := consoleCall{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, "/"), xff: "198.51.100.78"}.do(t, admin, nil)
	if s.Status != http.StatusSeeOther || s.session() == "" {
		t.Errorf("a sign-in with the right token from a new address: %d (Retry-After %q, session %v), want 303 with a session",
			s.Status, s.Header.Get("Retry-After"), s.session() != "")
	}
	// The attackers themselves stay locked out.
	if a := (consoleCall{path: "/", bearer: consoleToken, xff: "10.0.0.1"}).do(t, admin, nil); a.Status != http.StatusTooManyRequests {
		t.Errorf("a locked-out address's right token: %d, want 429", a.Status)
	}
}

// TestConsoleLogoutRevokes: two replicas on one database; a session
// signed in on one and signed out on the other opens no page on either,
// its cookie replayed as it was.
func TestConsoleLogoutRevokes(t *testing.T) {
	w := newWorld(t)
	env := w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken)
	a := consoleAdminURL(t, startReceiver(t, "replica-a", env))
	b := consoleAdminURL(t, startReceiver(t, "replica-b", env))

	cookie := consoleSignIn(t, a)
	for name, admin := range map[string]string{"a": a, "b": b} {
		if got := (consoleCall{path: "/", cookie: cookie}).do(t, admin, nil); got.Status != http.StatusOK {
			t.Fatalf("replica %s with the session: %d, want 200", name, got.Status)
		}
	}
	consoleSignOut(t, b, cookie)
	for name, admin := range map[string]string{"a": a, "b": b} {
		for _, path := range []string{"/", "/events", "/events?state=parked"} {
			if got := (consoleCall{path: path, cookie: cookie}).do(t, admin, nil); got.Status != http.StatusUnauthorized {
				t.Errorf("replica %s, GET %s with the signed-out cookie: %d, want 401", name, path, got.Status)
			}
		}
	}
	if n := count(t, openPool(t, w.DBURL), `SELECT count(*) FROM console_sessions WHERE revoked_at IS NOT NULL`); n != 1 {
		t.Errorf("%d revoked sessions stored, want 1", n)
	}
}

// TestConsoleForeignHost: a page under another name that resolves to the
// console's address (DNS rebinding: the browser sends that name as Host)
// reads no page and tries no token: 421. The console's own address, its
// loopback names and a name of ADMIN_HOSTS are answered.
func TestConsoleForeignHost(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "console", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken,
		"ADMIN_HOSTS", "console.example.com"))
	admin := consoleAdminURL(t, p)
	addr := strings.TrimPrefix(admin, "http://")
	_, port, _ := net.SplitHostPort(addr)

	// A browser on evil.example, whose name now resolves to the console.
	rebound := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	evil := "http://evil.example:" + port
	for _, c := range []consoleCall{
		{path: "/login"},
		{path: "/", bearer: consoleToken},
		{path: "/events?state=parked", bearer: consoleToken},
		{method: http.MethodPost, path: "/login", form: signInForm("guess", "/")},
		{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, "/")},
	} {
		a := c.do(t, evil, rebound)
		if a.Status != http.StatusMisdirectedRequest {
			t.Errorf("%s %s as evil.example: %d, want 421", c.method, c.path, a.Status)
		}
		if a.session() != "" || strings.Contains(a.Body, "<form") {
			t.Errorf("%s %s as evil.example: the answer carries a page or a session", c.method, c.path)
		}
	}
	for _, host := range []string{addr, "localhost:" + port, "console.example.com"} {
		if a := (consoleCall{path: "/", bearer: consoleToken, host: host}).do(t, admin, nil); a.Status != http.StatusOK {
			t.Errorf("GET / with Host %s: %d, want 200", host, a.Status)
		}
	}
	if a := (consoleCall{path: "/", bearer: consoleToken, host: "console.example.com.evil.example"}).do(t, admin, nil); a.Status != http.StatusMisdirectedRequest {
		t.Errorf("GET / with a Host that ends in another domain: %d, want 421", a.Status)
	}
}

// TestConsoleRedirects: after sign-in the console redirects only to a path
// of its own: a next= that a browser would read as another host (tabs and
// newlines it drops, a backslash it reads as a slash, //, a scheme)
// redirects to "/".
func TestConsoleRedirects(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "console", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken))
	admin := consoleAdminURL(t, p)
	for _, tc := range []struct{ next, want string }{
		// next as it is written in the form's body, urlencoded.
		{"%2Fevents%3Fstate%3Dparked", "/events?state=parked"},
		{"/%09/evil.example", "/"},
		{"/%0a/evil.example", "/"},
		{"/%0d%0a/evil.example", "/"},
		{"/%5Cevil.example", "/"},
		{"%5C%5Cevil.example", "/"},
		{"//evil.example", "/"},
		{"/%2509/evil.example", "/"},
		{"/%252F/evil.example", "/"},
		{"https://evil.example/", "/"},
		{"javascript:alert(1)", "/"},
	} {
		a := consoleCall{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, tc.next)}.do(t, admin, nil)
		if a.Status != http.StatusSeeOther {
			t.Fatalf("sign-in with next=%s: %d", tc.next, a.Status)
		}
		if got := a.Header.Get("Location"); got != tc.want {
			t.Errorf("sign-in with next=%s redirects to %q, want %q", tc.next, got, tc.want)
		}
	}
}

// TestConsoleSecureCookie: with ADMIN_COOKIE_SECURE=true the session cookie
// is Secure; without it, it is Secure when a proxy of TRUSTED_PROXIES says
// the browser spoke https, and not on a request's own word.
func TestConsoleSecureCookie(t *testing.T) {
	w := newWorld(t)
	cookie := func(admin string, header http.Header) string {
		t.Helper()
		a := consoleCall{method: http.MethodPost, path: "/login", form: signInForm(consoleToken, "/"), header: header}.do(t, admin, nil)
		if a.Status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", a.Status)
		}
		ck := a.Header.Get("Set-Cookie")
		for _, want := range []string{"HttpOnly", "SameSite=Strict"} {
			if !strings.Contains(ck, want) {
				t.Errorf("cookie %q lacks %s", ck, want)
			}
		}
		return ck
	}
	secure := func(ck string) bool { return strings.Contains(ck, "; Secure") }
	https := http.Header{"X-Forwarded-Proto": {"https"}}

	on := consoleAdminURL(t, startReceiver(t, "secure", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken,
		"ADMIN_COOKIE_SECURE", "true")))
	if ck := cookie(on, nil); !secure(ck) {
		t.Errorf("ADMIN_COOKIE_SECURE=true: cookie %q is not Secure", ck)
	}
	proxied := consoleAdminURL(t, startReceiver(t, "proxied", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken,
		"TRUSTED_PROXIES", "127.0.0.1")))
	if ck := cookie(proxied, https); !secure(ck) {
		t.Errorf("X-Forwarded-Proto: https from a trusted proxy: cookie %q is not Secure", ck)
	}
	if ck := cookie(proxied, nil); secure(ck) {
		t.Errorf("plain HTTP: cookie %q is Secure (a browser would drop it)", ck)
	}
	direct := consoleAdminURL(t, startReceiver(t, "direct", w.env("ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken)))
	if ck := cookie(direct, https); secure(ck) {
		t.Errorf("X-Forwarded-Proto: https with no trusted proxy: cookie %q is Secure", ck)
	}
}
