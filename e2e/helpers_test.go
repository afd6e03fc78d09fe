// Package e2e runs the built receiver binary as a black box, as an operator
// would: a child process on a real PostgreSQL database, with a real SMTP
// server and a real HTTP fulfillment API held by the test. The tests SIGKILL,
// SIGTERM and restart it, and check what the outside world saw.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/pgtest"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Secrets and addresses every receiver in this suite is configured with.
const (
	stripeSecret = "whsec_e2e_receiver_secret_0123456789abcdef"
	githubSecret = "e2e-github-secret-0123456789abcdef"
	paddleSecret = "pdl_ntfset_01e2ereceiversecret0000000_e2eReceiverSecret0123456789abcde"
	mailDomain   = "example.test"
	mailFrom     = "Shop <shop@example.test>"
	notifyEmail  = "owner@example.test"
	hookID       = "4242"
)

// fulfillmentSecret (the key "e2e fulfillment key, 32 bytes.") signs every
// fulfillment call; the test API verifies each, unless the binary is
// E2E_SERVER_BIN's, which may predate signed calls.
const fulfillmentSecret = "whsec_ZTJlIGZ1bGZpbGxtZW50IGtleSwgMzIgYnl0ZXMu"

// pollEvery is how often conditions are polled.
const pollEvery = 20 * time.Millisecond

// serverBin is the receiver binary, built once by TestMain, or the one
// serverBinEnv names.
var serverBin string

// serverBinEnv names a receiver binary to run instead of building
// ./cmd/server: another version of the receiver, to see what it does under
// the same tests (the attacks of attacks_test.go against the receiver as it
// was before them, for instance). Such a binary migrates a database of its
// own: its schema may not be this checkout's.
const serverBinEnv = "E2E_SERVER_BIN"

// externalBin is set when serverBin comes from serverBinEnv.
var externalBin bool

func TestMain(m *testing.M) {
	if os.Getenv(baselineEnv) != "" {
		os.Exit(runBaseline()) // this process is the baseline receiver, re-executed by a test
	}
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzzworker") {
			os.Exit(m.Run()) // a fuzzing worker: fuzz targets need neither the binary nor a database
		}
	}
	if bin := os.Getenv(serverBinEnv); bin != "" {
		abs, err := filepath.Abs(bin)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s: %v\n", serverBinEnv, err)
			os.Exit(1)
		}
		serverBin, externalBin = abs, true
		fmt.Fprintf(os.Stderr, "e2e: running %s (from %s), not this checkout's receiver\n", abs, serverBinEnv)
		pgtest.Main(m)
		return
	}
	bin, err := buildServer()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: build the server: %v\n", err)
		os.Exit(1)
	}
	serverBin = bin
	pgtest.Main(m)
}

// buildServer builds ./cmd/server into the user's cache directory (one
// file per checkout, replaced atomically on every run, so that nothing
// piles up, two runs at once do not trip on each other, and two checkouts
// never run each other's binary) and returns its path.
func buildServer() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file)) // the module root
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "paywebhooks-e2e", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "server-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	// go test puts its own toolchain's bin first on PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(gobin, "build", "-o", tmp.Name(), "./cmd/server")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	bin := filepath.Join(dir, "server")
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// ---------------------------------------------------------------------------
// The world around a receiver: database, SMTP server, fulfillment API.

// world is what a receiver talks to, and what the test reads back.
type world struct {
	DBURL string
	DB    *pgxpool.Pool
	SMTP  *mailtest.Server
	API   *fulfillmenttest.Server
}

// newWorld gives the test a fresh, migrated database (pgtest), a real SMTP
// server and a real fulfillment API.
func newWorld(t *testing.T) *world {
	t.Helper()
	u := newDatabase(t)
	api := fulfillmenttest.NewServer(t)
	if !externalBin {
		api.RequireSignature(t, fulfillmentSecret)
	}
	return &world{DBURL: u, DB: openPool(t, u), SMTP: mailtest.NewServer(t), API: api}
}

