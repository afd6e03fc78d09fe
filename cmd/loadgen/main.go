// Command loadgen sends correctly signed webhook deliveries of any provider
// of the receiver's registry (internal/providers) to a receiver and reports
// throughput, latency percentiles and status counts. Point it at your own
// deployment before a launch:
//
//	loadgen -url https://hooks.example.com/webhooks/stripe -secret whsec_… \
//	        -event invoice -duplicates 0.3 -concurrency 32 -duration 1m
//
// Every delivery is signed, and its headers made, by the provider's
// Spec.Sign; its body is the provider's Spec.Example, or for Stripe one of
// loadgen's own events of the size of real ones. A provider added to the
// registry with a Spec that has Sign and Example needs nothing here.
//
// It exits 1 when a measured delivery failed: its final answer was not
// 2xx, nor the receiver's 503 with Retry-After for a busy event or a full
// receiver (deferred, which a sender retries); the report says which
// answers, and why when the receiver said.
//
// Run `loadgen -h` for every flag.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// failedError is a run in which measured deliveries failed: loadgen exits
// 1 after the report.
type failedError struct{ failed, deliveries int }

func (e failedError) Error() string {
	return fmt.Sprintf("%d of %s failed", e.failed, webhooks.Plural(e.deliveries, "delivery", "deliveries"))
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// config is the parsed command line.
type config struct {
	URL          string
	Provider     string
	Secret       string
	Event        string
	Duplicates   float64
	Prime        int
	Pool         int
	Seed         uint64
	Customers    int
	Concurrency  int
	Rate         float64
	Duration     time.Duration
	Warmup       time.Duration
	Count        int
	Retry        bool
	RetryMax     int
	RetryBackoff time.Duration
	Timeout      time.Duration
	MaxInFlight  int
	JSON         bool
	Progress     bool
	Marks        bool
	PrintBody    bool

	spec webhooks.Spec // the provider's, from the registry
}

const usageText = `usage: loadgen [flags]

Sends correctly signed webhook deliveries to a receiver and reports
throughput, latency percentiles (p50, p90, p99, max), status counts and
errors. A live progress line goes to stderr once a second; the report goes
to stdout (-json for scripts).

A delivery fails when its final answer (after -retry's attempts) is not
2xx, with one exception: a 503 with Retry-After in which the receiver says
it is busy (another delivery holds the event's lease: "lease_conflict"; or
it refused the request for load before reading it: "rejected") is counted
as deferred, the retry the contract asks a sender for. Network errors and
timeouts fail. loadgen exits 1 when any measured delivery failed, after
printing the report (-json too), and names the answers: "400
no_valid_signature" means -secret is not the secret the receiver runs with.

Load shape: -concurrency N workers each send a delivery, wait for the
answer, send the next (closed loop); or, with -rate R, deliveries start at a
fixed R per second whatever the receiver does (open loop; latency is then
measured from each delivery's scheduled start, so a stalled receiver shows
up in the percentiles). When the time is up, no delivery starts and those
in flight are waited for (and counted), so the receiver never sees a
client hang up mid-request.

Providers: every provider of the receiver's registry; each delivery is
signed, and its headers made, by the provider's own description (its
Spec), as the provider signs it.

Events: Stripe bodies have the fields, nesting and size of real events of
API version 2023-10-16 (invoice.created about 5.7 KB, invoice.paid about
6.1 KB, checkout.session.completed about 3.9 KB), with new ids in every
event, in test mode ("livemode": false: a receiver with STRIPE_LIVEMODE=true
acknowledges them as ignored). Every provider also sends "example", the paid order its Spec
describes (GitHub's is github-purchase). -print-body shows one.

Examples:
  loadgen -url http://127.0.0.1:8080 -secret whsec_... -event invoice -duration 30s
  loadgen -url http://127.0.0.1:8080 -secret whsec_... -event checkout -duplicates 0.3 -rate 200 -count 5000 -retry
  loadgen -url http://127.0.0.1:8080 -provider github -secret s3cret... -event github-purchase
  loadgen -url http://127.0.0.1:8080 -provider paddle -secret pdl_ntfset_... -count 1000
  loadgen -url http://127.0.0.1:8080 -secret whsec_... -pool 500 -seed 7 -prime 500 -count 1   # send a fixed set once
  loadgen -url http://127.0.0.1:8080 -secret whsec_... -pool 500 -seed 7 -duration 30s          # then replay only it
  loadgen -event checkout -print-body

Flags:
`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "receiver `URL`; with no path, /webhooks/<provider> is appended")
	fs.StringVar(&c.Provider, "provider", "stripe", "sender to imitate: "+strings.Join(providers.Sources(providers.All()), ", "))
	fs.StringVar(&c.Secret, "secret", "", "signing `secret`, as the receiver is configured with it (Stripe whsec_…, the GitHub webhook secret, …); default the first of the provider's variable ($STRIPE_WEBHOOK_SECRET, $GITHUB_WEBHOOK_SECRET, …)")
	fs.StringVar(&c.Event, "event", "", "event to send: invoice (Stripe invoice.created: database only), invoice-paid (Stripe invoice.paid: a receipt e-mail), checkout (Stripe checkout.session.completed, paid: email and fulfillment steps), burst (the seven Stripe events of each Checkout of a subscription, in turn, each naming the customer: see -customers), github-purchase (GitHub marketplace_purchase purchased), example (any provider: the paid order of its Spec's Example); default invoice for stripe, github-purchase for github, example for the others")
	fs.Float64Var(&c.Duplicates, "duplicates", 0, "`ratio` (0…1) of deliveries that replay an event already answered 2xx, the rest are new events; 1 sends only replays (see -prime)")
	fs.IntVar(&c.Prime, "prime", 0, "send `N` new events before the measured run (not measured), so that replays have events to replay; default: when -duplicates is 1, as many as -concurrency. With -pool: the first N events of the pool, once each")
	fs.IntVar(&c.Pool, "pool", 0, "send only the `N` events of a fixed pool chosen by -seed, the same bytes in every run, each delivery a random one of them (counted as replays): several runs can replay what one run primed")
	fs.Uint64Var(&c.Seed, "seed", 1, "`seed` of the -pool events")
	fs.IntVar(&c.Customers, "customers", 0, "Stripe: every new event names one of `N` customers (each with its one address, the same in every run) instead of a customer of its own; with -event burst, every checkout is one of theirs")
	fs.IntVar(&c.Concurrency, "concurrency", 16, "deliveries in flight at once (closed loop); ignored with -rate")
	fs.Float64Var(&c.Rate, "rate", 0, "fixed arrival rate in deliveries per `second` (open loop); 0 means closed loop at -concurrency")
	fs.DurationVar(&c.Duration, "duration", 0, "how long to send, after the warm-up (default 10s, or until -count)")
	fs.DurationVar(&c.Warmup, "warmup", 0, "send for this long first without measuring (same load)")
	fs.IntVar(&c.Count, "count", 0, "stop after `N` measured deliveries (with -duration: whichever comes first)")
	fs.BoolVar(&c.Retry, "retry", false, "retry like Stripe: a non-2xx answer or a network error is retried with exponential back-off, honouring Retry-After")
	fs.IntVar(&c.RetryMax, "retry-max", 8, "attempts per delivery with -retry, the first included")
	fs.DurationVar(&c.RetryBackoff, "retry-backoff", time.Second, "first back-off with -retry; doubles each attempt, at most 1m (Stripe's real schedule spans 3 days)")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Second, "per-attempt timeout; Stripe gives up on an endpoint after a few seconds, so keep yours well under that")
	fs.IntVar(&c.MaxInFlight, "max-inflight", 10000, "with -rate, deliveries that may be outstanding at once; arrivals beyond it are counted as dropped")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&c.Progress, "progress", true, "print a progress line to stderr once a second")
	fs.BoolVar(&c.Marks, "marks", false, "print \"loadgen: measuring\" and \"loadgen: measured\" lines to stderr when the measured window starts and ends (for a harness sampling CPU)")
	fs.BoolVar(&c.PrintBody, "print-body", false, "print the body of one new -event to stdout and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	all := providers.All()
	i := slices.IndexFunc(all, func(s webhooks.Spec) bool { return s.Source == c.Provider })
	if i < 0 {
		return c, usageError{fmt.Sprintf("-provider must be one of %s, got %q", strings.Join(providers.Sources(all), ", "), c.Provider)}
	}
	c.spec = all[i]
	evs := events(c.spec)
	switch {
	case c.spec.Sign == nil || len(evs) == 0:
		return c, usageError{fmt.Sprintf("-provider %s cannot be imitated: its Spec has no Sign or no Example", c.Provider)}
	case c.Event == "":
		c.Event = defaultEvent(c.spec)
	}
	if !slices.Contains(evs, c.Event) {
		return c, usageError{fmt.Sprintf("-event %s cannot be sent by -provider %s; its events are %s", c.Event, c.Provider, strings.Join(evs, ", "))}
	}
	if c.PrintBody {
		return c, nil
	}
	if c.Secret == "" {
		env := c.spec.Secret.Name
		c.Secret, _, _ = strings.Cut(os.Getenv(env), ",")
		c.Secret = strings.TrimSpace(c.Secret)
		if c.Secret == "" {
			return c, usageError{fmt.Sprintf("-secret is required (or set %s)", env)}
		}
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, usageError{fmt.Sprintf("-url must be an http or https URL, got %q", c.URL)}
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = c.spec.Route()
	}
	c.URL = u.String()
	switch {
	case c.Duplicates < 0 || c.Duplicates > 1:
		return c, usageError{"-duplicates must be between 0 and 1"}
	case c.Concurrency < 1:
		return c, usageError{"-concurrency must be at least 1"}
	case c.Rate < 0:
		return c, usageError{"-rate must not be negative"}
	case c.Count < 0 || c.Prime < 0 || c.Pool < 0:
		return c, usageError{"-count, -prime and -pool must not be negative"}
	case c.Customers < 0:
		return c, usageError{"-customers must not be negative"}
	case c.Customers > 0 && c.Provider != "stripe":
		return c, usageError{"-customers is for -provider stripe"}
	case c.Pool > 0 && c.Duplicates > 0:
		return c, usageError{"-pool sends only the pool's events: leave -duplicates out"}
	case c.RetryMax < 1:
		return c, usageError{"-retry-max must be at least 1"}
	case c.MaxInFlight < 1:
		return c, usageError{"-max-inflight must be at least 1"}
	}
	if c.Duration == 0 && c.Count == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Prime == 0 && c.Duplicates == 1 {
		c.Prime = c.Concurrency
	}
	if c.Pool > 0 {
		c.Prime = min(c.Prime, c.Pool)
	}
	return c, nil
}

