package server

import (
	"net"
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

// TestConnLimit: up to seven eighths of MAX_CONNECTIONS any connection is
// accepted; in the last eighth only one from an address below its share;
// at the bound none; a closed connection gives its place back.
func TestConnLimit(t *testing.T) {
	const limit = 16
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitConns(tcp, limit, prometheus.NewRegistry())
	defer l.Close()

	var mu sync.Mutex
	var accepted []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
		}
	}()
	handled := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) + int(counted(l.refused))
	}
	// dial connects from 127.0.0.<from> and reports whether the listener
	// handed the connection over (rather than closing it).
	dial := func(from byte) bool {
		t.Helper()
		before, refused := handled(), counted(l.refused)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, from)}}
		// A refused connection may be reset before the dial returns.
		if c, err := d.Dial("tcp", tcp.Addr().String()); err == nil {
			t.Cleanup(func() { c.Close() })
		}
		deadline := time.Now().Add(10 * time.Second)
		for handled() == before {
			if time.Now().After(deadline) {
				t.Fatal("the listener neither accepted nor refused a connection")
			}
			time.Sleep(time.Millisecond)
		}
		return counted(l.refused) == refused
	}

	// One address takes everything up to the last eighth, then no more.
	for i := range limit - limit/8 {
		if !dial(2) {
			t.Fatalf("connection %d of one address refused below seven eighths of the bound", i+1)
		}
	}
	if dial(2) {
		t.Error("an address holding 14 of 16 connections got a 15th")
	}
	// Another address, below its share, gets the last eighth.
	for i := range limit / 8 {
		if !dial(1) {
			t.Fatalf("connection %d of an address below its share refused", i+1)
		}
	}
	// At the bound, nobody.
	if dial(3) {
		t.Error("a connection was accepted beyond MAX_CONNECTIONS")
	}
	// A connection that closes gives its place back.
	mu.Lock()
	first := accepted[0]
	mu.Unlock()
	if _, ok := first.(interface{ CloseWrite() error }); !ok {
		t.Error("an accepted connection cannot CloseWrite: net/http would reset it, answer unread")
	}
	first.Close()
	first.Close() // twice: counted out once
	if !dial(3) {
		t.Error("a place given back was not taken")
	}
	l.mu.Lock()
	open, addrs := l.open, len(l.byAddr)
	l.mu.Unlock()
	if open != limit || addrs != 3 {
		t.Errorf("%d connections open from %d addresses, want %d from 3", open, addrs, limit)
	}
}
