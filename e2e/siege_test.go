package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers/paddle"
)

// The contract's paragraph on strangers: a request whose signature has not
// been verified yet holds no delivery slot and no more memory than a
// bounded budget, and its body must come within a few seconds of its
// headers. These sieges are that paragraph, run against the built binary:
// while a few other loopback addresses stall, dribble or flood, a sender at
// 127.0.0.1 delivers a signed Stripe, GitHub and Paddle event every 250 ms,
// and each must be answered 200 within two seconds; the receiver's peak
// resident set must stay within the bound its start-up line states (the
// formula of docs/http.md), and, since nobody but that sender signs, within the
// part of it that strangers can reach.
//
// The attackers run in a process of their own (this test binary,
// re-executed, at the lowest CPU priority), as real ones run elsewhere:
// their goroutines share nothing with the genuine sender and the test's
// SMTP server and fulfillment API, and the CPU they spend making their
// requests is what the machine has left over; the receiver's own cost of
// their requests is the receiver's.
//
// E2E_SERVER_BIN runs the sieges against another build (the receiver
// before admission control, for instance), to show what they catch.

const (
	// genuineWithin is how long a genuine delivery may take to be answered
	// under siege: the contract's figure.
	genuineWithin = 2 * time.Second
)

// TestSiegeStalledAndDribbling: 512 uploads that send their headers and
// then nothing, and 64 that send a byte every 100 ms, kept up for 15 s
// from 127.0.0.2–9 (each connection the receiver ends is opened again).
func TestSiegeStalledAndDribbling(t *testing.T) {
	siege(t, "512 stalled + 64 dribbling uploads from 8 addresses, 15 s",
		attack{Kind: "slow", Stalled: 512, Dribbling: 64, Addrs: 8, Length: 15 * time.Second})
}

// TestSiegeUnsignedFlood: bodies of 1 MiB with made-up signatures, sent as
// fast as 256 connections from 127.0.0.2–5 get them taken, for 10 s, to a
// receiver with MAX_INFLIGHT=16: the flood outnumbers the delivery slots
// many times over (as a flood of thousands of connections would the default
// 256), so that a stranger holding one shows, and the memory bound is 256
// MiB rather than the defaults' 976.
func TestSiegeUnsignedFlood(t *testing.T) {
	res := siege(t, "1 MiB bodies with made-up signatures, 256 connections from 4 addresses, 10 s, MAX_INFLIGHT=16",
		attack{Kind: "flood", Workers: 256, Addrs: 4, Length: 10 * time.Second}, "MAX_INFLIGHT", "16")
	if res.answered() == 0 {
		t.Errorf("the flood got no answer at all: %s", res)
	}
}

// TestSiegeIdleConnections: 1,100 addresses, each in a /24 of its own
// (127.1.0.1, 127.1.1.1, …, 127.5.75.1: many blocks, as a botnet's, so
// that no share of a block keeps them out), each holding a keep-alive
// connection on which it asked for /healthz and then nothing (it would ask
// again a minute later, as a monitor does), and opening another whenever
// the receiver closes or refuses it, for 15 s: more connections than the
// 1,024 places of MAX_CONNECTIONS.
func TestSiegeIdleConnections(t *testing.T) {
	siege(t, "1,100 addresses in 1,100 /24s each holding an idle keep-alive connection, 15 s",
		attack{Kind: "idle", Addrs: 1100, Length: 15 * time.Second})
}

