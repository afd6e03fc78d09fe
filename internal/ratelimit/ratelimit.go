// Package ratelimit bounds what the clients of a public, unsigned route may
// make the receiver do: the routes a buyer's browser reaches (GET
// /checkout/return, GET /billing/portal), each request of which may cost a
// call to a provider's API. Nobody signs such a request, so nothing in it
// is trusted but its client address (as TRUSTED_PROXIES makes it).
//
// Two token buckets decide, in this process's memory:
//
//   - per client: Rate a second, Burst at once. A client is its address,
//     an IPv6 address by its /64 (the block one subscriber usually holds).
//     A client over its rate is refused (ClientLimited): the route answers
//     429 with Retry-After.
//   - overall: every client together, OverallRate a second, OverallBurst at
//     once: what the provider's API is asked for at most, whatever the
//     number of addresses an attacker holds. Past it a request is refused
//     (OverallLimited), and the route decides what that means for a
//     genuine buyer (the checkout return still redirects, leaving the work
//     to the webhook).
//
// Memory: a client's bucket is a few dozen bytes, and the table holds at
// most MaxClients of them. A bucket that has filled up again says nothing
// more than a new one and is forgotten when the table is swept (at most
// once a second while it is full); with the table full of clients that
// still matter, a client it does not hold is limited by the overall
// bucket alone. A refused request costs a lock and a map lookup, no
// goroutine, no buffer and no call.
package ratelimit

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits are a limiter's rates. Zero fields take Defaults'.
type Limits struct {
	Rate         float64 // per client, per second
	Burst        float64 // per client, at once
	OverallRate  float64 // every client together, per second
	OverallBurst float64 // every client together, at once
	MaxClients   int     // clients remembered at most
}

// Defaults are "a few calls a second" per client, and what one receiver
// asks of a provider's API at most for its public routes.
var Defaults = Limits{Rate: 2, Burst: 4, OverallRate: 20, OverallBurst: 40, MaxClients: 10000}

func (l Limits) withDefaults() Limits {
	if l.Rate <= 0 {
		l.Rate = Defaults.Rate
	}
	if l.Burst < 1 {
		l.Burst = Defaults.Burst
	}
	if l.OverallRate <= 0 {
		l.OverallRate = Defaults.OverallRate
	}
	if l.OverallBurst < 1 {
		l.OverallBurst = Defaults.OverallBurst
	}
	if l.MaxClients <= 0 {
		l.MaxClients = Defaults.MaxClients
	}
	return l
}

// Verdict is what Allow decided.
type Verdict int

const (
	// Allowed: the request may make its call.
	Allowed Verdict = iota
	// ClientLimited: its client is over its rate.
	ClientLimited
	// OverallLimited: every client together is over the overall rate.
	OverallLimited
)

// Limiter is a per-client and an overall token bucket. Safe for
// concurrent use.
type Limiter struct {
	l Limits

	mu      sync.Mutex
	clients map[string]*bucket
	overall bucket
	swept   time.Time
}

// bucket is a token bucket: tokens at a time.
type bucket struct {
	tokens float64
	at     time.Time
}

// fill tops b up for the time since it was last, at rate, to burst.
func (b *bucket) fill(now time.Time, rate, burst float64) {
	if d := now.Sub(b.at).Seconds(); d > 0 {
		b.tokens = math.Min(burst, b.tokens+d*rate)
	}
	b.at = now
}

// wait is how long until b holds one token, at rate.
func (b *bucket) wait(rate float64) time.Duration {
	return time.Duration(math.Max(0, 1-b.tokens) / rate * float64(time.Second))
}

// New returns a limiter with limits l.
func New(l Limits) *Limiter {
	l = l.withDefaults()
	return &Limiter{l: l, clients: map[string]*bucket{}}
}

// Allow takes a token from client's bucket and from the overall one, or
// says which is empty and how long until it holds one again.
func (r *Limiter) Allow(client string, now time.Time) (Verdict, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.overall.at.IsZero() {
		r.overall = bucket{tokens: r.l.OverallBurst, at: now}
	}
	r.overall.fill(now, r.l.OverallRate, r.l.OverallBurst)
	c := r.clients[client]
	if c == nil {
		c = r.remember(client, now)
	} else {
		c.fill(now, r.l.Rate, r.l.Burst)
	}
	if c != nil && c.tokens < 1 {
		return ClientLimited, c.wait(r.l.Rate)
	}
	if r.overall.tokens < 1 {
		return OverallLimited, r.overall.wait(r.l.OverallRate)
	}
	r.overall.tokens--
	if c != nil {
		c.tokens--
	}
	return Allowed, 0
}

// remember adds a full bucket for client, sweeping the table first when it
// is full; nil when it is full of clients that still matter.
func (r *Limiter) remember(client string, now time.Time) *bucket {
	if len(r.clients) >= r.l.MaxClients && now.Sub(r.swept) >= time.Second {
		for k, b := range r.clients {
			if b.tokens+now.Sub(b.at).Seconds()*r.l.Rate >= r.l.Burst {
				delete(r.clients, k)
			}
		}
		r.swept = now
	}
	if len(r.clients) >= r.l.MaxClients {
		return nil
	}
	b := &bucket{tokens: r.l.Burst, at: now}
	r.clients[client] = b
	return b
}

// Size is how many clients are remembered.
func (r *Limiter) Size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients)
}

// Client is the key a client address is limited by: the address, an IPv6
// address by its /64; anything that is not an address shares one key.
func Client(addr string) string {
	a, err := netip.ParseAddr(addr)
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

// ClientOf is the key a request's client is limited by: Client of its
// address as ip makes it (TRUSTED_PROXIES), else of the socket's peer.
func ClientOf(r *http.Request, ip func(*http.Request) string) string {
	if ip != nil {
		return Client(ip(r))
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return Client(host)
}

// Page answers a public route's short plain-text page with status, never
// cached, and with Retry-After (at least a second) when retry is set.
func Page(w http.ResponseWriter, status int, retry time.Duration, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if retry > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(max(retry, time.Second).Seconds())), 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text + "\n"))
}

// Outcomes returns the counter of what became of a public route's requests,
// labelled outcome, every value of outcomes present from the start (at 0),
// registered with reg when it is not nil.
func Outcomes(name, help string, outcomes []string, reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"outcome"})
	for _, o := range outcomes {
		c.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}