// newDatabase returns the URL of a fresh database with the receiver's
// schema, dropped when the test ends: a clone of pgtest's migrated template,
// or, for a binary from serverBinEnv, an empty database that the binary
// migrates itself (`server migrate up`).
func newDatabase(t *testing.T) string {
	t.Helper()
	if !externalBin {
		return pgtest.NewDB(t)
	}
	admin := pgtest.AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var b [6]byte
	_, _ = cryptorand.Read(b[:])
	name := "e2e_ext_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	if r := runServerCmd(t, map[string]string{"DATABASE_URL": u.String()}, "migrate", "up"); r.Code != 0 {
		t.Fatalf("%s migrate up: exit %d\n%s%s", serverBin, r.Code, r.Stdout, r.Stderr)
	}
	return u.String()
}

// cmdResult is what one run of an operator command printed and returned.
type cmdResult struct {
	Stdout, Stderr string
	Code           int // the exit code; -1 when it did not exit by itself
}

// runServerCmd runs the server binary with args (an operator command:
// migrate, events …) in an environment that holds env and nothing of the
// receiver's configuration from the test's own, and waits at most a minute.
func runServerCmd(t testing.TB, env map[string]string, args ...string) cmdResult {
	t.Helper()
	return runServerCmdTo(t, env, nil, args...)
}

// runServerCmdTo is runServerCmd that also writes the command's stdout and
// stderr to terminal, as they come, as a terminal shows them (nil: not).
// Both are written at once: terminal must be safe for that (a logWriter).
func runServerCmdTo(t testing.TB, env map[string]string, terminal io.Writer, args ...string) cmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, args...)
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if terminal != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, terminal), io.MultiWriter(&stderr, terminal)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run %s %s: %v", serverBin, strings.Join(args, " "), err)
	}
	return cmdResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// env is the receiver's environment for this world, with overrides
// (key, value, key, value, …).
func (w *world) env(overrides ...string) map[string]string {
	e := map[string]string{
		"DATABASE_URL":          w.DBURL,
		"HTTP_ADDR":             "127.0.0.1:0",
		"STRIPE_WEBHOOK_SECRET": stripeSecret,
		"GITHUB_WEBHOOK_SECRET": githubSecret,
		"SMTP_ADDR":             w.SMTP.Addr(),
		"MAIL_FROM":             mailFrom,
		"NOTIFY_EMAIL":          notifyEmail,
		"FULFILLMENT_URL":       w.API.URL(),
		"FULFILLMENT_SECRET":    fulfillmentSecret,
		"LEASE_DURATION":        "2s",
		"REDRIVE_INTERVAL":      "200ms",
		"SHUTDOWN_TIMEOUT":      "20s",
		"DB_MAX_CONNS":          "20",
		"LOG_LEVEL":             "info",
		// As in production, whatever bin/dev (make test) set for the tests.
		"PAYWEBHOOKS_DEV": "",
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		e[overrides[i]] = overrides[i+1]
	}
	return e
}