// siege starts a receiver and sends genuine deliveries for a while with no
// attack (how fast this machine answers them at the moment); then starts
// the attacker, waits until the attack has taken hold and sends genuine
// deliveries until it ends. Every genuine delivery must be answered 200
// within genuineWithin (on a machine so busy that the quiet ones were slow,
// within quietRatio times their median, if that is longer), and the
// receiver's peak resident set must stay within the bounds it states.
func siege(t *testing.T, name string, a attack, env ...string) *attackLog {
	t.Helper()
	const quietFor, quietRatio = 2 * time.Second, 20
	w := newWorld(t)
	e := w.env(append([]string{"PADDLE_WEBHOOK_SECRET", paddleSecret,
		// A step slowed down by the siege is not taken for dead.
		"LEASE_DURATION", "60s"}, env...)...)
	p := startReceiver(t, "receiver", e)
	bound, strangers := p.memoryBounds(t, e)
	prefix := strings.ToLower(strings.TrimPrefix(t.Name(), "TestSiege"))

	qctx, qstop := context.WithTimeout(context.Background(), quietFor)
	quiet := sendGenuine(qctx, p.URL, prefix, 0)
	qstop()
	within := max(genuineWithin, quietRatio*quiet.median())

	cpu0 := cpuTime(t, p.cmd.Process.Pid)
	a.URL = p.URL
	attacker := startAttacker(t, a)
	ctx, stop := context.WithDeadline(context.Background(), attacker.ends)
	defer stop()
	g := sendGenuine(ctx, p.URL, prefix, 10000)
	res := attacker.wait(t)
	cpu := cpuTime(t, p.cmd.Process.Pid) - cpu0
	hwm := p.peakRSS(t)

	m := metricsOf(t, p.URL+"/metrics").Text
	evidence(t, name, g.String(), fmt.Sprintf("peak RSS %s (bound %s, strangers' part %s); quiet: %s", mib(hwm), mib(bound), mib(strangers), quiet))
	t.Logf("siege details: handler time of every delivery %s; attackers: %s; the receiver refused %v connections, "+
		"closed %v to make room (%v of them strangers' idle ones), and answered unverified bodies 408 %v times, 503 %v times; "+
		"its CPU during the siege %v",
		p.deliveryDurations(), res, total(m, "http_connections_refused_total"), total(m, "http_connections_evicted_total"),
		total(m, "http_connections_evicted_total", `class="stranger_idle"`), total(m, "webhook_rejections_total", `reason="body_timeout"`),
		total(m, "webhook_rejections_total", `reason="unverified_over_share"`), cpu.Round(10*time.Millisecond))
	g.check(t, within)
	quiet.check(t, within)
	if n, want := count(t, w.DB, `SELECT count(*) FROM orders`), g.orders+quiet.orders; n != want {
		t.Errorf("orders = %d, want %d (one per genuine delivery answered 200)", n, want)
	}
	// Nobody but the genuine sender signs, and its bodies are under 16
	// KiB: what the process may hold is the strangers' part of the bound,
	// and the verified deliveries' term for bodies of that size.
	if limit := strangers + int64(maxInflight(e))*config.DeliveryBodies*16<<10; hwm > limit || hwm > bound {
		t.Errorf("peak resident set %s, over the stated bound %s (strangers' part %s, and %s for the genuine deliveries)",
			mib(hwm), mib(bound), mib(strangers), mib(limit-strangers))
	}
	if !p.alive() {
		t.Fatalf("the receiver died: %v", p.waitErr)
	}
	return res
}

