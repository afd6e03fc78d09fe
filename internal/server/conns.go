package server

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// connLimit is HTTP_ADDR's listener with a bound on the connections open at
// once (MAX_CONNECTIONS), each of which costs a goroutine, a file
// descriptor, net/http's buffers and its headers whatever it sends.
//
// A connection is a stranger's until a request on it is verified (its
// signature checked): then it is a sender's for the rest of its life. The
// bound is kept for senders:
//
//   - Up to seven eighths of it, any connection is accepted.
//   - In the last eighth, only one from an address (an IPv6 /64) whose
//     strangers' connections are fewer than its share: the bound split
//     equally among the /24s and /48s holding strangers' connections and
//     one more (a newcomer's), each one's part equally among its
//     sub-blocks holding some (an IPv6 /48's among its /56s, theirs among
//     their /64s; a /24's among its addresses: see webhooks.Blocks). An
//     address whose share is smaller still gets up to minConnShare, unless
//     one of its blocks holds its own part (and minConnShare) already. The
//     addresses of one /24 thus share one /24's part, and a sender in an
//     attacker's /24 keeps its own part of it. A sender's connections
//     count in no share.
//   - At the bound, a connection admitted by the shares closes the one
//     that has waited longest of, in this order: the strangers' idle
//     connections (new ones included: nothing has come on them), the
//     strangers' busy ones (a request being read or answered), the
//     senders' idle ones. A sender's busy connection is never closed.
//     With none of those, the newcomer is refused.
//
// So however many addresses hold connections and sit on them, a sender's
// new connection closes one of theirs, and its request is read before
// their thousand others have been closed in turn. A refused connection,
// and a stranger's closed one, is reset at once, before anything more is
// read: its sender sees it reset and retries, rather than waiting in a
// queue behind everybody else's.
//
// Behind a proxy every connection is the proxy's: a limit per client is
// then the proxy's to enforce (docs/http.md, "In front of the receiver").
type connLimit struct {
	net.Listener
	max     int
	reserve int // the last part of max, kept for addresses below their share
	m       *connMetrics

	mu   sync.Mutex
	open int
	// strangers are the blocks holding strangers' connections.
	strangers *webhooks.BlockTree
	// queues are the connections that may be closed at the bound, one
	// queue per class, each the longest waiting first.
	queues [senderBusy]connQueue
}

// minConnShare is the fewest strangers' connections an address may hold in
// the last eighth, whatever its share: a sender that opens a few at once
// (three events, each on a connection of its own) gets them.
const minConnShare = 4

// connClass is what a connection is doing, in the order the bound closes
// them.
type connClass int

const (
	strangerIdle connClass = iota // not verified; nothing in progress
	strangerBusy                  // not verified; a request in progress
	senderIdle                    // a request on it was verified; idle
	senderBusy                    // verified; a request in progress: never closed
	released                      // closed, or counted out
)

// classNames label http_connections_evicted_total: a closed set.
var classNames = [...]string{strangerIdle: "stranger_idle", strangerBusy: "stranger_busy", senderIdle: "sender_idle"}

// Refusal reasons of http_connections_refused_total: a closed set.
const (
	refusedOverShare = "over_share" // the last eighth, and the address held its share
	refusedFull      = "full"       // the bound, and nothing that may be closed
)

// connMetrics are the listener's series. They exist from New on, so that
// the alerts' monitor counts them; the listener comes with Run.
type connMetrics struct {
	refused *prometheus.CounterVec // reason
	evicted *prometheus.CounterVec // class
}

func newConnMetrics(reg prometheus.Registerer) *connMetrics {
	m := &connMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: alerts.ConnectionsRefused,
			Help: "Connections to HTTP_ADDR reset as soon as accepted, by reason: over_share (the last eighth of MAX_CONNECTIONS was in use and the peer's address or block held its share), full (MAX_CONNECTIONS were open, none that may be closed).",
		}, []string{"reason"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: alerts.ConnectionsEvicted,
			Help: "Connections to HTTP_ADDR closed to make room for a new one at MAX_CONNECTIONS, by class: stranger_idle, stranger_busy (never verified), sender_idle (a request on it was verified).",
		}, []string{"class"}),
	}
	for _, r := range []string{refusedOverShare, refusedFull} {
		m.refused.WithLabelValues(r)
	}
	for _, c := range classNames {
		m.evicted.WithLabelValues(c)
	}
	reg.MustRegister(m.refused, m.evicted)
	return m
}

// limitConns wraps ln in a bound of max connections, counted in m; reg
// gets the gauge of the connections open.
func limitConns(ln net.Listener, max int, m *connMetrics, reg prometheus.Registerer) *connLimit {
	l := &connLimit{Listener: ln, max: max, reserve: max / 8, m: m, strangers: webhooks.NewBlockTree()}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "http_connections_open",
		Help: "Connections open on HTTP_ADDR (at most MAX_CONNECTIONS).",
	}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(l.open)
	}))
	return l
}

