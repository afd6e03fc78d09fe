package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAdmissionShares: while the budget has room anyone takes from it; once
// it is full, a source within its share cuts off the largest read of the
// source furthest beyond its own and is served, and a source beyond its
// share is refused.
func TestAdmissionShares(t *testing.T) {
	const limit = 64 << 10
	a := NewAdmission(limit)
	heavy, light := blocksOf("192.0.2.1"), blocksOf("192.0.2.2")
	big, small := a.enter(heavy, nil), a.enter(heavy, nil)
	if err := big.take(context.Background(), 40<<10); err != nil {
		t.Fatal(err)
	}
	if err := small.take(context.Background(), 24<<10); err != nil {
		t.Fatal(err)
	}
	if used, sources := a.Used(); used != limit || sources != 1 {
		t.Fatalf("used %d bytes by %d sources, want %d by 1", used, sources, limit)
	}

	// A third read of the heavy source: the budget is full and the source
	// holds all of it, more than its share.
	third := a.enter(heavy, nil)
	if err := third.take(context.Background(), 1); !errors.Is(err, errOverShare) {
		t.Errorf("a read of the source beyond its share: %v, want errOverShare", err)
	}
	third.leave()

	// The light source is within its share (half the budget): its take
	// cuts off the heavy source's largest read and waits for its bytes.
	l := a.enter(light, nil)
	took := make(chan error, 1)
	go func() { took <- l.take(context.Background(), 8<<10) }()
	waitUntil(t, "the largest read to be cut off", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return big.cutOff
	})
	select {
	case err := <-took:
		t.Fatalf("the light source's take returned (%v) before any byte came back", err)
	default:
	}
	if small.cutOff {
		t.Error("the smaller read was cut off too")
	}
	// The cut-off read learns it at its next take (a real one from its
	// read deadline, at once) and leaves.
	if err := big.take(context.Background(), 1); !errors.Is(err, errCutOff) {
		t.Errorf("the cut-off read's next take: %v, want errCutOff", err)
	}
	big.leave()
	if err := <-took; err != nil {
		t.Fatalf("the light source was refused: %v", err)
	}
	if used, sources := a.Used(); used != 32<<10 || sources != 2 {
		t.Errorf("used %d bytes by %d sources, want %d by 2", used, sources, 32<<10)
	}
	l.leave()
	small.leave()
	if used, sources := a.Used(); used != 0 || sources != 0 {
		t.Errorf("after every read left: %d bytes, %d sources", used, sources)
	}
}

// TestAdmissionWaitsNoLongerThanItMay: a source within its share whose
// room does not come back (the reads holding it are verifying, not
// reading: none can be cut off) is refused once ctx ends.
func TestAdmissionWaitsNoLongerThanItMay(t *testing.T) {
	a := NewAdmission(1 << 10)
	holder := a.enter(blocksOf("192.0.2.1"), nil)
	if err := holder.take(context.Background(), 1<<10); err != nil {
		t.Fatal(err)
	}
	holder.doneReading()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u := a.enter(blocksOf("192.0.2.2"), nil)
	if err := u.take(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("take with no room coming: %v, want context.Canceled", err)
	}
	u.leave()
	holder.leave()
}

// blocksOf is the blocks of an address written as text.
func blocksOf(addr string) Blocks { return BlocksOf(netip.MustParseAddr(addr)) }

// TestBlocksOf: an IPv4 address counts in its /24 and by itself (loopback
// too, an IPv4-mapped address as IPv4), an IPv6 one in its /48, /56 and
// /64; anything else in one block.
func TestBlocksOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":                     "192.0.2.0/24 192.0.2.7/32",
		"::ffff:192.0.2.7":              "192.0.2.0/24 192.0.2.7/32",
		"127.13.200.9":                  "127.13.200.0/24 127.13.200.9/32",
		"2001:db8:1:2:aaaa::1":          "2001:db8:1::/48 2001:db8:1::/56 2001:db8:1:2::/64",
		"2001:db8:1:3ff:ffff:ffff:0:42": "2001:db8:1::/48 2001:db8:1:300::/56 2001:db8:1:3ff::/64",
		"fe80::1%eth0":                  "fe80::/48 fe80::/56 fe80::/64",
		"not an address":                "invalid Prefix",
	} {
		var got []string
		for _, p := range BlocksOfString(in).Path() {
			got = append(got, p.String())
		}
		if strings.Join(got, " ") != want {
			t.Errorf("BlocksOfString(%q) = %s, want %s", in, strings.Join(got, " "), want)
		}
	}
}

