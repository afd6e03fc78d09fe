package console

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Every check of a presented token, a sign-in or a request with
// Authorization, is throttled, in this process's memory:
//
//   - per client: after clientFailures wrong tokens within the lockout
//     (counted from the first), the client is locked out for the lockout,
//     the right token included: it is not even compared. A client is its
//     address as TRUSTED_PROXIES makes it, and an IPv6 client its /64, the
//     block one subscriber usually holds. Wrong tokens are counted as
//     their answers are known: a burst of concurrent guesses from one
//     client is bounded by the overall cap.
//   - overall: wrong tokens from every client together are allowed at
//     overallFailures per lockout, with a burst of as many; each check
//     holds one while it runs, and a right token gives it back. When none
//     is left, every check waits, the right token included, so that a
//     thousand addresses guess no faster than one.
//
// A locked-out or waiting check is answered 429 with Retry-After. A
// signed-in browser is never throttled: its cookie is no token check.
//
// Memory: a client is remembered only after a wrong token, and wrong
// tokens come no faster than the overall cap allows; a client is forgotten
// when its lockout and its window have passed. The table therefore holds a
// few times overallFailures clients at most, and maxClients bounds it
// regardless: beyond it a wrong token is not remembered per client (the
// overall cap still counted it).
const (
	clientFailures  = 5
	overallFailures = 100
	maxClients      = 10000
)

// DefaultLockout is the lockout when Config.Lockout is 0 (ADMIN_LOCKOUT's
// default).
const DefaultLockout = 15 * time.Minute

// throttle is the state of both limits.
type throttle struct {
	lockout    time.Duration
	perClient  int
	overall    float64
	maxClients int

	mu        sync.Mutex
	clients   map[string]*clientRecord
	budget    float64   // wrong tokens the overall cap still allows
	refilled  time.Time // when budget was last topped up
	swept     time.Time
	exhausted bool // budget ran out and has not come back: logged once
}

// clientRecord is what is remembered of one client.
type clientRecord struct {
	since    time.Time // the first wrong token counted
	failures int
	until    time.Time // locked out until then (zero: not locked out)
}

func newThrottle(lockout time.Duration, now time.Time) *throttle {
	return &throttle{lockout: lockout, perClient: clientFailures, overall: overallFailures, maxClients: maxClients,
		clients: map[string]*clientRecord{}, budget: overallFailures, refilled: now, swept: now}
}

// refusal says why a token check may not run now.
type refusal int

const (
	checkAllowed    refusal = iota
	clientLockedOut         // this client gave too many wrong tokens
	overallSpent            // every client together did
)

// begin asks to check a token from client. When the answer is
// checkAllowed, the check holds one unit of the overall budget and the
// caller must call end with its result; otherwise wait is how long to
// wait.
func (t *throttle) begin(client string, now time.Time) (wait time.Duration, why refusal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refill(now)
	if c := t.clients[client]; c != nil && now.Before(c.until) {
		return c.until.Sub(now), clientLockedOut
	}
	if t.budget < 1 {
		return time.Duration((1 - t.budget) * float64(t.lockout) / t.overall), overallSpent
	}
	t.budget--
	return 0, checkAllowed
}

// end records the result of a check begin allowed. It reports whether
// this wrong token locked the client out, and whether it spent the overall
// budget (each once, for the log).
func (t *throttle) end(client string, ok bool, now time.Time) (lockedOut, spent bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok {
		t.budget = math.Min(t.budget+1, t.overall)
		return false, false
	}
	if t.budget < 1 && !t.exhausted {
		t.exhausted, spent = true, true
	}
	c := t.clients[client]
	if c == nil {
		if now.Sub(t.swept) >= t.lockout || len(t.clients) >= t.maxClients {
			t.sweep(now)
		}
		if len(t.clients) >= t.maxClients {
			return false, spent
		}
		c = &clientRecord{since: now}
		t.clients[client] = c
	}
	if !now.Before(c.since.Add(t.lockout)) && !now.Before(c.until) {
		*c = clientRecord{since: now}
	}
	c.failures++
	if c.failures >= t.perClient && !now.Before(c.until) {
		c.until = now.Add(t.lockout)
		lockedOut = true
	}
	return lockedOut, spent
}