// total sums the samples of metric name whose labels include every one
// of labels.
func total(text, name string, labels ...string) float64 {
	var sum float64
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, lb := range labels {
			ok = ok && strings.Contains(l, lb)
		}
		if f := strings.Fields(l); ok {
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

func mib(n int64) string {
	if n <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// ---------------------------------------------------------------------------
// The genuine sender.

// genuineLog is what became of the genuine deliveries.
type genuineLog struct {
	mu        sync.Mutex
	sent      int
	ok        int
	refused   map[string]int // status or error → count
	latencies []time.Duration
	orders    int // deliveries answered 200: each made an order
}

func (g *genuineLog) add(res response, err error, took time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent++
	g.latencies = append(g.latencies, took)
	switch {
	case err != nil:
		g.refused[lastWords(err)]++
	case res.Status != http.StatusOK:
		// The status and the reason or outcome the receiver gave.
		var answer struct{ Outcome, Reason string }
		_ = json.Unmarshal([]byte(res.Body), &answer)
		why := answer.Reason
		if why == "" {
			why = answer.Outcome
		}
		g.refused[strings.TrimSpace(fmt.Sprint(res.Status, " ", why))]++
	default:
		g.ok++
		g.orders++
	}
}

// sorted are the latencies, shortest first.
func (g *genuineLog) sorted() []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	ls := append([]time.Duration(nil), g.latencies...)
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	return ls
}

// median is the median latency.
func (g *genuineLog) median() time.Duration {
	ls := g.sorted()
	if len(ls) == 0 {
		return 0
	}
	return ls[len(ls)/2]
}

func (g *genuineLog) String() string {
	ls := g.sorted()
	var p50, top time.Duration
	if len(ls) > 0 {
		p50, top = ls[len(ls)/2], ls[len(ls)-1]
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("%d genuine sent, %d answered 200, refused %v; latency p50 %v, max %v",
		g.sent, g.ok, g.refused, p50.Round(time.Millisecond), top.Round(time.Millisecond))
}

// check fails the test unless every genuine delivery was answered 200
// within within.
func (g *genuineLog) check(t *testing.T, within time.Duration) {
	t.Helper()
	ls := g.sorted()
	late := 0
	for _, l := range ls {
		if l > within {
			late++
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sent < 12 {
		t.Errorf("only %d genuine deliveries were sent", g.sent)
	}
	if g.ok != g.sent || late > 0 {
		t.Errorf("%d of %d genuine deliveries answered 200; %d answered later than %v (max %v); refused: %v",
			g.ok, g.sent, late, within, ls[len(ls)-1].Round(time.Millisecond), g.refused)
	}
}

// sendGenuine delivers a signed Stripe checkout, GitHub purchase and
// Paddle transaction (numbered from first on) every 250 ms from 127.0.0.1
// until ctx ends, each on a goroutine of its own, and waits for every
// answer.
func sendGenuine(ctx context.Context, baseURL, prefix string, first int) *genuineLog {
	g := &genuineLog{refused: map[string]int{}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).DialContext,
	}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for n := first; ctx.Err() == nil; n++ {
		for _, d := range []delivery{checkout(n, prefix), purchase(n, prefix), paddleTransaction(n, prefix)} {
			wg.Go(func() {
				start := time.Now()
				// Not ctx: a delivery sent just before the siege ends is
				// still waited for.
				res, err := postWith(context.Background(), client, baseURL+d.Path, d.Header(), bytes.NewReader(d.Body))
				g.add(res, err, time.Since(start))
			})
		}
		select {
		case <-ctx.Done():
		case <-tick.C: // the sender's pace
		}
	}
	wg.Wait()
	return g
}

// paddleTransaction is a Paddle transaction.completed: an order, a
// confirmation email and a fulfillment call.
func paddleTransaction(n int, prefix string) delivery {
	id := fmt.Sprintf("evt_%s_paddle_%05d", prefix, n)
	body := mustJSON(map[string]any{
		"event_id":        id,
		"event_type":      "transaction.completed",
		"occurred_at":     time.Now().UTC().Format(time.RFC3339Nano),
		"notification_id": fmt.Sprintf("ntf_%s_%05d", prefix, n),
		"data": map[string]any{
			"id":            fmt.Sprintf("txn_%s_%05d", prefix, n),
			"status":        "completed",
			"currency_code": "USD",
			"custom_data":   map[string]any{"email": fmt.Sprintf("paddle%d@example.com", n)},
			"details":       map[string]any{"totals": map[string]any{"grand_total": "3000"}},
			"payments":      []any{map[string]any{"status": "captured", "error_code": nil}},
		},
	})
	return delivery{ID: id, Key: id, Path: "/webhooks/paddle", Body: body, header: func() http.Header {
		return http.Header{
			"Content-Type":         {"application/json"},
			paddle.HeaderSignature: {paddle.SignatureHeader(body, time.Now(), paddleSecret)},
		}
	}}
}

// ---------------------------------------------------------------------------
// The attacker, in a process of its own.

// siegeAttackEnv, when set, holds the attack TestSiegeAttacker makes: the
// test binary re-executed by startAttacker.
const siegeAttackEnv = "E2E_SIEGE_ATTACK"

// attack is what the attacker does.
type attack struct {
	Kind      string // "slow": stalled and dribbling uploads; "flood": 1 MiB bodies; "idle": idle connections
	URL       string
	Addrs     int // from 127.0.0.2 on; for "idle", one connection each, from 127.1.0.1 on (idleAddr)
	Stalled   int
	Dribbling int
	Workers   int
	Length    time.Duration
}

// attacker is a running attacker process.
type attacker struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer // read once it has exited
	ends   time.Time    // when the attack ends
	result chan *attackLog
}

// startAttacker starts the attack in a process of its own and returns once
// it has taken hold: the slow uploads' connections are three quarters open,
// or the flood has had its first answer.
func startAttacker(t *testing.T, a attack) *attacker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(a)
	args := []string{exe, "-test.run=^TestSiegeAttacker$", "-test.count=1"}
	if nice, err := exec.LookPath("nice"); err == nil {
		// At the lowest priority: a real attacker's CPU is its own
		// machine's, and what it costs here is the receiver's share only.
		args = append([]string{nice, "-n", "19"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	// The child needs neither a server binary of its own nor a database.
	cmd.Env = append(os.Environ(), siegeAttackEnv+"="+string(spec), serverBinEnv+"="+serverBin,
		pgtest.EnvURL+"="+pgtest.AdminURL(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	at := &attacker{cmd: cmd, result: make(chan *attackLog, 1)}
	cmd.Stderr = &at.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the attacker: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	held := make(chan time.Time, 1)
	go func() {
		var res *attackLog
		out := bufio.NewScanner(stdout)
		for out.Scan() {
			line := out.Text()
			switch {
			case strings.HasPrefix(line, "SIEGE held "):
				end, _ := time.Parse(time.RFC3339Nano, strings.TrimPrefix(line, "SIEGE held "))
				held <- end
			case strings.HasPrefix(line, "SIEGE result "):
				res = &attackLog{}
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "SIEGE result ")), res); err != nil {
					res = nil
				}
			}
		}
		at.result <- res
	}()
	select {
	case at.ends = <-held:
	case res := <-at.result:
		_ = cmd.Wait()
		t.Fatalf("the attacker ended before its attack took hold (%v)\n%s", res, at.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the attack did not take hold within 30s")
	}
	return at
}

// wait waits for the attacker to end and returns what its connections got.
func (at *attacker) wait(t *testing.T) *attackLog {
	t.Helper()
	select {
	case res := <-at.result:
		if err := at.cmd.Wait(); err != nil || res == nil {
			t.Fatalf("the attacker failed: %v\n%s", err, at.stderr.String())
		}
		return res
	case <-time.After(time.Until(at.ends) + 30*time.Second):
		t.Fatal("the attacker did not end 30s after its attack")
		return nil
	}
}

// TestSiegeAttacker is the attacker of a siege, when the test binary is
// re-executed with siegeAttackEnv; otherwise it is skipped. It prints
// "SIEGE held <end>" once the attack has taken hold, then "SIEGE result
// <json>" when it ends.
func TestSiegeAttacker(t *testing.T) {
	spec := os.Getenv(siegeAttackEnv)
	if spec == "" {
		t.Skip("the attacker of a siege: run by the sieges")
	}
	var a attack
	if err := json.Unmarshal([]byte(spec), &a); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithTimeout(context.Background(), a.Length)
	defer stop()
	end, _ := ctx.Deadline()
	atk := &attackLog{Statuses: map[int]int{}}
	var wg sync.WaitGroup
	var held func() bool
	switch a.Kind {
	case "slow":
		for i := range a.Stalled + a.Dribbling {
			wg.Go(func() { atk.slowUploads(ctx, a.URL, i%a.Addrs, i >= a.Stalled) })
		}
		held = func() bool { return atk.open.Load() >= int64(a.Stalled+a.Dribbling)*3/4 }
	case "flood":
		body := floodBody()
		for i := range a.Workers {
			wg.Go(func() { atk.flood(ctx, a.URL, i%a.Addrs, body) })
		}
		held = func() bool { return atk.answered() > 0 }
	case "idle":
		for i := range a.Addrs {
			wg.Go(func() { atk.idleConnection(ctx, a.URL, idleAddr(i)) })
		}
		// Seven eighths of the addresses hold one: more than seven
		// eighths of MAX_CONNECTIONS, the last part of which only the
		// shares admit.
		held = func() bool { return atk.open.Load() >= int64(a.Addrs)*7/8 }
	default:
		t.Fatalf("attack kind %q", a.Kind)
	}
	for !held() && ctx.Err() == nil {
		time.Sleep(pollEvery)
	}
	fmt.Printf("SIEGE held %s\n", end.Format(time.RFC3339Nano))
	wg.Wait()
	b, _ := json.Marshal(atk)
	fmt.Printf("SIEGE result %s\n", b)
}

// floodBody is 1 MiB of JSON-looking bytes.
func floodBody() []byte {
	b := bytes.Repeat([]byte(`{"id":"evt_flood","object":"event","padding":"`+strings.Repeat("x", 1000)+`"},`), 1<<20/1050)
	b = append(b[:len(b)-1], ' ')
	return append(b, bytes.Repeat([]byte{' '}, 1<<20-len(b))...)
}

// attackLog counts what the attackers' connections got.
type attackLog struct {
	open     atomic.Int64 // connections open now
	Dials    int64
	Refused  int64 // dials that failed, or connections closed without an answer
	Statuses map[int]int
	// Errors are why connections ended unanswered: the last words of the
	// error ("EOF", "connection reset by peer").
	Errors map[string]int
	// Longest is the longest a slow upload's connection lasted.
	Longest time.Duration
	// Closed counts idle connections the receiver closed after
	// answering on them.
	Closed int64
	mu     sync.Mutex
}

func (a *attackLog) note(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f()
}

// unanswered counts a connection that ended, or could not be opened,
// without an answer.
func (a *attackLog) unanswered(err error) {
	a.note(func() {
		a.Refused++
		if a.Errors == nil {
			a.Errors = map[string]int{}
		}
		a.Errors[lastWords(err)]++
	})
}

// lastWords are the last words of an error ("EOF", "connection reset by
// peer"), without the addresses and ports before them.
func lastWords(err error) string {
	why := err.Error()
	if i := strings.LastIndex(why, ": "); i >= 0 {
		why = why[i+2:]
	}
	return oneLine(why, 40)
}

func (a *attackLog) answered() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.Statuses {
		n += c
	}
	return n
}

func (a *attackLog) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := fmt.Sprintf("%d connections, answered %v, %d closed or refused unanswered %v", a.Dials, a.Statuses, a.Refused, a.Errors)
	if a.Closed > 0 {
		s += fmt.Sprintf(", %d held ones closed by the receiver", a.Closed)
	}
	if a.Longest > 0 {
		s += fmt.Sprintf(", the longest lasted %v", a.Longest.Round(100*time.Millisecond))
	}
	return s
}

// attackerDialer dials from 127.0.0.(2+i).
func attackerDialer(i int) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}, Timeout: 5 * time.Second}
}

