package mailtest

import (
	"errors"
	"net"
	"net/smtp"
	"slices"
	"sync"
	"testing"
	"time"
)

// cleanups is a testing.TB whose Cleanup functions run when the test says
// (run), not when it ends.
type cleanups struct {
	testing.TB
	mu  sync.Mutex
	fns []func()
}

func (c *cleanups) Cleanup(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
}

// run runs the Cleanup functions, last registered first, in a goroutine,
// and reports whether they returned within a minute.
func (c *cleanups) run() bool {
	c.mu.Lock()
	fns := slices.Clone(c.fns)
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, f := range slices.Backward(fns) {
			f()
		}
	}()
	select {
	case <-done:
		return true
	case <-time.After(time.Minute):
		return false
	}
}

// TestCleanupBeforeServing: a test that ends before its server started
// serving (one that fails at once) has its cleanup return at once, and the
// server never serves. The cleanup used to wait for Serve, which, when it
// started after the cleanup had closed the server, blocked for ever on a
// listener nobody closed: a silent hang until go test's timeout.
func TestCleanupBeforeServing(t *testing.T) {
	release := make(chan struct{})
	beforeServe = func() { <-release }
	t.Cleanup(func() { beforeServe = func() {} })

	tb := &cleanups{TB: t}
	s := NewServer(tb)
	returned := tb.run()
	close(release) // the server's goroutine goes on, after its test ended
	if !returned {
		t.Fatal("the cleanup of a server that never served still waits after a minute")
	}
	listenerClosed(t, s)
}

// TestCleanupWhileServing: the cleanup of a server that serves stops it.
func TestCleanupWhileServing(t *testing.T) {
	tb := &cleanups{TB: t}
	s := NewServer(tb)
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		t.Fatal(err)
	}
	if !tb.run() {
		t.Fatal("the cleanup of a serving server still waits after a minute")
	}
	if err := c.Noop(); err == nil {
		t.Error("a session outlives the cleanup")
	}
	listenerClosed(t, s)
}

// listenerClosed fails the test unless the server's listener is closed.
func listenerClosed(t *testing.T, s *Server) {
	t.Helper()
	_ = s.ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute)) // an open one: no hang
	c, err := s.ln.Accept()
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("the listener is open after the cleanup (Accept: %v)", err)
	}
}