// Report is the outcome of a run; -json prints it as is.
type Report struct {
	URL         string         `json:"url"`
	Provider    string         `json:"provider"`
	Event       string         `json:"event"`
	Mode        string         `json:"mode"` // "concurrency" or "rate"
	Concurrency int            `json:"concurrency,omitempty"`
	Rate        float64        `json:"rate,omitempty"`
	Duplicates  float64        `json:"duplicates"`
	Deliveries  int            `json:"deliveries"` // measured deliveries finished
	New         int            `json:"new"`
	Replays     int            `json:"replays"`
	OK          int            `json:"ok"`       // finished with a 2xx
	Deferred    int            `json:"deferred"` // finished with the receiver's busy 503 with Retry-After
	Failed      int            `json:"failed"`   // any other final answer, or none: loadgen exits 1
	Seconds     float64        `json:"seconds"`
	Throughput  float64        `json:"throughput"`    // deliveries per second
	OKPerSecond float64        `json:"ok_per_second"` // 2xx deliveries per second
	LatencyMS   Latency        `json:"latency_ms"`
	Status      map[string]int `json:"status"` // final answer of each delivery: "200", "503", "error"
	Errors      map[string]int `json:"errors,omitempty"`
	Failures    map[string]int `json:"failures,omitempty"` // failed deliveries by final answer: "400 no_valid_signature", "502 step_failed", "error: timeout"
	Attempts    int            `json:"attempts"`
	Retries     int            `json:"retries"`
	Dropped     int            `json:"dropped,omitempty"` // -rate arrivals over -max-inflight
	Primed      int            `json:"primed,omitempty"`
	Pool        int            `json:"pool,omitempty"`
	BodyBytes   float64        `json:"body_bytes_mean"` // mean body size of the measured deliveries
	CPUSeconds  float64        `json:"cpu_seconds"`     // loadgen's own CPU time (user+system) over the measured window
}

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// result is one finished delivery.
type result struct {
	latency  time.Duration
	status   int // 0: network error
	answer   answer
	err      string
	replay   bool
	attempts int
	bytes    int // body size
}