// refill tops the overall budget up for the time since the last refill.
func (t *throttle) refill(now time.Time) {
	if d := now.Sub(t.refilled); d > 0 {
		t.budget = math.Min(t.overall, t.budget+d.Seconds()*t.overall/t.lockout.Seconds())
		t.refilled = now
	}
	if t.budget >= 1 {
		t.exhausted = false
	}
}

// sweep forgets the clients whose lockout and window have passed.
func (t *throttle) sweep(now time.Time) {
	for k, c := range t.clients {
		if !now.Before(c.until) && !now.Before(c.since.Add(t.lockout)) {
			delete(t.clients, k)
		}
	}
	t.swept = now
}

// size is how many clients are remembered.
func (t *throttle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}

// clientOf is the key a request's client is throttled by: its address as
// TRUSTED_PROXIES makes it, an IPv6 address by its /64. An address that
// does not parse shares one key with every other such.
func (c *Console) clientOf(r *http.Request) string {
	a, err := netip.ParseAddr(c.clientIP(r))
	if err != nil {
		return "unknown"
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// clientIP is the request's client address: Config.ClientIP's, else the
// socket's peer.
func (c *Console) clientIP(r *http.Request) string {
	if c.cfg.ClientIP != nil {
		return c.cfg.ClientIP(r)
	}
	return peerIP(r).String()
}

// peerIP is the socket's peer (invalid when RemoteAddr is not an address).
func peerIP(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		a, _ := netip.ParseAddr(r.RemoteAddr)
		return a.Unmap()
	}
	return ap.Addr().Unmap().WithZone("")
}

// checkToken runs check (the comparison of a presented token) under the
// throttle. It answers 429 itself, and returns false, when the check may
// not run now; otherwise it returns check's result in ok.
func (c *Console) checkToken(w http.ResponseWriter, r *http.Request, check func() bool) (ok, ran bool) {
	client := c.clientOf(r)
	wait, why := c.throttle.begin(client, c.cfg.Now())
	if why != checkAllowed {
		c.tooMany(w, r, wait, why)
		return false, false
	}
	ok = check()
	lockedOut, spent := c.throttle.end(client, ok, c.cfg.Now())
	if lockedOut {
		c.cfg.Log.WarnContext(r.Context(), "console: client locked out after wrong tokens", "client", client,
			"failures", clientFailures, "for", c.throttle.lockout.String())
	}
	if spent {
		c.cfg.Log.WarnContext(r.Context(), "console: wrong tokens from all clients reached the overall cap: every sign-in waits",
			"cap", overallFailures, "per", c.throttle.lockout.String())
	}
	return ok, true
}

// tooMany answers a token check the throttle refused: 429 with
// Retry-After, as a sign-in page, a page or JSON.
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, why refusal) {
	secs := int64(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	msg := "Too many wrong tokens from your address: sign-in is refused for " + waitText(secs) + "."
	if why == overallSpent {
		msg = "Too many wrong tokens from everywhere: sign-in is paused for " + waitText(secs) + "."
	}
	if r.Method == http.MethodPost && r.URL.Path == "/login" && !wantsJSON(r) {
		c.render(w, r, http.StatusTooManyRequests, "login", "Sign in", "", loginView{Next: localPath(r.PostFormValue("next")), Problem: msg})
		return
	}
	c.fail(w, r, http.StatusTooManyRequests, msg, nil)
}

func waitText(secs int64) string {
	if secs < 120 {
		return strconv.FormatInt(secs, 10) + " seconds"
	}
	return strconv.FormatInt((secs+59)/60, 10) + " minutes"
}
