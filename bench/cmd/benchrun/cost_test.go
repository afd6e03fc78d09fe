package main

import (
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCountingProxyCountsFlights: a flight of writes before the server
// answers is one round trip, however many writes it takes.
func TestCountingProxyCountsFlights(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The server answers "ok" to every "go" it reads, and nothing else.
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var got []byte
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			for {
				i := strings.Index(string(got), "go")
				if i < 0 {
					break
				}
				got = got[i+2:]
				if _, err := c.Write([]byte("ok")); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	p, err := startCountingProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := func(parts ...string) {
		t.Helper()
		for _, s := range parts {
			if _, err := c.Write([]byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ok" {
			t.Fatalf("answer %q, %v", buf, err)
		}
	}
	ask("go")
	ask("x", "y", "z", "g", "o") // one flight in five writes
	ask("go")
	got := p.counts()
	if got.roundTrips != 3 || got.sent != 9 || got.recvd != 6 {
		t.Errorf("%+v, want 3 round trips, 9 bytes sent, 6 received", got)
	}
}

func TestSharesOfTraces(t *testing.T) {
	text := `File: profserver
Type: cpu
Duration: 6s, Total samples = 100ms
-----------+-------------------------------------------------------
      40ms   internal/runtime/syscall/linux.Syscall6
             syscall.Syscall
             internal/poll.(*FD).Write
             net.(*conn).Write
             github.com/jackc/pgx/v5/pgconn.(*PgConn).flushWithPotentialWriteReadDeadlock
             github.com/labstack/echo/v5.(*Echo).ServeHTTP
-----------+-------------------------------------------------------
      30ms   crypto/internal/fips140/sha256.blockSHANI
             crypto/hmac.(*hmac).Write
             github.com/paywebhooks/receiver/internal/webhooks.(*Handler).serve
-----------+-------------------------------------------------------
      20ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      10ms   runtime.futex
             runtime.findRunnable
             runtime.schedule
-----------+-------------------------------------------------------
`
	got := sharesOfTraces(text)
	want := map[string]float64{
		"pgx (queries, pool, wire protocol)": 0.4, "signature (HMAC-SHA256, header)": 0.3,
		"GC (background workers)": 0.2, otherCategory: 0.1,
	}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for _, s := range got {
		if math.Abs(s.frac-want[s.cat]) > 1e-9 {
			t.Errorf("%s: %.3f, want %.3f", s.cat, s.frac, want[s.cat])
		}
	}
	allocs := sharesOfTraces("-----------+---\n     1.50kB   net/textproto.readMIMEHeader\n        net/http.readRequest\n-----------+---\n       500B   main.run.func2\n")
	if len(allocs) != 2 || math.Abs(shareOf(allocs, "net/http (connections, request, response)")-0.75) > 1e-9 {
		t.Errorf("sizes: %v", allocs)
	}
}

func TestParseLSN(t *testing.T) {
	if n, err := parseLSN("16/B374D848"); err != nil || n != 0x16_B374D848 {
		t.Errorf("%x, %v", n, err)
	}
	if _, err := parseLSN("B374D848"); err == nil {
		t.Error("no slash accepted")
	}
	if walSpan(10, 5, true, true) != -1 || walSpan(5, 10, true, false) != -1 || walSpan(5, 10, true, true) != 5 {
		t.Error("walSpan")
	}
}

func TestKeptTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if keptTail(p) != "" {
		t.Error("a missing report keeps something")
	}
	if err := os.WriteFile(p, []byte("# Benchmarks\n\nold run\n\n"+keptMarker+"\n\n## Where the gap is\n\nby hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := keptTail(p); got != "\n"+keptMarker+"\n\n## Where the gap is\n\nby hand\n" {
		t.Errorf("kept %q", got)
	}
}