// collector gathers results of measured deliveries.
type collector struct {
	mu       sync.Mutex
	results  []result
	lastDone time.Time
	done     atomic.Int64 // measured and finished, for the progress line
	failed   atomic.Int64
}

func (c *collector) add(r result) {
	c.mu.Lock()
	c.results = append(c.results, r)
	c.lastDone = time.Now()
	c.mu.Unlock()
	c.done.Add(1)
	if r.status/100 != 2 {
		c.failed.Add(1)
	}
}

// history is the events answered 2xx so far, which replays draw from. It
// keeps at most historyCap of them.
type history struct {
	mu   sync.Mutex
	done []delivery
}

const historyCap = 10_000

func (h *history) add(d delivery) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.done) < historyCap {
		h.done = append(h.done, d)
		return
	}
	h.done[rand.IntN(historyCap)] = d
}

func (h *history) pick() (delivery, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.done) == 0 {
		return delivery{}, false
	}
	d := h.done[rand.IntN(len(h.done))]
	d.replay = true
	return d, true
}

// sender sends deliveries.
type sender struct {
	cfg    config
	client *http.Client
	hist   history
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.PrintBody {
		d := newDelivery(cfg.spec, cfg.Event, time.Now())
		_, err := stdout.Write(d.body)
		return err
	}
	idle := cfg.Concurrency
	if cfg.Rate > 0 {
		idle = min(cfg.MaxInFlight, 1024)
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	defer tr.CloseIdleConnections()
	// Like every sender, it follows no redirect: a 3xx is the answer.
	s := &sender{cfg: cfg, client: &http.Client{Transport: tr, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}

	// fresh makes a new event.
	fresh := func() delivery { return newDelivery(cfg.spec, cfg.Event, time.Now()) }
	switch {
	case cfg.Event == burstEvent:
		b := &burster{seed: rand.Uint64(), customers: cfg.Customers}
		fresh = func() delivery { return b.next(time.Now()) }
	case cfg.Customers > 0:
		fresh = func() delivery { return newCustomerDelivery(cfg.Event, rand.IntN(cfg.Customers), time.Now()) }
	}

	// The fixed pool of -pool, built once.
	var pool []delivery
	for i := range cfg.Pool {
		d := poolDelivery(cfg.spec, cfg.Event, cfg.Seed, i)
		d.replay = true
		pool = append(pool, d)
	}

	// Priming: new events, not measured, so that replays have something to
	// replay from the first measured second.
	var primed int
	if cfg.Prime > 0 {
		var n atomic.Int64
		prime := fresh
		if pool != nil {
			var k atomic.Int64
			prime = func() delivery {
				d := pool[(k.Add(1)-1)%int64(len(pool))]
				d.replay = false
				return d
			}
		}
		s.closedLoop(ctx, ctx, cfg.Concurrency, func() bool { return n.Add(1) <= int64(cfg.Prime) }, prime, nil)
		s.hist.mu.Lock()
		primed = len(s.hist.done)
		s.hist.mu.Unlock()
		if primed == 0 && (cfg.Duplicates > 0 || pool != nil) {
			return fmt.Errorf("none of the %d priming deliveries was answered 2xx by %s: nothing to replay", cfg.Prime, cfg.URL)
		}
	}
	next := func() delivery {
		if pool != nil {
			return pool[rand.IntN(len(pool))]
		}
		if cfg.Duplicates > 0 && rand.Float64() < cfg.Duplicates {
			if d, ok := s.hist.pick(); ok {
				return d
			}
		}
		return fresh()
	}

	if cfg.Warmup > 0 && ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, cfg.Warmup)
		s.load(ctx, wctx, 0, next, nil)
		cancel()
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	col := &collector{}
	// mctx ends the measured window: no delivery starts after it, and
	// those in flight finish under ctx.
	mctx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		mctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	if cfg.Marks {
		fmt.Fprintln(stderr, "loadgen: measuring")
	}
	cpu0 := selfCPU()
	start := time.Now()
	stopProgress := s.progress(col, start, stderr)
	dropped := s.load(ctx, mctx, cfg.Count, next, col)
	stopProgress()
	cpu := selfCPU() - cpu0
	if cfg.Marks {
		fmt.Fprintln(stderr, "loadgen: measured")
	}

	rep := s.report(col, start, dropped, primed)
	rep.CPUSeconds = cpu
	rep.Pool = cfg.Pool
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printReport(stdout, rep, cfg.spec.Secret.Name)
		if rep.Deliveries == 0 {
			return errors.New("no delivery finished")
		}
	}
	if rep.Failed > 0 {
		return failedError{failed: rep.Failed, deliveries: rep.Deliveries}
	}
	return nil
}