// TestBlockShares: a budget is split equally among the top blocks (/24s,
// /48s) holding some, each block's part among its sub-blocks; a block not
// there yet counts as one more; a reserve is one more top block.
func TestBlockShares(t *testing.T) {
	const total = 7200
	tr := NewBlockTree()
	for _, a := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.1.1",
		"2001:db8:a:1::1", "2001:db8:a:2::1", "2001:db8:a:100::1"} {
		tr.Enter(blocksOf(a))
	}
	// Three top blocks: 10.0.0.0/24, 10.0.1.0/24, 2001:db8:a::/48.
	for a, want := range map[string]int64{
		"10.0.0.1": total / 3 / 2, // two addresses in its /24
		"10.0.0.2": total / 3 / 2,
		"10.0.1.1": total / 3,     // alone in its /24
		"10.0.1.2": total / 3 / 2, // a newcomer to 10.0.1.0/24
		"10.0.2.1": total / 4,     // a newcomer /24: one top block more
		// 2001:db8:a::/48 holds two /56s; 2001:db8:a::/56 two /64s.
		"2001:db8:a:1::9":   total / 3 / 2 / 2,
		"2001:db8:a:100::1": total / 3 / 2,
		"2001:db8:a:200::1": total / 3 / 3, // a third /56
		"2001:db8:b::1":     total / 4,
	} {
		if got := tr.Share(blocksOf(a), total, 0); got != want {
			t.Errorf("share of %s = %d, want %d", a, got, want)
		}
	}
	if got, want := tr.Share(blocksOf("10.0.1.1"), total, 1), int64(total/4); got != want {
		t.Errorf("share of 10.0.1.1 with a reserve of one block = %d, want %d", got, want)
	}
	if got := tr.Holders(blocksOf("10.0.0.2")); got != 2 {
		t.Errorf("10.0.0.2 holds %d, want 2", got)
	}
	for _, a := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.1.1",
		"2001:db8:a:1::1", "2001:db8:a:2::1", "2001:db8:a:100::1"} {
		tr.Leave(blocksOf(a))
	}
	if len(tr.nodes) != 0 || tr.Top() != 0 {
		t.Errorf("after every holder left: %d blocks, %d top", len(tr.nodes), tr.Top())
	}

	// Admits: below its share, or below least while no block of its
	// holds its own part.
	for i := range 9 {
		tr.Enter(blocksOf(fmt.Sprintf("10.0.0.%d", i+1)))
	}
	admits := func(a string) bool { return tr.Admits(blocksOf(a), 16, 0, 4) }
	// The /24's part is 16, an address's 16/9: each holds 1, less than 4,
	// and the /24 holds 9 of its 16.
	if !admits("10.0.0.1") {
		t.Error("an address holding 1, its /24 under its part, was refused its least")
	}
	for range 7 {
		tr.Enter(blocksOf("10.0.0.1"))
	}
	// The /24 holds its part: no least any more, only shares.
	if admits("10.0.0.2") {
		t.Error("an address at its share was admitted below least, its /24 holding its part")
	}
	if !admits("10.0.0.99") {
		t.Error("a new address of a full /24 was refused its own part")
	}
	if !admits("10.0.1.1") {
		t.Error("an address of another /24 was refused")
	}
}

