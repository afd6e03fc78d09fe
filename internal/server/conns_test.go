package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counted is a counter's value.
func counted(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

// testListener is a connLimit on a loopback port whose accepted
// connections the test keeps (the server side), and the clients' sides of
// them.
type testListener struct {
	t *testing.T
	l *connLimit
	m *connMetrics

	mu       sync.Mutex
	accepted []*trackedConn
}

func newTestListener(t *testing.T, limit int) *testListener {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := newConnMetrics(reg)
	tl := &testListener{t: t, l: limitConns(tcp, limit, m, reg), m: m}
	t.Cleanup(func() { tl.l.Close() })
	return tl
}

// serve accepts connections and keeps them, without serving them.
func (tl *testListener) serve() {
	go func() {
		for {
			c, err := tl.l.Accept()
			if err != nil {
				return
			}
			tl.mu.Lock()
			tl.accepted = append(tl.accepted, c.(*trackedConn))
			tl.mu.Unlock()
		}
	}()
}

func (tl *testListener) refused() float64 {
	return counted(tl.m.refused.WithLabelValues(refusedOverShare)) + counted(tl.m.refused.WithLabelValues(refusedFull))
}

// dial connects from addr and returns the server's side of the
// connection, or nil if the listener refused it.
func (tl *testListener) dial(addr string) *trackedConn {
	t := tl.t
	t.Helper()
	tl.mu.Lock()
	accepted := len(tl.accepted)
	tl.mu.Unlock()
	refused := tl.refused()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	// A refused connection may be reset before the dial returns.
	if c, err := d.Dial("tcp", tl.l.Addr().String()); err == nil {
		t.Cleanup(func() { c.Close() })
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		tl.mu.Lock()
		n := len(tl.accepted)
		tl.mu.Unlock()
		switch {
		case n > accepted:
			tl.mu.Lock()
			defer tl.mu.Unlock()
			return tl.accepted[n-1]
		case tl.refused() > refused:
			return nil
		case time.Now().After(deadline):
			t.Fatal("the listener neither accepted nor refused a connection")
		}
		time.Sleep(time.Millisecond)
	}
}

// class is what the listener counts c as.
func (tl *testListener) class(c *trackedConn) connClass {
	tl.l.mu.Lock()
	defer tl.l.mu.Unlock()
	return c.class
}

func (tl *testListener) open() int {
	tl.l.mu.Lock()
	defer tl.l.mu.Unlock()
	return tl.l.open
}

// TestConnLimitBlockShares: up to seven eighths of MAX_CONNECTIONS any
// connection is accepted; in the last eighth, only one from an address
// below its share: its /24's part of the bound (the bound split among the
// /24s holding strangers' connections and one more) split among the /24's
// addresses, at least minConnShare. A sender's connections count in no
// share; a closed connection gives its place back.
func TestConnLimitBlockShares(t *testing.T) {
	const limit = 64
	tl := newTestListener(t, limit)
	tl.serve()

	// 14 addresses of one /24, four connections each: seven eighths.
	var crowd []*trackedConn
	for i := range limit - limit/8 {
		c := tl.dial(fmt.Sprintf("127.1.0.%d", 1+i/4))
		if c == nil {
			t.Fatalf("connection %d refused below seven eighths of the bound", i+1)
		}
		crowd = append(crowd, c)
	}
	// The /24's part is half the bound (it and one more), each address's
	// a fourteenth of that: less than minConnShare, which each holds.
	if tl.dial("127.1.0.1") != nil {
		t.Error("an address holding its share got another connection in the last eighth")
	}
	if got := counted(tl.m.refused.WithLabelValues(refusedOverShare)); got != 1 {
		t.Errorf("http_connections_refused_total{reason=over_share} = %v, want 1", got)
	}

	// A new address of the /24 (a sender among them) gets its own part,
	// two (32 / 15), and no more: the /24 holds its part already.
	newcomer := tl.dial("127.1.0.200")
	if newcomer == nil || tl.dial("127.1.0.200") == nil {
		t.Fatal("a new address of the crowd's /24 was refused its part")
	}
	if tl.dial("127.1.0.200") != nil {
		t.Error("a new address of the crowd's /24 got more than its part, the /24 holding its own")
	}
	// An address of another /24 gets its /24's part: a third of the
	// bound (two /24s and one more), more than the rest of the last
	// eighth (counted by address among all, 64/17, it would get 3).
	var other []*trackedConn
	for i := range limit/8 - 2 {
		c := tl.dial("127.2.0.1")
		if c == nil {
			t.Fatalf("connection %d of another /24 refused in the last eighth", i+1)
		}
		other = append(other, c)
	}
	if tl.open() != limit {
		t.Fatalf("%d open, want %d", tl.open(), limit)
	}

	// A sender's connections count in no share: once the crowd's are
	// verified, its /24 holds no stranger's and gets one more, which
	// closes the stranger's connection idle longest (at the bound).
	for _, c := range crowd {
		tl.l.verified(c)
	}
	if c := tl.dial("127.1.0.1"); c == nil {
		t.Error("an address whose connections are all senders' was refused one")
	}
	if got := tl.class(newcomer); got != released {
		t.Errorf("at the bound, the stranger's connection idle longest is %v, want closed", got)
	}
	if tl.open() != limit {
		t.Errorf("%d open after a connection was closed to make room, want %d", tl.open(), limit)
	}

	// A connection that closes gives its place back, once.
	if _, ok := net.Conn(other[1]).(interface{ CloseWrite() error }); !ok {
		t.Error("an accepted connection cannot CloseWrite: net/http would reset it, answer unread")
	}
	other[1].Close()
	other[1].Close()
	if tl.open() != limit-1 {
		t.Errorf("%d open after one closed (twice), want %d", tl.open(), limit-1)
	}
	tl.l.mu.Lock()
	strangers := tl.l.strangers.Holders(other[2].blocks)
	tl.l.mu.Unlock()
	if strangers != limit/8-3 {
		t.Errorf("127.2.0.1 holds %d strangers' connections, want %d", strangers, limit/8-3)
	}
}

// TestConnLimitLeastShare: however many /24s hold connections, an address
// gets minConnShare of them in the last eighth (a sender opening a few at
// once), and no more.
func TestConnLimitLeastShare(t *testing.T) {
	const limit = 64
	tl := newTestListener(t, limit)
	tl.serve()
	for i := range limit - limit/8 {
		if tl.dial(fmt.Sprintf("127.%d.0.1", 100+i)) == nil {
			t.Fatalf("connection %d refused below seven eighths of the bound", i+1)
		}
	}
	// 57 /24s and one more: a share of 1.
	for i := range minConnShare {
		if tl.dial("127.200.0.1") == nil {
			t.Fatalf("connection %d of a new address refused in the last eighth", i+1)
		}
	}
	if tl.dial("127.200.0.1") != nil {
		t.Errorf("an address got more than %d connections in the last eighth, its share being 1", minConnShare)
	}
}

// TestConnLimitEvictionOrder: at the bound, a new connection closes the
// strangers' idle connections first (those idle longest first, new ones
// included), then the strangers' busy ones, then the senders' idle ones;
// never a sender's busy one: with only those left, it is refused.
func TestConnLimitEvictionOrder(t *testing.T) {
	const limit = 8
	tl := newTestListener(t, limit)
	tl.serve()
	var cs []*trackedConn
	for i := range limit {
		c := tl.dial(fmt.Sprintf("127.%d.0.1", 20+i))
		if c == nil {
			t.Fatalf("connection %d refused below the bound", i)
		}
		cs = append(cs, c)
	}
	l := tl.l
	// 0: a sender's, busy; 1: a sender's, idle; 2, 3: strangers', busy
	// (3 busy first); 4: a stranger's, idle after a request; 5, 6, 7:
	// strangers', new (nothing sent: idle since accepted).
	l.connState(cs[0], http.StateActive)
	l.verified(cs[0])
	l.connState(cs[1], http.StateActive)
	l.verified(cs[1])
	l.connState(cs[1], http.StateIdle)
	l.connState(cs[3], http.StateActive)
	l.connState(cs[2], http.StateActive)
	l.connState(cs[4], http.StateActive)
	l.connState(cs[4], http.StateIdle)
	// Oldest idle first: 5, 6, 7 have been idle since they were accepted,
	// 4 since its answer.
	want := []int{5, 6, 7, 4, 3, 2, 1}
	for n, i := range want {
		c := tl.dial(fmt.Sprintf("127.%d.0.1", 40+n))
		if c == nil {
			t.Fatalf("new connection %d refused while connection %d could be closed", n, i)
		}
		// Each newcomer is busy at once, as a sender's request is.
		l.connState(c, http.StateActive)
		l.verified(c)
		if got := tl.class(cs[i]); got != released {
			t.Fatalf("new connection %d: connection %d (class %d) is still open", n, i, got)
		}
		for _, j := range want[n+1:] {
			if tl.class(cs[j]) == released {
				t.Fatalf("new connection %d closed connection %d before connection %d", n, j, i)
			}
		}
	}
	if tl.dial("127.60.0.1") != nil {
		t.Error("a connection was accepted with every open one a sender's, busy")
	}
	if tl.class(cs[0]) != senderBusy {
		t.Error("a sender's busy connection was closed")
	}
	for class, want := range map[string]float64{"stranger_idle": 4, "stranger_busy": 2, "sender_idle": 1} {
		if got := counted(tl.m.evicted.WithLabelValues(class)); got != want {
			t.Errorf("http_connections_evicted_total{class=%s} = %v, want %v", class, got, want)
		}
	}
	if got := counted(tl.m.refused.WithLabelValues(refusedFull)); got != 1 {
		t.Errorf("http_connections_refused_total{reason=full} = %v, want 1", got)
	}
}

// TestConnLimitServes: behind net/http, with the server's hooks, a
// connection on which a request was verified outlives those that only
// asked for /healthz, idle since: at the bound, theirs are closed (reset)
// to make room, and the sender's keeps serving.
func TestConnLimitServes(t *testing.T) {
	const limit = 8
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := newConnMetrics(reg)
	l := limitConns(tcp, limit, m, reg)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/webhooks/test" {
				requestVerified(r) // as the webhook handler does once a signature is verified
			}
			_, _ = io.WriteString(w, "ok")
		}),
		ConnContext: withConn,
		ConnState:   l.connState,
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })

	type client struct {
		conn net.Conn
		r    *bufio.Reader
	}
	connect := func(from string) *client {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &client{conn: c, r: bufio.NewReader(c)}
	}
	ask := func(c *client, method, path string) error {
		_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c.conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", method, path); err != nil {
			return err
		}
		res, err := http.ReadResponse(c.r, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		return res.Body.Close()
	}

	sender := connect("127.0.0.1")
	if err := ask(sender, "POST", "/webhooks/test"); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// idle counts the strangers' idle connections, once none is busy
	// (net/http says a connection is idle after its answer is sent).
	idle := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.queues[strangerBusy].front() != nil {
			return -1
		}
		n := 0
		for c := l.queues[strangerIdle].front(); c != nil; c = c.next {
			n++
		}
		return n
	}
	var idlers []*client
	for i := range limit - 1 {
		c := connect(fmt.Sprintf("127.%d.0.1", 70+i))
		if err := ask(c, "GET", "/healthz"); err != nil {
			t.Fatal(err)
		}
		// One after the other: the first idle is the first closed.
		waitFor("the idler to be idle", func() bool { return idle() == i+1 })
		idlers = append(idlers, c)
	}
	waitFor("the sender's connection to be idle", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.queues[senderIdle].front() != nil
	})

	// limit-1 newcomers: each closes an idler's connection, the one idle
	// longest first; the sender's is left.
	for i := range limit - 1 {
		c := connect(fmt.Sprintf("127.%d.0.1", 90+i))
		if err := ask(c, "POST", "/webhooks/test"); err != nil {
			t.Fatalf("newcomer %d: %v", i, err)
		}
		_ = idlers[i].conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := idlers[i].r.ReadByte(); err == nil || !strings.Contains(err.Error(), "reset") {
			t.Errorf("the idler idle longest after newcomer %d: %v, want its connection reset", i, err)
		}
	}
	if err := ask(sender, "POST", "/webhooks/test"); err != nil {
		t.Errorf("the sender's connection, verified, was closed before the strangers': %v", err)
	}
	if got := counted(m.evicted.WithLabelValues("stranger_idle")); got != limit-1 {
		t.Errorf("http_connections_evicted_total{class=stranger_idle} = %v, want %d", got, limit-1)
	}
}