// selfCPU is this process's CPU time so far (user and system), in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// load runs the configured load shape until stop ends or count deliveries
// have been started (0: no limit); deliveries in flight when stop ends run
// to their end under ctx. Results go to col when it is not nil. It returns
// how many arrivals were dropped (rate mode only).
func (s *sender) load(ctx, stop context.Context, count int, next func() delivery, col *collector) int {
	var started atomic.Int64
	more := func() bool { return count == 0 || started.Add(1) <= int64(count) }
	if s.cfg.Rate > 0 {
		return s.openLoop(ctx, stop, more, next, col)
	}
	s.closedLoop(ctx, stop, s.cfg.Concurrency, more, next, col)
	return 0
}

func (s *sender) closedLoop(ctx, stop context.Context, workers int, more func() bool, next func() delivery, col *collector) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for stop.Err() == nil && more() {
				r := s.deliver(ctx, stop, next(), time.Now())
				if col != nil && r.status != -1 {
					col.add(r)
				}
			}
		})
	}
	wg.Wait()
}

func (s *sender) openLoop(ctx, stop context.Context, more func() bool, next func() delivery, col *collector) int {
	interval := time.Duration(float64(time.Second) / s.cfg.Rate)
	sem := make(chan struct{}, s.cfg.MaxInFlight)
	var wg sync.WaitGroup
	dropped := 0
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-stop.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if stop.Err() != nil || !more() {
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			dropped++
			continue
		}
		d := next()
		wg.Go(func() {
			defer func() { <-sem }()
			// The delivery must finish even if the run's time is up: it
			// was started inside the window.
			r := s.deliver(ctx, stop, d, at)
			if col != nil && r.status != -1 {
				col.add(r)
			}
		})
	}
	wg.Wait()
	return dropped
}

