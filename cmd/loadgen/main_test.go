package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"
)

const testSecret = "whsec_loadgen_test_secret"

// fakeReceiver verifies every delivery the way the real receiver does and
// counts what it saw.
type fakeReceiver struct {
	mu       sync.Mutex
	seen     map[string]int // event id -> deliveries
	bad      int
	failOnce bool // answer the first attempt of each event 503 with Retry-After: 0
	failed   map[string]bool
}

func (f *fakeReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var id string
	switch r.URL.Path {
	case "/webhooks/stripe":
		if err := webhook.ValidatePayload(body, r.Header.Get("Stripe-Signature"), testSecret); err != nil {
			f.reject(w)
			return
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if json.Unmarshal(body, &ev) != nil || ev.ID == "" || ev.Type == "" {
			f.reject(w)
			return
		}
		id = ev.ID
	case "/webhooks/github":
		got, _ := hex.DecodeString(strings.TrimPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256="))
		want, _ := hex.DecodeString(strings.TrimPrefix(signGitHub(body, testSecret), "sha256="))
		if !hmac.Equal(got, want) || r.Header.Get("X-GitHub-Event") != "marketplace_purchase" || !json.Valid(body) {
			f.reject(w)
			return
		}
		id = r.Header.Get("X-GitHub-Delivery")
	default:
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	if f.failOnce && !f.failed[id] {
		f.failed[id] = true
		f.mu.Unlock()
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	f.seen[id]++
	f.mu.Unlock()
	time.Sleep(time.Millisecond)
	w.WriteHeader(http.StatusOK)
}

func (f *fakeReceiver) reject(w http.ResponseWriter) {
	f.mu.Lock()
	f.bad++
	f.mu.Unlock()
	w.WriteHeader(http.StatusBadRequest)
}

func newFake(t *testing.T) (*fakeReceiver, string) {
	f := &fakeReceiver{seen: map[string]int{}, failed: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func runJSON(t *testing.T, args ...string) Report {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), append(args, "-json", "-progress=false"), &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, errOut.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	return rep
}

func checkPercentiles(t *testing.T, l Latency) {
	t.Helper()
	if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("percentiles out of order: %+v", l)
	}
	if l.P50 < 1 { // the fake sleeps 1 ms per delivery
		t.Errorf("p50 %.3fms is below the fake receiver's 1 ms", l.P50)
	}
}

func TestStripeNewEvents(t *testing.T) {
	for _, event := range []string{"invoice", "checkout"} {
		t.Run(event, func(t *testing.T) {
			f, url := newFake(t)
			rep := runJSON(t, "-url", url, "-secret", testSecret, "-event", event, "-count", "200", "-concurrency", "4")
			if rep.Deliveries != 200 || rep.OK != 200 || rep.New != 200 || rep.Status["200"] != 200 {
				t.Fatalf("report %+v", rep)
			}
			if f.bad != 0 || len(f.seen) != 200 {
				t.Fatalf("receiver saw %d distinct events and %d bad signatures, want 200 and 0", len(f.seen), f.bad)
			}
			if rep.Throughput <= 0 || rep.Seconds <= 0 {
				t.Errorf("throughput %v over %vs", rep.Throughput, rep.Seconds)
			}
			checkPercentiles(t, rep.LatencyMS)
		})
	}
}

func TestDuplicates(t *testing.T) {
	f, url := newFake(t)
	rep := runJSON(t, "-url", url, "-secret", testSecret, "-duplicates", "0.5", "-count", "400", "-concurrency", "4")
	if rep.Deliveries != 400 || rep.OK != 400 {
		t.Fatalf("report %+v", rep)
	}
	total := 0
	for _, n := range f.seen {
		total += n
	}
	if total != 400 || len(f.seen) != rep.New || total-len(f.seen) != rep.Replays {
		t.Fatalf("receiver: %d deliveries of %d events; loadgen: %d new, %d replays", total, len(f.seen), rep.New, rep.Replays)
	}
	if rep.Replays < 120 || rep.Replays > 280 {
		t.Errorf("%d replays of 400 with -duplicates 0.5", rep.Replays)
	}
}

func TestReplaysOnly(t *testing.T) {
	f, url := newFake(t)
	rep := runJSON(t, "-url", url, "-secret", testSecret, "-duplicates", "1", "-prime", "10", "-count", "100", "-concurrency", "4")
	if rep.Primed != 10 || rep.Replays != 100 || rep.New != 0 || len(f.seen) != 10 {
		t.Fatalf("primed %d, replays %d, new %d; receiver saw %d events", rep.Primed, rep.Replays, rep.New, len(f.seen))
	}
}

func TestGitHub(t *testing.T) {
	f, url := newFake(t)
	rep := runJSON(t, "-url", url, "-provider", "github", "-secret", testSecret, "-count", "50", "-concurrency", "2")
	if rep.OK != 50 || f.bad != 0 || len(f.seen) != 50 {
		t.Fatalf("report %+v; receiver saw %d events, %d bad", rep, len(f.seen), f.bad)
	}
}

func TestWrongSecretIsCounted(t *testing.T) {
	f, url := newFake(t)
	rep := runJSON(t, "-url", url, "-secret", "whsec_wrong", "-count", "20", "-concurrency", "2")
	if rep.OK != 0 || rep.Status["400"] != 20 || f.bad != 20 {
		t.Fatalf("status %v, receiver rejected %d", rep.Status, f.bad)
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	f, url := newFake(t)
	f.failOnce = true
	rep := runJSON(t, "-url", url, "-secret", testSecret, "-count", "30", "-concurrency", "3", "-retry", "-retry-backoff", "10s")
	// Retry-After: 0 must win over the 10 s back-off, or this test times out.
	if rep.OK != 30 || rep.Retries != 30 || rep.Attempts != 60 {
		t.Fatalf("ok %d, retries %d, attempts %d", rep.OK, rep.Retries, rep.Attempts)
	}
	// Without -retry the 503 is final.
	f2, url2 := newFake(t)
	f2.failOnce = true
	rep = runJSON(t, "-url", url2, "-secret", testSecret, "-count", "10", "-concurrency", "2")
	if rep.OK != 0 || rep.Status["503"] != 10 {
		t.Fatalf("status %v", rep.Status)
	}
}

func TestRate(t *testing.T) {
	_, url := newFake(t)
	rep := runJSON(t, "-url", url, "-secret", testSecret, "-rate", "200", "-duration", "1s")
	if rep.Mode != "rate" || rep.Deliveries < 150 || rep.Deliveries > 210 || rep.OK != rep.Deliveries {
		t.Fatalf("report %+v", rep)
	}
	checkPercentiles(t, rep.LatencyMS)
}

func TestTextReportAndHelp(t *testing.T) {
	_, url := newFake(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-url", url, "-secret", testSecret, "-count", "5", "-progress=false"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"deliveries  5", "p99", "200: 5"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	errOut.Reset()
	if err := run(context.Background(), []string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-url", "-provider", "-secret", "-event", "-duplicates", "-concurrency", "-rate", "-duration", "-count", "-retry", "-json"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("-h does not document %s", want)
		}
	}
	var u usageError
	if err := run(context.Background(), []string{"-provider", "github", "-event", "invoice", "-secret", "x"}, &out, &errOut); !errors.As(err, &u) {
		t.Errorf("github invoice: %v, want a usage error", err)
	}
}
