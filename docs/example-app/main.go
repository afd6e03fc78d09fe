// Command example-app is the smallest app endpoint the receiver can tell
// of entitlements (docs/entitlements.md): it verifies each
// POST /entitlements with FULFILLMENT_SECRET (Standard Webhooks: any
// library of standardwebhooks.com does the same), keeps the highest
// version it has seen per subject, and answers GET /access/<subject>?key=pro
// from what it keeps. Run it beside the receiver:
//
//	FULFILLMENT_SECRET=whsec_… go run ./docs/example-app -addr :9000
//	# and the receiver with FULFILLMENT_URL=http://localhost:9000
//
// A real app keeps the set in its own database, in the same transaction
// as the version check ("UPDATE … WHERE version < $new").
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Entitlement is one key of a subject's set.
type Entitlement struct {
	Key   string     `json:"key"`
	State string     `json:"state"` // active or grace
	Until *time.Time `json:"until"`
}

// Body is what the receiver posts: the subject's whole set at a version.
type Body struct {
	Subject      string        `json:"subject"`
	Version      int64         `json:"version"`
	Entitlements []Entitlement `json:"entitlements"`
}

// store keeps the highest version seen per subject.
type store struct {
	mu       sync.Mutex
	subjects map[string]Body
}

// keep records b unless a higher or equal version is kept: the receiver
// never sends an older version after a newer one was answered 2xx, but a
// retry of an old one may still cross a newer one on the network.
func (s *store) keep(b Body) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.Version <= s.subjects[b.Subject].Version {
		return false
	}
	s.subjects[b.Subject] = b
	return true
}

// has reports whether subject has key now (an until in the past no
// longer counts, should the receiver's word of it be late).
func (s *store) has(subject, key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.subjects[subject].Entitlements {
		if e.Key == key && (e.Until == nil || e.Until.After(now)) {
			return true
		}
	}
	return false
}

// verify checks a Standard Webhooks signature: "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>" under the key of the whsec_ secret, its timestamp
// within five minutes.
func verify(secret []byte, h http.Header, body []byte, now time.Time) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" || math.Abs(now.Sub(time.Unix(sec, 0)).Seconds()) > 300 {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		v, b64, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

func main() {
	addr := flag.String("addr", ":9000", "listen address")
	flag.Parse()
	secret, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(os.Getenv("FULFILLMENT_SECRET"), "whsec_"))
	if err != nil || len(secret) == 0 {
		log.Fatal("set FULFILLMENT_SECRET to the receiver's (whsec_…)")
	}
	s := &store{subjects: map[string]Body{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /entitlements", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil || !verify(secret, r.Header, body, time.Now()) {
			http.Error(w, "signature refused", http.StatusUnauthorized) // a 4xx parks the receiver's step
			return
		}
		var b Body
		if err := json.Unmarshal(body, &b); err != nil || b.Subject == "" {
			http.Error(w, "not an entitlements body", http.StatusBadRequest)
			return
		}
		if s.keep(b) {
			log.Printf("%s is now version %d: %v", b.Subject, b.Version, b.Entitlements)
		}
		w.WriteHeader(http.StatusNoContent) // 2xx: done, also for a version already superseded
	})
	mux.HandleFunc("POST /fulfillments", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent) // the receiver's other call, not this example's business
	})
	mux.HandleFunc("GET /access/{subject}", func(w http.ResponseWriter, r *http.Request) {
		ok := s.has(r.PathValue("subject"), r.URL.Query().Get("key"), time.Now())
		_ = json.NewEncoder(w).Encode(map[string]bool{"access": ok})
	})
	log.Printf("listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