// slowUploads opens, until ctx ends, one connection after another from
// attacker address addr, each a POST to a webhook route with a signature
// header and Content-Length: 1000, and then either nothing (stalled) or a
// byte every 100 ms (dribbling), until the receiver answers or closes it.
func (a *attackLog) slowUploads(ctx context.Context, baseURL string, addr int, dribble bool) {
	host := strings.TrimPrefix(baseURL, "http://")
	now := strconv.FormatInt(time.Now().Unix(), 10)
	zeros := strings.Repeat("0", 64)
	routes := []struct{ path, header string }{
		{"/webhooks/stripe", "Stripe-Signature: t=" + now + ",v1=" + zeros},
		{"/webhooks/github", "X-Hub-Signature-256: sha256=" + zeros + "\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: siege"},
		{"/webhooks/paddle", "Paddle-Signature: ts=" + now + ";h1=" + zeros},
	}
	d := attackerDialer(addr)
	for n := 0; ctx.Err() == nil; n++ {
		r := routes[(addr+n)%len(routes)]
		conn := a.dial(ctx, d, host)
		if conn == nil {
			continue
		}
		a.open.Add(1)
		start := time.Now()
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\n%s\r\nContent-Length: 1000\r\n\r\n", r.path, r.header)
		if err == nil && dribble {
			go func() {
				for {
					if _, err := conn.Write([]byte{' '}); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond) // the attacker's pace
				}
			}()
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		switch {
		case err == nil:
			a.note(func() { a.Statuses[res.StatusCode]++ })
			res.Body.Close()
		case ctx.Err() == nil:
			a.unanswered(err)
		}
		stop()
		conn.Close()
		a.open.Add(-1)
		if ctx.Err() == nil {
			a.note(func() { a.Longest = max(a.Longest, time.Since(start)) })
		}
		if err != nil {
			pause(ctx, 50*time.Millisecond)
		}
	}
}

