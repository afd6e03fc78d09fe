package server

import (
	"net"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// connLimit is HTTP_ADDR's listener with a bound on the connections open at
// once (MAX_CONNECTIONS), each of which costs a goroutine, a file
// descriptor, net/http's buffers and its headers whatever it sends. The
// bound is shared by the socket's peer addresses (an IPv6 one by its /64):
// up to seven eighths of it, any connection is accepted; in the last eighth,
// only one from an address holding less than its share (the bound divided
// among the addresses holding connections and one more, the newcomer's),
// so that a few addresses that open connections and sit on them cannot fill
// it; at the bound, none. A refused connection is closed at once, before
// anything is read: its sender sees it reset and retries, rather than
// waiting in a queue behind everybody else's.
//
// Behind a proxy every connection is the proxy's: a limit per client is
// then the proxy's to enforce (README, "In front of the receiver").
type connLimit struct {
	net.Listener
	max     int
	reserve int // the last part of max, kept for addresses below their share

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int

	refused prometheus.Counter
}

// limitConns wraps ln in a bound of max connections; refused counts the
// connections refused.
func limitConns(ln net.Listener, max int, reg prometheus.Registerer) *connLimit {
	l := &connLimit{Listener: ln, max: max, reserve: max / 8, byAddr: map[netip.Addr]int{},
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "http_connections_refused_total",
			Help: "Connections to HTTP_ADDR closed as soon as accepted: MAX_CONNECTIONS were open, or the last eighth of them was and the peer held its share.",
		})}
	reg.MustRegister(l.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
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
// does not.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := peerKey(c)
		if l.admit(key) {
			return &limitedConn{Conn: c, l: l, key: key}, nil
		}
		l.refused.Inc()
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset: nothing of it lingers here
		}
		c.Close()
	}
}

// admit counts a connection from key in, if the bound admits it.
func (l *connLimit) admit(key netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.byAddr[key]
	switch {
	case l.open >= l.max:
		return false
	case l.open >= l.max-l.reserve && held+1 > l.max/(len(l.byAddr)+1):
		// Its share: the bound divided among the addresses holding
		// connections and one more (a newcomer's, or this one's if new).
		return false
	}
	l.open++
	l.byAddr[key] = held + 1
	return true
}

// release counts a connection from key out.
func (l *connLimit) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if n := l.byAddr[key] - 1; n > 0 {
		l.byAddr[key] = n
	} else {
		delete(l.byAddr, key)
	}
}

// peerKey is the key of a connection's peer address.
func peerKey(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return webhooks.SourceOf(a.AddrPort().Addr())
	}
	return netip.Addr{}
}

// limitedConn is an admitted connection: closing it gives its place back,
// once.
type limitedConn struct {
	net.Conn
	l    *connLimit
	key  netip.Addr
	once sync.Once
}

// CloseWrite shuts the writing side of the connection, as net/http does
// before it closes a connection whose request it has not read to the end:
// without it, the answer (a 408, a 503) would be lost to the reset that
// unread bytes cause.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}