// deliver sends d, retrying when asked, and reports the final answer.
// Latency runs from start (the scheduled start in rate mode) to the final
// answer. Requests run under ctx; no retry starts once stop has ended. A
// delivery cut short (ctx ended, or a retry due after stop) has status -1
// and is not counted.
func (s *sender) deliver(ctx, stop context.Context, d delivery, start time.Time) result {
	r := result{replay: d.replay, bytes: len(d.body)}
	for attempt := 1; ; attempt++ {
		r.attempts = attempt
		status, retryAfter, ans, err := s.attempt(ctx, d)
		if err != nil && ctx.Err() != nil {
			return result{status: -1}
		}
		r.status, r.answer, r.err = status, ans, ""
		r.answer.retryAfter = retryAfter >= 0
		if err != nil {
			r.err = errorClass(err)
		}
		if status/100 == 2 {
			if !d.replay {
				s.hist.add(d)
			}
			break
		}
		if !s.cfg.Retry || attempt >= s.cfg.RetryMax {
			break
		}
		wait := min(s.cfg.RetryBackoff<<(attempt-1), time.Minute)
		if retryAfter >= 0 {
			wait = retryAfter
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return result{status: -1}
		case <-stop.Done():
			t.Stop()
			return result{status: -1}
		case <-t.C:
		}
	}
	r.latency = time.Since(start)
	return r
}