// flood posts body, with a made-up Stripe signature, from attacker address
// addr as fast as the receiver takes it, until ctx ends.
func (a *attackLog) flood(ctx context.Context, baseURL string, addr int, body []byte) {
	client := &http.Client{Transport: &http.Transport{DialContext: attackerDialer(addr).DialContext}}
	defer client.CloseIdleConnections()
	for n := 0; ctx.Err() == nil; n++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/webhooks/stripe", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", fmt.Sprintf("t=%d,v1=%064x", time.Now().Unix(), n))
		a.note(func() { a.Dials++ })
		res, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				a.unanswered(err)
				pause(ctx, 10*time.Millisecond)
			}
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		a.note(func() { a.Statuses[res.StatusCode]++ })
	}
}

// dial opens a connection to host through d, and counts it; one that
// cannot be opened is counted unanswered, and nil returned after a pause.
func (a *attackLog) dial(ctx context.Context, d *net.Dialer, host string) net.Conn {
	conn, err := d.DialContext(ctx, "tcp", host)
	a.note(func() { a.Dials++ })
	if err != nil {
		a.unanswered(err)
		pause(ctx, 50*time.Millisecond)
		return nil
	}
	return conn
}

// idleAddr is the address of the idle attacker i: 127.1.0.1, 127.1.1.1, …,
// each in a /24 of its own, none in 127.0.0.0/24 (the genuine sender's).
func idleAddr(i int) net.IP { return net.IPv4(127, byte(1+i/256), byte(i%256), 1) }

