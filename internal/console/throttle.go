package console

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/paywebhooks/receiver/internal/ratelimit"
)

// Every check of a presented token, a sign-in or a request with
// Authorization, is throttled, in this process's memory:
//
//   - per client: after clientFailures wrong tokens within the lockout
//     (counted from the first), the client is locked out for the lockout,
//     the right token included: it is not even compared. A client is its
//     address as TRUSTED_PROXIES makes it, and an IPv6 client its /64, the
//     block one subscriber usually holds.
//   - overall: wrong tokens from every client together are allowed at
//     overallFailures per lockout, with a burst of as many; each check
//     holds one while it runs, and a right token gives it back. Once they
//     are spent, the throttle stops trusting anybody's count: a wrong
//     token locks its client out at once (not at the clientFailures-th),
//     and a client may have one check in flight. A client that has not
//     failed is still checked, so the right token from an address that
//     gave no wrong one always signs in: a thousand addresses guessing
//     cannot lock the operator out, and each of them gets one guess per
//     lockout.
//
// Memory: a client is remembered after a wrong token, or while its check
// runs once the budget is spent, and forgotten when its lockout and its
// window have passed. maxClients bounds the table: with as many clients
// remembered, a client the table does not hold waits for the overall
// budget, as every client did before it was spent (otherwise an attacker
// with more addresses than the table holds would guess without bound), so
// that guesses stay at most maxClients + overallFailures per lockout.
// Only then does a client that has not failed wait.
//
// A locked-out or waiting check is answered 429 with Retry-After. A
// signed-in browser is never throttled: its cookie is no token check.
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
	inflight int       // checks begun and not ended while the budget was spent
}

// forgettable reports whether nothing of c matters any more at now.
func (c *clientRecord) forgettable(now time.Time, lockout time.Duration) bool {
	return c.inflight == 0 && !now.Before(c.until) && (c.failures == 0 || !now.Before(c.since.Add(lockout)))
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
	clientBusy              // this client has a check running while the overall budget is spent
	overallSpent            // every client together did, and the table of clients is full
)

// hold is what a check begin allowed holds until end.
type hold int

const (
	holdBudget hold = iota // one unit of the overall budget
	holdClient             // its client's one check in flight (the budget was spent)
)

// begin asks to check a token from client. When the answer is
// checkAllowed, the check holds what h says and the caller must call end
// with h and its result; otherwise wait is how long to wait.
func (t *throttle) begin(client string, now time.Time) (h hold, wait time.Duration, why refusal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refill(now)
	c := t.clients[client]
	if c != nil && now.Before(c.until) {
		return 0, c.until.Sub(now), clientLockedOut
	}
	if t.budget >= 1 {
		t.budget--
		return holdBudget, 0, checkAllowed
	}
	if c == nil {
		if c = t.remember(client, now); c == nil {
			return 0, t.refillTime(), overallSpent
		}
	}
	if c.inflight > 0 {
		return 0, time.Second, clientBusy
	}
	c.inflight++
	return holdClient, 0, checkAllowed
}

// end records the result of a check begin allowed. It reports after how
// many wrong tokens this one locked the client out (0: it did not), and
// whether it spent the overall budget (once, for the log).
func (t *throttle) end(client string, h hold, ok bool, now time.Time) (lockedOut int, spent bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.clients[client]
	if h == holdClient && c != nil {
		c.inflight--
	}
	if ok {
		if h == holdBudget {
			t.budget = math.Min(t.budget+1, t.overall)
		}
		if c != nil && c.forgettable(now, t.lockout) {
			delete(t.clients, client)
		}
		return 0, false
	}
	if t.budget < 1 && !t.exhausted {
		t.exhausted, spent = true, true
	}
	if c == nil {
		if c = t.remember(client, now); c == nil {
			return 0, spent // the overall cap counted it
		}
	}
	if c.failures > 0 && !now.Before(c.since.Add(t.lockout)) && !now.Before(c.until) {
		c.since, c.failures = time.Time{}, 0
	}
	if c.failures == 0 {
		c.since = now
	}
	c.failures++
	// Once the budget is spent, one wrong token is enough: the client's
	// count no longer tells an operator's typo from one address of many.
	if (c.failures >= t.perClient || h == holdClient) && !now.Before(c.until) {
		c.until = now.Add(t.lockout)
		lockedOut = c.failures
	}
	return lockedOut, spent
}

// remember adds a record for client, sweeping the table first when it is
// due or full; nil when the table is full of clients that still matter.
func (t *throttle) remember(client string, now time.Time) *clientRecord {
	if now.Sub(t.swept) >= t.lockout || (len(t.clients) >= t.maxClients && now.Sub(t.swept) >= time.Second) {
		t.sweep(now)
	}
	if len(t.clients) >= t.maxClients {
		return nil
	}
	c := &clientRecord{}
	t.clients[client] = c
	return c
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

// refillTime is how long until the budget holds one wrong token again.
func (t *throttle) refillTime() time.Duration {
	return time.Duration((1 - t.budget) * float64(t.lockout) / t.overall)
}

// sweep forgets the clients whose lockout and window have passed.
func (t *throttle) sweep(now time.Time) {
	for k, c := range t.clients {
		if c.forgettable(now, t.lockout) {
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
func (c *Console) clientOf(r *http.Request) string { return ratelimit.Client(c.clientIP(r)) }

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
	h, wait, why := c.throttle.begin(client, c.cfg.Now())
	if why != checkAllowed {
		c.tooMany(w, r, wait, why)
		return false, false
	}
	ok = check()
	lockedOut, spent := c.throttle.end(client, h, ok, c.cfg.Now())
	if lockedOut > 0 {
		c.cfg.Log.WarnContext(r.Context(), "console: client locked out after wrong tokens", "client", client,
			"failures", lockedOut, "for", c.throttle.lockout.String())
	}
	if spent {
		c.cfg.Log.WarnContext(r.Context(), "console: wrong tokens from all clients reached the overall cap: "+
			"from now on one wrong token locks its client out", "cap", overallFailures, "per", c.throttle.lockout.String())
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
	var msg string
	switch why {
	case clientBusy:
		msg = "Another sign-in from your address is being checked: try again in " + waitText(secs) + "."
	case overallSpent:
		msg = "Too many wrong tokens from everywhere: sign-in is paused for " + waitText(secs) + "."
	default:
		msg = "Too many wrong tokens from your address: sign-in is refused for " + waitText(secs) + "."
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