// Accept returns the next connection the bound admits, closing those it
// does not, and those it closes to make room.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l, blocks: webhooks.BlocksOf(peerAddr(c))}
		ok, victim := l.admit(tc)
		if victim != nil {
			victim.drop()
		}
		if ok {
			return tc, nil
		}
		tc.drop()
	}
}

// admit counts tc in, if the bound admits it, and returns the connection
// it closes to make room, if any: counted out already, to be dropped by
// the caller.
func (l *connLimit) admit(tc *trackedConn) (ok bool, victim *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max-l.reserve {
		if !l.strangers.Admits(tc.blocks, int64(l.max), 1, minConnShare) {
			l.m.refused.WithLabelValues(refusedOverShare).Inc()
			return false, nil
		}
	}
	if l.open >= l.max {
		for c := range l.queues {
			if victim = l.queues[c].front(); victim != nil {
				break
			}
		}
		if victim == nil {
			l.m.refused.WithLabelValues(refusedFull).Inc()
			return false, nil
		}
		l.m.evicted.WithLabelValues(classNames[victim.class]).Inc()
		l.release(victim)
	}
	l.open++
	l.strangers.Enter(tc.blocks)
	tc.class = strangerIdle
	l.queues[strangerIdle].pushBack(tc)
	return true, victim
}

// move puts tc in class c (l.mu is held): at the back of its queue, the
// last of it to be closed.
func (l *connLimit) move(tc *trackedConn, c connClass) {
	if tc.class == released {
		return
	}
	if tc.class < senderBusy {
		l.queues[tc.class].remove(tc)
	}
	tc.class = c
	if c < senderBusy {
		l.queues[c].pushBack(tc)
	}
}

// release counts tc out, once (l.mu is held).
func (l *connLimit) release(tc *trackedConn) {
	if tc.class == released {
		return
	}
	if !tc.verified {
		l.strangers.Leave(tc.blocks)
	}
	l.move(tc, released)
	l.open--
}

// connState is the http.Server's ConnState hook: it follows what each
// connection is doing.
func (l *connLimit) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateActive:
		l.move(tc, tc.busy())
	case http.StateIdle:
		l.move(tc, tc.idle())
	case http.StateHijacked, http.StateClosed:
		l.release(tc)
	}
}

// verified marks the connection a request was verified on as a sender's.
func (l *connLimit) verified(tc *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tc.verified || tc.class == released {
		return
	}
	tc.verified = true
	l.strangers.Leave(tc.blocks)
	l.move(tc, senderBusy) // its request is in progress
}

// connKey is the context key of a request's connection (http.Server's
// ConnContext puts it there).
type connKey struct{}

// withConn is the http.Server's ConnContext hook.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// requestVerified is told by the webhook handler of a request whose
// signature was verified: its connection is a sender's from now on.
func requestVerified(r *http.Request) {
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		tc.l.verified(tc)
	}
}

// peerAddr is a connection's peer address.
func peerAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr()
	}
	return netip.Addr{}
}

// trackedConn is an admitted connection: closing it gives its place back,
// once.
type trackedConn struct {
	net.Conn
	l      *connLimit
	blocks webhooks.Blocks
	// Guarded by l.mu:
	class      connClass
	verified   bool
	prev, next *trackedConn // in its class's queue
}

func (c *trackedConn) busy() connClass {
	if c.verified {
		return senderBusy
	}
	return strangerBusy
}

func (c *trackedConn) idle() connClass {
	if c.verified {
		return senderIdle
	}
	return strangerIdle
}

// drop closes a connection the bound refused or counted out. A stranger's
// is reset (nothing of it lingers here, and its sender knows at once); a
// sender's idle one is closed as net/http closes an idle connection, so
// that its client opens another.
func (c *trackedConn) drop() {
	if tcp, ok := c.Conn.(*net.TCPConn); ok && !c.verified {
		_ = tcp.SetLinger(0)
	}
	_ = c.Conn.Close()
}

// CloseWrite shuts the writing side of the connection, as net/http does
// before it closes a connection whose request it has not read to the end:
// without it, the answer (a 408, a 503) would be lost to the reset that
// unread bytes cause.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.release(c)
	c.l.mu.Unlock()
	return err
}

// connQueue is a queue of connections of one class, the longest waiting
// first.
type connQueue struct{ head, tail *trackedConn }

func (q *connQueue) front() *trackedConn { return q.head }

func (q *connQueue) pushBack(c *trackedConn) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *connQueue) remove(c *trackedConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
}
