package main

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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment"
)

// fulfillmentAPI is the development fulfillment API make run points
// FULFILLMENT_URL at, so that the fulfillment step of a test checkout runs
// instead of being skipped. It answers POST /fulfillments as the contract
// says a real API does (docs/fulfillment-api.md): status (201) for a new
// Idempotency-Key, 200 for one it has seen (the same step again: a retry,
// a replay), 400 for a body that is not a fulfillment request, 401 for a
// call whose signature verify refuses. Each call
// is appended to a log file, one JSON object a line, and printed, so that a
// developer can watch them.
type fulfillmentAPI struct {
	status int       // the answer to a new key: 201, or what -fulfillment-status says
	print  io.Writer // a line per call
	// verify checks a call's signature (fulfillmentVerifier); nil: calls
	// are recorded as "unchecked".
	verify func(h http.Header, body []byte) error
	now    func() time.Time

	mu   sync.Mutex
	log  *os.File
	seen map[string]bool // the Idempotency-Keys of the log
}

// call is one line of the log file.
type call struct {
	Time           time.Time       `json:"time"`
	Status         int             `json:"status"`
	IdempotencyKey string          `json:"idempotency_key"`
	Signature      string          `json:"signature"` // verified, unsigned, unchecked, or why it was refused
	Body           json.RawMessage `json:"body"`
}

// maxFulfillmentBody bounds what the API reads of a call.
const maxFulfillmentBody = 64 << 10

// openFulfillmentAPI opens (creating it) the log at path, mode 0600: it
// holds customers' addresses. The keys already in it count as seen.
func openFulfillmentAPI(path string, status int, print io.Writer) (*fulfillmentAPI, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("fulfillment log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fulfillment log: %w", err)
	}
	api := &fulfillmentAPI{status: status, print: print, now: time.Now, log: f, seen: map[string]bool{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 2*maxFulfillmentBody)
	for sc.Scan() {
		var c call
		if json.Unmarshal(sc.Bytes(), &c) == nil && c.Status >= 200 && c.Status < 300 {
			api.seen[c.IdempotencyKey] = true
		}
	}
	return api, nil
}

// Close closes the log.
func (a *fulfillmentAPI) Close() error { return a.log.Close() }

func (a *fulfillmentAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/fulfillments" {
		http.Error(w, "only POST /fulfillments is served here", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFulfillmentBody))
	if err != nil {
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	signature := "unchecked"
	switch {
	case r.Header.Get("Webhook-Signature") == "" && a.verify != nil:
		signature = "unsigned"
	case a.verify != nil:
		if err := a.verify(r.Header, body); err != nil {
			signature = "refused: " + err.Error()
		} else {
			signature = "verified"
		}
	}
	var req fulfillment.Request
	status, problem := a.status, ""
	switch {
	case strings.HasPrefix(signature, "refused") || signature == "unsigned":
		status, problem = http.StatusUnauthorized, "signature "+signature
	case key == "":
		status, problem = http.StatusBadRequest, "no Idempotency-Key"
	case json.Unmarshal(body, &req) != nil || req.OrderID == 0 || req.Source == "":
		status, problem = http.StatusBadRequest, "not a fulfillment request (order_id, source, …)"
	}

	a.mu.Lock()
	again := problem == "" && a.seen[key]
	if again {
		status = http.StatusOK
	}
	if problem == "" && status < 300 {
		a.seen[key] = true
	}
	c := call{Time: a.now().UTC(), Status: status, IdempotencyKey: key, Signature: signature, Body: compact(body)}
	line, _ := json.Marshal(c)
	_, werr := a.log.Write(append(line, '\n'))
	a.mu.Unlock()
	if werr != nil {
		fmt.Fprintf(a.print, "fulfillment API: cannot record a call: %v\n", werr)
	}

	// Printed before the answer: once the caller has it, the line is out.
	if problem != "" {
		fmt.Fprintf(a.print, "fulfillment API: %d %s (Idempotency-Key %s)\n", status, problem, quoteKey(key))
	} else {
		note := ""
		if again {
			note = ", again: the same key as before (a retry or a replay)"
		}
		fmt.Fprintf(a.print, "fulfillment API: %d order %d (%s %s, %d %s), Idempotency-Key %s, signature %s%s\n",
			status, req.OrderID, req.Source, quoteKey(req.ExternalID), req.AmountCents, quoteKey(req.Currency), quoteKey(key), signature, note)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if problem != "" {
		_ = json.NewEncoder(w).Encode(map[string]string{"error": problem})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"fulfillment": key, "order_id": req.OrderID})
}

// compact is body as one line of JSON, as sent but for white space, or
// as a JSON string when it is no JSON.
func compact(body []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, body) == nil {
		return b.Bytes()
	}
	s, _ := json.Marshal(string(body))
	return s
}

// quoteKey is a key for a line of the terminal: quoted when it holds
// anything but printable ASCII, and cut at 200 bytes.
func quoteKey(k string) string {
	if len(k) > 200 {
		k = k[:200] + "…"
	}
	if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r > '~' || r == ' ' }) {
		return strconv.Quote(k)
	}
	return k
}

// serveFulfillmentAPI serves api on a free port of 127.0.0.1 (or addr)
// and returns its base URL and a function that stops it.
func serveFulfillmentAPI(api *fulfillmentAPI, addr string) (string, func(), error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("fulfillment API: %w", err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(api.print, "fulfillment API: %v\n", err)
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		_ = api.Close()
	}
	return "http://" + lis.Addr().String(), stop, nil
}