// TestAdmissionSharesByBlock: sixteen /64s of one /48 fill the budget; a
// sender in another /48 is within its share (half the budget: two top
// blocks) and cuts their reads off, where counted by /64 alone it would be
// one of seventeen; a seventeenth /64 of the same /48 shares its block's
// half with the sixteen, and is refused beyond its part of it.
func TestAdmissionSharesByBlock(t *testing.T) {
	const limit = 64 << 10
	a := NewAdmission(limit)
	var reads []*unverified
	for i := range 16 {
		u := a.enter(blocksOf(fmt.Sprintf("2001:db8:aa:%x::1", i)), nil)
		if err := u.take(context.Background(), limit/16); err != nil {
			t.Fatal(err)
		}
		reads = append(reads, u)
	}
	if used, sources := a.Used(); used != limit || sources != 16 {
		t.Fatalf("used %d by %d sources, want %d by 16", used, sources, limit)
	}

	// Another address of the /48: its part is the /48's half (it is
	// still its only top block) split among 17 /64s, less than 8 KiB.
	late := a.enter(blocksOf("2001:db8:aa:99::1"), nil)
	if err := late.take(context.Background(), 8<<10); !errors.Is(err, errOverShare) {
		t.Errorf("a 17th /64 of the full /48 asking for 8 KiB: %v, want errOverShare", err)
	}
	late.leave()

	// A sender in another /48 asks for a quarter of the budget.
	sender := a.enter(blocksOf("2001:db8:bb::1"), nil)
	took := make(chan error, 1)
	go func() { took <- sender.take(context.Background(), limit/4) }()
	waitUntil(t, "reads of the full /48 to be cut off", func() bool {
		select {
		case err := <-took:
			t.Fatalf("the sender in another /48 asking for a quarter of the budget: %v before any read was cut off", err)
		default:
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.cut >= limit/4
	})
	for _, u := range reads {
		if u.cutOff {
			u.leave()
		}
	}
	if err := <-took; err != nil {
		t.Fatalf("the sender in another /48 was refused: %v", err)
	}
	cut := 0
	for _, u := range reads {
		if u.cutOff {
			cut++
		} else {
			u.leave()
		}
	}
	if cut != 4 {
		t.Errorf("%d reads cut off to make a quarter of the budget, want 4", cut)
	}
	sender.leave()
	if used, sources := a.Used(); used != 0 || sources != 0 {
		t.Errorf("after every read left: %d bytes, %d sources", used, sources)
	}
}

// checkedProvider refuses every delivery once it has its whole body, with
// the body's length in the reason: a request it answers was read whole.
type checkedProvider struct{}

func (checkedProvider) Verify(_ http.Header, body []byte, _ time.Time) (Event, error) {
	return Event{}, Reject(fmt.Sprintf("read_%d", len(body)), errors.New("a test provider verifies nothing"))
}

func (checkedProvider) Plan(*Event, *Plan) error { return ErrUnhandled }

// TestUnverifiedBodies runs the webhook handler on a real listener, with a
// budget of 64 KiB and a body timeout of a second, and requests from two
// loopback addresses: the attacker's, 127.0.0.2, and the sender's,
// 127.0.0.1.
func TestUnverifiedBodies(t *testing.T) {
	const budget = 64 << 10
	h := NewHandler(nil, NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler), Limits{
		MaxBody: budget, MaxInflight: 1, UnverifiedBytes: budget, BodyTimeout: time.Second,
	})
	srv := httptest.NewServer(h.Route(Spec{Source: "test", SignatureHeaders: []string{"X-Sig"}}, checkedProvider{}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	adm := h.Admission()

	// upload opens a connection from 127.0.0.<from>, declares length and
	// sends the first send bytes of the body.
	upload := func(t *testing.T, from byte, length, send int) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, from)}}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nX-Sig: made-up\r\nContent-Length: %d\r\n\r\n%s", length, bytes.Repeat([]byte{'x'}, send))
		return conn
	}
	answer := func(t *testing.T, conn net.Conn) (int, string) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, strings.TrimSpace(string(b))
	}
	idle := func(t *testing.T) {
		t.Helper()
		waitUntil(t, "every unverified read to leave", func() bool {
			used, sources := adm.Used()
			return used == 0 && sources == 0
		})
	}

	t.Run("StalledCostsNoBudget", func(t *testing.T) {
		conn := upload(t, 2, 1000, 0)
		waitUntil(t, "the stalled request's read to begin", func() bool {
			_, sources := adm.Used()
			return sources == 1
		})
		if used, _ := adm.Used(); used != 0 {
			t.Errorf("a request that sent no byte of its body holds %d bytes of the budget", used)
		}
		if status, body := answer(t, conn); status != http.StatusRequestTimeout {
			t.Errorf("a body that never came: %d %s, want 408", status, body)
		}
		idle(t)
	})

	t.Run("DribblingPaysForWhatCame", func(t *testing.T) {
		conn := upload(t, 2, 40<<10, 1)
		waitUntil(t, "the dribbled byte to be paid for", func() bool {
			used, _ := adm.Used()
			return used > 0
		})
		if used, _ := adm.Used(); used != firstBuffer {
			t.Errorf("one byte of a 40 KiB body holds %d bytes, want the first buffer's %d", used, firstBuffer)
		}
		if status, body := answer(t, conn); status != http.StatusRequestTimeout {
			t.Errorf("a body that stopped: %d %s, want 408", status, body)
		}
		idle(t)
	})

	t.Run("SenderWithinShareCutsOffStalledHeavyRead", func(t *testing.T) {
		heavy := upload(t, 2, budget, budget-1) // the whole budget, less the last byte
		waitUntil(t, "the heavy read to hold the budget", func() bool {
			used, _ := adm.Used()
			return used == budget
		})
		body := bytes.Repeat([]byte{'y'}, 8<<10)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header.Set("X-Sig", "genuine")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), fmt.Sprintf("read_%d", len(body))) {
			t.Errorf("the sender within its share: %d %s, want its whole body read and verified", res.StatusCode, got)
		}
		status, text := answer(t, heavy)
		if status != http.StatusServiceUnavailable || !strings.Contains(text, "unverified_over_share") {
			t.Errorf("the heavy read: %d %s, want 503 unverified_over_share", status, text)
		}
		idle(t)
	})

	t.Run("BeyondShareRefusedWithoutReadingTheRest", func(t *testing.T) {
		// 40 KiB of a 48 KiB body: in a buffer of its size class, 64 KiB.
		first := upload(t, 2, 48<<10, 40<<10)
		waitUntil(t, "the first read to hold the budget", func() bool {
			used, _ := adm.Used()
			return used == budget
		})
		second := upload(t, 2, 48<<10, 40<<10)
		status, text := answer(t, second)
		if status != http.StatusServiceUnavailable || !strings.Contains(text, "unverified_over_share") {
			t.Errorf("a second read beyond the source's share: %d %s, want 503", status, text)
		}
		_ = first.Close()
		idle(t)
	})
}

// waitUntil polls cond until it holds, failing the test after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
