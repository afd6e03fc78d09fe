package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// syncBuffer is a bytes.Buffer safe for the API's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startAPI serves a development fulfillment API recording to logPath.
func startAPI(t *testing.T, logPath string, status int, verify func(http.Header, []byte) error) (string, *syncBuffer) {
	t.Helper()
	printed := new(syncBuffer)
	api, err := openFulfillmentAPI(logPath, status, printed)
	if err != nil {
		t.Fatal(err)
	}
	api.verify = verify
	base, stop, err := serveFulfillmentAPI(api, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base, printed
}

// readCalls returns the lines of the API's log.
func readCalls(t *testing.T, path string) []call {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var calls []call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		calls = append(calls, c)
	}
	return calls
}

func post(t *testing.T, url, key, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestFulfillmentAPI: the receiver's own client is answered 201 for a new
// Idempotency-Key and 200 for one seen before (also across a restart,
// from the log), every call is recorded with its key and body and printed
// without the customer's address, and what is no fulfillment call is
// refused 4xx.
func TestFulfillmentAPI(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "var", "fulfillment.log")
	base, printed := startAPI(t, logPath, http.StatusCreated, nil)
	client := fulfillment.New(base)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	order := fulfillment.Request{OrderID: 7, Source: "stripe", ExternalID: "cs_test_1", AmountCents: 3000, Currency: "usd",
		CustomerEmail: "jane@example.com"}
	key := fulfillment.IdempotencyKey("evt_1/fulfillment")
	for range 2 {
		if err := client.Fulfill(ctx, key, order); err != nil {
			t.Fatalf("Fulfill: %v", err)
		}
	}
	if got := post(t, base+"/fulfillments", "", `{"order_id":1,"source":"stripe"}`); got != http.StatusBadRequest {
		t.Errorf("no Idempotency-Key: %d, want 400", got)
	}
	if got := post(t, base+"/fulfillments", "k", `{"hello":"world"}`); got != http.StatusBadRequest {
		t.Errorf("not a fulfillment request: %d, want 400", got)
	}
	if got := post(t, base+"/orders", "k", `{}`); got != http.StatusNotFound {
		t.Errorf("another path: %d, want 404", got)
	}

	calls := readCalls(t, logPath)
	if len(calls) != 4 {
		t.Fatalf("%d calls recorded, want 4: %+v", len(calls), calls)
	}
	var body fulfillment.Request
	if err := json.Unmarshal(calls[0].Body, &body); err != nil || body != order {
		t.Errorf("recorded body %s (%v), want %+v", calls[0].Body, err, order)
	}
	for i, want := range []int{201, 200, 400, 400} {
		if calls[i].Status != want {
			t.Errorf("call %d recorded %d, want %d", i, calls[i].Status, want)
		}
	}
	if calls[0].IdempotencyKey != key || calls[1].IdempotencyKey != key || calls[0].Signature != "unchecked" {
		t.Errorf("recorded key %q, %q, signature %q", calls[0].IdempotencyKey, calls[1].IdempotencyKey, calls[0].Signature)
	}
	out := printed.String()
	for _, want := range []string{"201 order 7 (stripe cs_test_1, 3000 usd), Idempotency-Key " + key, "200 order 7", "again", "400 no Idempotency-Key"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed lines lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "jane@") {
		t.Errorf("printed the customer's address:\n%s", out)
	}
	if fi, err := os.Stat(logPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v (%v), want 0600: it holds customers' addresses", fi.Mode(), err)
	}

	// Another run of make run: the key is known from the log.
	base2, _ := startAPI(t, logPath, http.StatusCreated, nil)
	if got := post(t, base2+"/fulfillments", key, `{"order_id":7,"source":"stripe"}`); got != http.StatusOK {
		t.Errorf("a key of the previous run: %d, want 200", got)
	}
}

// TestFulfillmentAPIStatus: -fulfillment-status 503 makes the step fail
// (transient: the receiver retries), and a key answered 5xx is not seen.
func TestFulfillmentAPIStatus(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "fulfillment.log")
	base, _ := startAPI(t, logPath, http.StatusServiceUnavailable, nil)
	err := fulfillment.New(base).Fulfill(context.Background(), "k1", fulfillment.Request{OrderID: 1, Source: "stripe"})
	var se *fulfillment.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable || se.Permanent() {
		t.Fatalf("Fulfill: %v, want a transient 503", err)
	}
	base2, _ := startAPI(t, logPath, http.StatusCreated, nil)
	if got := post(t, base2+"/fulfillments", "k1", `{"order_id":1,"source":"stripe"}`); got != http.StatusCreated {
		t.Errorf("the retry of a key answered 503: %d, want 201", got)
	}
}

// TestFulfillmentAPISignature: with FULFILLMENT_SECRET, a call the
// receiver's client signs with it is verified; one signed with another
// key, one unsigned, and one whose signed webhook-id is not its
// Idempotency-Key are refused 401 and recorded with why.
func TestFulfillmentAPISignature(t *testing.T) {
	secret := standardwebhooks.NewSecret()
	verify, err := fulfillmentVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "fulfillment.log")
	base, _ := startAPI(t, logPath, http.StatusCreated, verify)
	key, _ := standardwebhooks.ParseSecret(secret)
	other, _ := standardwebhooks.ParseSecret(standardwebhooks.NewSecret())
	order := fulfillment.Request{OrderID: 1, Source: "stripe", ExternalID: "cs_1"}
	call := func(k []byte, idem string) error {
		c := fulfillment.New(base)
		c.Key = k
		return c.Fulfill(context.Background(), idem, order)
	}
	if err := call(key, "k-good"); err != nil {
		t.Errorf("signed with FULFILLMENT_SECRET: %v", err)
	}
	for _, k := range [][]byte{other, nil} {
		var se *fulfillment.StatusError
		if err := call(k, "k-bad"); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
			t.Errorf("signed with key %x: %v, want 401", k, err)
		}
	}
	body := `{"order_id":1,"source":"stripe"}`
	req, _ := http.NewRequest(http.MethodPost, base+"/fulfillments", strings.NewReader(body))
	for k, v := range standardwebhooks.Headers("another-id", time.Now(), []byte(body), key) {
		req.Header[k] = v
	}
	req.Header.Set("Idempotency-Key", "k-mismatch")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("webhook-id other than the Idempotency-Key: %d, want 401", resp.StatusCode)
	}
	calls := readCalls(t, logPath)
	var got []string
	for _, c := range calls {
		got = append(got, fmt.Sprint(c.Status, " ", c.Signature))
	}
	want := []string{"201 verified", "401 refused: ", "401 unsigned", "401 refused: webhook-id is not the Idempotency-Key"}
	if len(got) != len(want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("call %d recorded %q, want %q…", i, got[i], want[i])
		}
	}
}