// idleConnection holds, until ctx ends, a keep-alive connection from addr
// on which it asks for /healthz once a minute, and nothing else: when the
// receiver closes or refuses it, it opens another.
func (a *attackLog) idleConnection(ctx context.Context, baseURL string, addr net.IP) {
	host := strings.TrimPrefix(baseURL, "http://")
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: addr}, Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		conn := a.dial(ctx, d, host)
		if conn == nil {
			continue
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		r := bufio.NewReader(conn)
		held := false
		var err error
		for ctx.Err() == nil {
			if _, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: receiver\r\n\r\n"); err != nil {
				break
			}
			var res *http.Response
			if res, err = http.ReadResponse(r, nil); err != nil {
				break
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			a.note(func() { a.Statuses[res.StatusCode]++ })
			if !held {
				held = true
				a.open.Add(1)
			}
			// Idle for most of a minute (the receiver's idle timeout),
			// unless the receiver closes the connection first.
			_ = conn.SetReadDeadline(time.Now().Add(50 * time.Second))
			if _, err = r.Peek(1); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
				if err == nil {
					err = errors.New("unexpected bytes")
				}
				break
			}
			_ = conn.SetReadDeadline(time.Time{})
		}
		stop()
		conn.Close()
		if held {
			a.open.Add(-1)
		}
		if ctx.Err() == nil {
			if held {
				a.note(func() { a.Closed++ })
			} else {
				a.unanswered(err)
			}
			pause(ctx, 50*time.Millisecond)
		}
	}
}

// pause waits d or until ctx ends: an attacker's back-off after a refusal,
// so that the attacking process does not spin.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// ---------------------------------------------------------------------------
// The receiver's resources.

// cpuTime is the CPU time (user and system) process pid has used so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/stat: %v", pid, err)
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th of them, in clock ticks (100 a second).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// peakRSS is the process's peak resident set so far (VmHWM), in bytes.
func (p *proc) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read the receiver's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// deliveryDurations summarises the duration_ms of the receiver's "delivery"
// lines: how long its handler took, apart from the network and the
// sender's own scheduling.
func (p *proc) deliveryDurations() string {
	var ds []int
	for _, l := range p.logLines() {
		var line struct {
			Msg        string
			DurationMS int `json:"duration_ms"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "delivery" {
			ds = append(ds, line.DurationMS)
		}
	}
	if len(ds) == 0 {
		return "none logged"
	}
	sort.Ints(ds)
	return fmt.Sprintf("p50 %d ms, max %d ms", ds[len(ds)/2], ds[len(ds)-1])
}

// memoryBounds are the bounds the receiver states at start-up (its
// "memory bound" line): the whole, and the strangers' part. A receiver that
// states none (an older build, under E2E_SERVER_BIN) is held to the bounds
// this checkout states for the same environment.
func (p *proc) memoryBounds(t *testing.T, env map[string]string) (bound, strangers int64) {
	t.Helper()
	for _, l := range p.logLines() {
		var line struct {
			Msg       string
			Bytes     int64
			Strangers int64 `json:"strangers_bytes"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "memory bound" {
			return line.Bytes, line.Strangers
		}
	}
	if !externalBin {
		t.Fatal("the receiver logged no memory bound at start-up")
	}
	c, err := config.Load(func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s states no memory bound: holding it to this checkout's for the same settings, %s (strangers' part %s)",
		serverBin, mib(c.MemoryBound()), mib(c.StrangerMemoryBound()))
	return c.MemoryBound(), c.StrangerMemoryBound()
}

// maxInflight is MAX_INFLIGHT in env, or its default.
func maxInflight(env map[string]string) int {
	if n, err := strconv.Atoi(env["MAX_INFLIGHT"]); err == nil {
		return n
	}
	return config.DefaultMaxInflight
}