// attempt makes one HTTP request. retryAfter is -1 when the answer had no
// usable Retry-After; ans is what the receiver said of a non-2xx answer.
func (s *sender) attempt(ctx context.Context, d delivery) (status int, retryAfter time.Duration, ans answer, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(d.body))
	if err != nil {
		return 0, -1, ans, err
	}
	req.Header = headers(s.cfg.spec, s.cfg.Secret, d, time.Now())
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, -1, ans, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		ans = answerOf(b)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After")), ans, nil
}

// answer is what the receiver said of a delivery it did not answer 2xx, in
// its JSON answer ({"outcome":"rejected","reason":"no_valid_signature"}):
// words of its closed vocabulary, or nothing.
type answer struct {
	outcome, reason string
	retryAfter      bool // the answer had a usable Retry-After
}

// answerOf reads a receiver's answer; what is not one of its words (a
// proxy's page, a word out of bounds) is left out.
func answerOf(body []byte) answer {
	var a struct{ Outcome, Reason string }
	if json.Unmarshal(body, &a) != nil {
		return answer{}
	}
	word := func(s string) string {
		if len(s) > 40 || strings.ContainsFunc(s, func(r rune) bool { return (r < 'a' || r > 'z') && r != '_' }) {
			return ""
		}
		return s
	}
	return answer{outcome: word(a.Outcome), reason: word(a.Reason)}
}

// verdict classifies a finished delivery: ok (2xx), deferred (the
// receiver's 503 with Retry-After for a busy event or a full receiver: it
// wrote nothing it cannot finish, and a sender retries), or failed
// (anything else), with the failure's label for the report.
func (r result) verdict() (ok, deferred bool, failure string) {
	switch {
	case r.status/100 == 2:
		return true, false, ""
	case r.status == http.StatusServiceUnavailable && r.answer.retryAfter &&
		(r.answer.outcome == string(webhooks.OutcomeLeaseConflict) || r.answer.outcome == "rejected"):
		return false, true, ""
	case r.status == 0:
		return false, false, "error: " + r.err
	}
	label := strconv.Itoa(r.status)
	if w := cmp.Or(r.answer.reason, r.answer.outcome); w != "" {
		label += " " + w
	}
	return false, false, label
}

// parseRetryAfter reads delay-seconds or an HTTP date; -1 when absent or
// unreadable.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return -1
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return -1
}

// errorClass turns a network error into a short, countable label.
func errorClass(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}

// progress prints a line to stderr once a second until the returned
// function is called.
func (s *sender) progress(col *collector, start time.Time, stderr io.Writer) func() {
	if !s.cfg.Progress {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			n := col.done.Load()
			fmt.Fprintf(stderr, "loadgen: %5.0fs  %8d done  %7.1f/s  %d not 2xx\n",
				time.Since(start).Seconds(), n, float64(n-last), col.failed.Load())
			last = n
		}
	})
	return func() { close(done); wg.Wait() }
}