// count runs a SELECT count(*) … and returns it.
func count(t testing.TB, db *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// waitFor polls cond until it holds, failing the test after timeout with
// what describe says.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}

// waitSettled waits until no step is in progress (every lease has been
// finished, by a delivery or by the redriver).
func (w *world) waitSettled(t testing.TB, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "every step to leave in_progress", func() bool {
		return count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND status = 'in_progress'`) == 0
	})
}

// stepState returns a step claim's status and attempts.
func (w *world) stepState(t testing.TB, stepKey string) (status string, attempts int) {
	t.Helper()
	err := w.DB.QueryRow(context.Background(),
		`SELECT status, attempts FROM processed_events WHERE event_key = $1`, stepKey).Scan(&status, &attempts)
	if err != nil {
		return "missing", 0
	}
	return status, attempts
}

// mailsByID counts accepted messages per Message-ID.
func (w *world) mailsByID() map[string]int {
	m := map[string]int{}
	for _, msg := range w.SMTP.Messages() {
		m[msg.MessageID]++
	}
	return m
}

// fulfillmentsByKey counts fulfillment requests per Idempotency-Key.
func (w *world) fulfillmentsByKey() map[string]int {
	m := map[string]int{}
	for _, r := range w.API.Requests() {
		m[r.IdempotencyKey]++
	}
	return m
}

// messageID and idemKey are what the receiver sends for a step key.
func messageID(stepKey string) string { return mail.MessageID(stepKey, mailDomain) }
func idemKey(stepKey string) string   { return fulfillment.IdempotencyKey(stepKey) }

// ---------------------------------------------------------------------------
// A receiver process.

// proc is one run of a server binary (the receiver, or the re-executed
// baseline) as a child process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	URL  string // http://127.0.0.1:port

	done    chan struct{} // closed once the process has exited
	waitErr error         // cmd.Wait's result, set before done is closed

	out     *logBuf
	logTail int         // how many lines of output a failed test shows
	addr    chan string // the address of its "receiver listening" line
}

// logBuf keeps a process's output lines and lets a test wait for one.
type logBuf struct {
	mu    sync.Mutex
	lines []string
	cond  chan struct{} // closed and replaced at every new line
}

func newLogBuf() *logBuf { return &logBuf{cond: make(chan struct{})} }

func (b *logBuf) add(line string) {
	b.mu.Lock()
	b.lines = append(b.lines, line)
	close(b.cond)
	b.cond = make(chan struct{})
	b.mu.Unlock()
}

func (b *logBuf) snapshot() ([]string, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...), b.cond
}

func (b *logBuf) contains(substr string) bool {
	lines, _ := b.snapshot()
	for _, l := range lines {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// startProc starts bin (with args) in env, waits for its "receiver
// listening" line and then for GET /readyz to answer 200. The process is
// SIGKILLed when the test ends if still running, and its output goes to the
// test log if the test failed.
func startProc(t *testing.T, name, bin string, args []string, env map[string]string) *proc {
	t.Helper()
	p := spawnProc(t, name, bin, args, env)
	p.waitStarted(t)
	return p
}

// spawnProc starts bin as startProc does, without waiting for it: several
// processes started at once, then waited for (waitStarted).
func spawnProc(t *testing.T, name, bin string, args []string, env map[string]string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	// Drop anything from the test's environment the receiver reads, so
	// that only env configures it.
	kept := cmd.Env[:0]
	for _, kv := range cmd.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, override := env[k]; !override {
			kept = append(kept, kv)
		}
	}
	cmd.Env = kept
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// The server dies with the test binary, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{}), out: newLogBuf(), logTail: 150, addr: make(chan string, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var readers sync.WaitGroup
	addr := p.addr
	readLines := func(r io.Reader, prefix string) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			p.out.add(prefix + line)
			if strings.Contains(line, `"receiver listening"`) {
				var l struct{ Addr string }
				if json.Unmarshal([]byte(line), &l) == nil && l.Addr != "" {
					select {
					case addr <- l.Addr:
					default:
					}
				}
			}
		}
	}
	readers.Add(2)
	go readLines(stdout, "")
	go readLines(stderr, "stderr: ")
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			p.dumpLog(p.logTail)
		}
	})
	return p
}

// waitStarted waits for a spawned process's "receiver listening" line, then
// for GET /readyz to answer 200.
func (p *proc) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case a := <-p.addr:
		p.URL = "http://" + a
	case <-p.done:
		p.dumpLog(100)
		t.Fatalf("%s exited before listening: %v", p.name, p.waitErr)
	case <-time.After(60 * time.Second):
		p.dumpLog(100)
		t.Fatalf("%s did not log that it listens within 60s", p.name)
	}
	p.waitReady(t, 30*time.Second)
}

// dumpLog writes the last n lines of the process's output to the test log.
func (p *proc) dumpLog(n int) {
	lines, _ := p.out.snapshot()
	if len(lines) > n {
		p.t.Logf("%s: … %d earlier lines not shown", p.name, len(lines)-n)
		lines = lines[len(lines)-n:]
	}
	// One line per call: each carries the file:line prefix that
	// scripts/test.sh keeps when it filters the log.
	p.t.Logf("%s output (%d lines):", p.name, len(lines))
	for _, l := range lines {
		p.t.Logf("%s| %s", p.name, l)
	}
}

// waitReady polls GET /readyz until it answers 200.
func (p *proc) waitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, p.name+" /readyz 200", func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited while waiting for /readyz: %v", p.name, p.waitErr)
		default:
		}
		return p.readyz() == http.StatusOK
	})
}

// readyz returns GET /readyz's status, or 0 when there is no answer.
func (p *proc) readyz() int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/readyz", nil)
	res, err := shortClient.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill SIGKILLs the process, as an OOM kill or a node failure would, and
// waits until it is gone. Killing a dead process does nothing.
func (p *proc) Kill() {
	if p.alive() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Term sends SIGTERM and waits up to timeout for the process to exit. It
// returns the exit code (-1 if killed by a signal) and fails the test if the
// process does not exit in time.
func (p *proc) Term(t testing.TB, timeout time.Duration) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v of SIGTERM", p.name, timeout)
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitLog waits until a line of the process's output contains substr.
func (p *proc) waitLog(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		lines, changed := p.out.snapshot()
		for _, l := range lines {
			if strings.Contains(l, substr) {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s never logged %q within %v", p.name, substr, timeout)
		}
	}
}

// startReceiver starts the receiver binary.
func startReceiver(t *testing.T, name string, env map[string]string) *proc {
	t.Helper()
	return startProc(t, name, serverBin, nil, env)
}

// ---------------------------------------------------------------------------
// Deliveries.

// delivery is one webhook event as its sender sends it. A Stripe delivery is
// re-signed with a fresh timestamp on every attempt, as Stripe does; a
// GitHub delivery is the same bytes every time, as a redelivery is.
type delivery struct {
	ID     string // the Stripe event id or the GitHub delivery GUID
	Key    string // the receiver's dedupe key, and the provider_event_id of an order it creates
	Path   string // /webhooks/stripe or /webhooks/github
	Body   []byte
	header func() http.Header
	// Object, for a delivery whose steps act on a business object, is that
	// object (webhooks.Step.Object): a sale's order, whose email and
	// fulfillment call they are (sales.Plan: "order:<source>:<external id>",
	// and ":<effective date>" for a Marketplace purchase); a paid invoice,
	// whose receipt it is ("invoice:<id>").
	Object string
}

// Header returns the headers of one attempt.
func (d delivery) Header() http.Header { return d.header() }

// StepKey is the claim key of one of the event's steps.
func (d delivery) StepKey(step string) string { return d.Key + "/" + step }

// Ref is what the Message-ID or Idempotency-Key of one of d's steps that
// act on its Object (a sale's confirmation or welcome email and its
// fulfillment call, an invoice's receipt) derives from: "<object>/<step>"
// (webhooks.RefKey), whichever event planned it; its claim is still
// StepKey. Other steps' derive from their StepKey.
func (d delivery) Ref(step string) string {
	if d.Object == "" {
		panic("e2e: delivery " + d.ID + " acts on no object a fixture knows")
	}
	return d.Object + "/" + step
}

// stripeDelivery signs body, whose event id is id, afresh at each attempt.
func stripeDelivery(id string, body []byte) delivery {
	return delivery{ID: id, Key: id, Path: "/webhooks/stripe", Body: body, header: func() http.Header {
		return stripeHeader(body, stripeSecret, time.Now())
	}}
}

func stripeHeader(body []byte, secret string, at time.Time) http.Header {
	return stripe.Spec.Sign(webhooks.SignInput{Body: body, Secret: secret, At: at})
}

// githubDelivery is a GitHub delivery of event typ with the given GUID.
func githubDelivery(typ, guid string, body []byte) delivery {
	h := github.Spec.Sign(webhooks.SignInput{Body: body, Secret: githubSecret})
	h.Set("User-Agent", "GitHub-Hookshot/e2e")
	h.Set(github.HeaderEvent, typ)
	h.Set(github.HeaderDelivery, guid)
	h.Set(github.HeaderHookID, hookID)
	key := github.Key(hookID, guid, github.BodyHash(body))
	return delivery{ID: guid, Key: key, Path: "/webhooks/github", Body: body, header: func() http.Header {
		return h.Clone()
	}}
}

// response is what one attempt got back.
type response struct {
	Status     int
	RetryAfter string
	Body       string
}

// shortClient is for probes; deliveryClient for deliveries, which may take
// as long as the receiver's steps.
var (
	shortClient    = &http.Client{Timeout: 5 * time.Second}
	deliveryClient = &http.Client{Timeout: 30 * time.Second}
	newConnClient  = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
)

// post sends one attempt of d to baseURL.
func post(ctx context.Context, baseURL string, d delivery) (response, error) {
	return postRaw(ctx, baseURL+d.Path, d.Header(), d.Body)
}

// postNewConn sends one attempt of d on a connection of its own, never one
// kept alive from an earlier request, and waits at most a few seconds.
func postNewConn(baseURL string, d delivery) (response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return postWith(ctx, newConnClient, baseURL+d.Path, d.Header(), bytes.NewReader(d.Body))
}

// postRaw sends body with header to url.
func postRaw(ctx context.Context, url string, header http.Header, body []byte) (response, error) {
	return postReader(ctx, url, header, bytes.NewReader(body))
}

// postReader sends what body yields with header to url.
func postReader(ctx context.Context, url string, header http.Header, body io.Reader) (response, error) {
	return postWith(ctx, deliveryClient, url, header, body)
}

// postWith sends what body yields with header to url through client.
func postWith(ctx context.Context, client *http.Client, url string, header http.Header, body io.Reader) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return response{}, err
	}
	req.Header = header
	res, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, RetryAfter: res.Header.Get("Retry-After"), Body: string(b)}, nil
}

// mustPost sends d once and fails the test unless it is answered want.
func mustPost(t testing.TB, baseURL string, d delivery, want int) response {
	t.Helper()
	res, err := post(context.Background(), baseURL, d)
	if err != nil {
		t.Fatalf("deliver %s: %v", d.ID, err)
	}
	if res.Status != want {
		t.Fatalf("deliver %s: status %d, want %d; body %s", d.ID, res.Status, want, res.Body)
	}
	return res
}

// retryPolicy is how a sender retries: like Stripe, any non-2xx answer or
// connection error is retried, honouring Retry-After up to a cap, with a
// short exponential back-off otherwise, until the deadline.
type retryPolicy struct {
	MaxRetryAfter time.Duration // cap on an honoured Retry-After
	MinBackoff    time.Duration
	MaxBackoff    time.Duration
	MaxAttempts   int
	OnAttempt     func(attempt) // if set, called after every attempt
}

var stormRetry = retryPolicy{MaxRetryAfter: 300 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 2000}

// attempt is one try of a delivery, for the record.
type attempt struct {
	Start, End time.Time
	Status     int // 0: no answer
	Err        error
}

// deliverUntilOK sends d to whatever url() names at each attempt until it
// is answered 2xx. It returns every attempt made and an error if the
// context ended or the attempts ran out first.
func deliverUntilOK(ctx context.Context, d delivery, url func() string, rp retryPolicy) ([]attempt, error) {
	var atts []attempt
	backoff := rp.MinBackoff
	for i := 0; i < rp.MaxAttempts; i++ {
		a := attempt{Start: time.Now()}
		res, err := post(ctx, url(), d)
		a.End, a.Status, a.Err = time.Now(), res.Status, err
		atts = append(atts, a)
		if rp.OnAttempt != nil {
			rp.OnAttempt(a)
		}
		if err == nil && res.Status/100 == 2 {
			return atts, nil
		}
		wait := backoff
		if s, perr := strconv.Atoi(res.RetryAfter); perr == nil && res.RetryAfter != "" {
			wait = min(time.Duration(s)*time.Second, rp.MaxRetryAfter)
		} else {
			backoff = min(backoff*2, rp.MaxBackoff)
		}
		select {
		case <-ctx.Done():
			return atts, fmt.Errorf("deliver %s: gave up after %d attempts: %w (last: status %d, %v)", d.ID, len(atts), ctx.Err(), a.Status, a.Err)
		case <-time.After(wait): // the sender's back-off, not a synchronisation
		}
	}
	return atts, fmt.Errorf("deliver %s: %d attempts, none answered 2xx", d.ID, len(atts))
}

// isConnRefused reports whether err says nothing listens there.
func isConnRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// urlBox holds the address of the receiver currently running, which
// changes at every restart.
type urlBox struct{ v atomic.Pointer[string] }

func (b *urlBox) Set(u string) { b.v.Store(&u) }
func (b *urlBox) Get() string  { return *b.v.Load() }

// lockOrders holds the orders table in an open transaction of the test's
// own, so that a receiver's order write blocks inside its transaction, and
// returns the function that lets it go (also called at cleanup).
func lockOrders(t *testing.T, w *world) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := tx.Rollback(ctx); err != nil {
				t.Errorf("release the orders lock: %v", err)
			}
			conn.Close(ctx)
		})
	}
	t.Cleanup(release)
	return release
}

// waitOrderWriteBlocked waits until a receiver's order write has waited on
// the orders lock for at least minWait, inside its transaction.
func waitOrderWriteBlocked(t *testing.T, w *world, minWait time.Duration) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("an order write to wait on the orders lock for %v", minWait), func() bool {
		return count(t, w.DB, `
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO orders%'
  AND xact_start <= now() - $1 * interval '1 millisecond'`, minWait.Milliseconds()) > 0
	})
}