func (s *sender) report(col *collector, start time.Time, dropped, primed int) Report {
	col.mu.Lock()
	defer col.mu.Unlock()
	rep := Report{
		URL: s.cfg.URL, Provider: s.cfg.Provider, Event: s.cfg.Event, Duplicates: s.cfg.Duplicates,
		Status: map[string]int{}, Dropped: dropped, Primed: primed,
	}
	if s.cfg.Rate > 0 {
		rep.Mode, rep.Rate = "rate", s.cfg.Rate
	} else {
		rep.Mode, rep.Concurrency = "concurrency", s.cfg.Concurrency
	}
	lat := make([]time.Duration, 0, len(col.results))
	var sum time.Duration
	var bodyBytes int
	for _, r := range col.results {
		rep.Deliveries++
		if r.replay {
			rep.Replays++
		} else {
			rep.New++
		}
		switch ok, deferred, failure := r.verdict(); {
		case ok:
			rep.OK++
		case deferred:
			rep.Deferred++
		default:
			rep.Failed++
			if rep.Failures == nil {
				rep.Failures = map[string]int{}
			}
			rep.Failures[failure]++
		}
		if r.status == 0 {
			rep.Status["error"]++
		} else {
			rep.Status[strconv.Itoa(r.status)]++
		}
		if r.err != "" {
			if rep.Errors == nil {
				rep.Errors = map[string]int{}
			}
			rep.Errors[r.err]++
		}
		rep.Attempts += r.attempts
		rep.Retries += r.attempts - 1
		bodyBytes += r.bytes
		lat = append(lat, r.latency)
		sum += r.latency
	}
	end := col.lastDone
	if end.Before(start) {
		end = time.Now()
	}
	rep.Seconds = end.Sub(start).Seconds()
	if rep.Seconds > 0 {
		rep.Throughput = float64(rep.Deliveries) / rep.Seconds
		rep.OKPerSecond = float64(rep.OK) / rep.Seconds
	}
	if len(lat) > 0 {
		rep.BodyBytes = float64(bodyBytes) / float64(len(lat))
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		rep.LatencyMS = Latency{
			P50: ms(percentile(lat, 50)), P90: ms(percentile(lat, 90)), P99: ms(percentile(lat, 99)),
			Max: ms(lat[len(lat)-1]), Mean: ms(sum / time.Duration(len(lat))),
		}
	}
	return rep
}

// percentile is the nearest-rank percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// printReport writes r for a person; secretVar is the variable -secret
// defaults to, which a hint names.
func printReport(w io.Writer, r Report, secretVar string) {
	shape := fmt.Sprintf("concurrency %d", r.Concurrency)
	if r.Mode == "rate" {
		shape = fmt.Sprintf("rate %g/s", r.Rate)
	}
	fmt.Fprintf(w, "%s %s → %s, %s, duplicates %.2f\n", r.Provider, r.Event, r.URL, shape, r.Duplicates)
	fmt.Fprintf(w, "deliveries  %d in %.2fs = %.1f/s (%d new, %s; %.1f/s answered 2xx)\n",
		r.Deliveries, r.Seconds, r.Throughput, r.New, webhooks.Plural(r.Replays, "replay", "replays"), r.OKPerSecond)
	if r.Pool > 0 {
		fmt.Fprintf(w, "pool        %s\n", webhooks.Plural(r.Pool, "fixed event", "fixed events"))
	}
	l := r.LatencyMS
	fmt.Fprintf(w, "latency     p50 %.1fms  p90 %.1fms  p99 %.1fms  max %.1fms  mean %.1fms\n", l.P50, l.P90, l.P99, l.Max, l.Mean)
	fmt.Fprintf(w, "bodies      %.0f bytes on average\n", r.BodyBytes)
	fmt.Fprintf(w, "status      %s\n", counts(r.Status))
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "errors      %s\n", counts(r.Errors))
	}
	fmt.Fprintf(w, "attempts    %d (%s)\n", r.Attempts, webhooks.Plural(r.Retries, "retry", "retries"))
	if r.Dropped > 0 {
		fmt.Fprintf(w, "dropped     %s over -max-inflight\n", webhooks.Plural(r.Dropped, "arrival", "arrivals"))
	}
	result := fmt.Sprintf("%d of %s answered 2xx", r.OK, webhooks.Plural(r.Deliveries, "delivery", "deliveries"))
	if r.Deferred > 0 {
		result += fmt.Sprintf(", %d deferred (503 with Retry-After: the receiver was busy; a sender retries)", r.Deferred)
	}
	if r.Failed == 0 {
		fmt.Fprintf(w, "result      ok: %s\n", result)
		return
	}
	fmt.Fprintf(w, "result      FAILED: %s, %d failed (%s)\n", result, r.Failed, counts(r.Failures))
	if r.Failures["400 "+webhooks.ReasonNoValidSignature] > 0 {
		fmt.Fprintf(w, "hint        %s: the receiver runs with another secret than -secret (default $%s); "+
			"next to make run, eval \"$(bin/dev env)\" exports the one it runs with\n", webhooks.ReasonNoValidSignature, secretVar)
	}
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
