// Package polartest is a fake of Polar's webhook deliveries API for tests,
// served on loopback: `GET /v1/webhooks/deliveries`, answered as Polar's
// server answers it (polarsource/polar, server/polar/webhook/endpoints.py,
// schemas.py and service.py, server/polar/kit/pagination.py):
//
//   - Authentication: `Authorization: Bearer <access token>`; anything
//     else is a 401 with Polar's error body (`{"error", "detail"}`).
//   - Query: `endpoint_id` (one endpoint's deliveries), `start_timestamp`
//     and `end_timestamp` (deliveries created strictly after and before;
//     ISO 8601 with a zone), `page` (from 1) and `limit` (default 10, at
//     most 100: more is answered with 100). Any other parameter is a 422.
//   - Deliveries newest first; the response is `{"items": [delivery…],
//     "pagination": {"total_count", "max_page"}}`, each delivery
//     `{"id", "created_at", "modified_at", "succeeded", "http_code",
//     "response", "webhook_event": {"id", "created_at", "modified_at",
//     "last_http_code", "succeeded", "skipped", "payload", "type",
//     "is_archived"}}`, with the event's payload (the body as sent) as a
//     string, null once archived.
package polartest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// MaxLimit is the largest limit Polar answers.
const MaxLimit = 100

// Event is one webhook event the fake API holds: Polar's record of one
// event for one endpoint.
type Event struct {
	ID        string // the webhook-id of its deliveries
	Endpoint  string
	Type      string
	CreatedAt time.Time
	Payload   []byte // the body as sent; nil once archived
}

// Request is one call the fake API answered.
type Request struct {
	Query  url.Values
	Status int
}

// Server is a running fake of Polar's webhook deliveries API.
type Server struct {
	// URL is the base URL to give a client (POLAR_API_BASE).
	URL string
	// Token is the access token the server accepts.
	Token string

	mu         sync.Mutex
	deliveries []delivery // in creation order
	requests   []Request
	failures   []int
	endpoints  endpointsState  // webhook endpoints (endpoints.go)
	portals    []PortalSession // customer sessions (portal.go)
}

type delivery struct {
	id        string
	createdAt time.Time
	succeeded bool
	event     *Event
}

// New starts a fake API that accepts token, and stops it when the test
// ends.
func New(tb testing.TB, token string) *Server {
	tb.Helper()
	s := &Server{Token: token}
	ts := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	tb.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Add records an event sent to endpoint and its delivery attempts, one at
// each of at (the first when the event was created), each failed but the
// last, which succeeded if succeeded says so. Its id (a UUID) is made from
// the endpoint and the body, so that one body to two endpoints has two.
func (s *Server) Add(endpoint, typ string, body []byte, succeeded bool, at ...time.Time) *Event {
	if len(at) == 0 {
		panic("polartest: an event without a delivery")
	}
	ev := &Event{ID: uuid(endpoint, string(body)), Endpoint: endpoint, Type: typ, CreatedAt: at[0], Payload: body}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range at {
		s.deliveries = append(s.deliveries, delivery{id: uuid(ev.ID, strconv.Itoa(i)), createdAt: t,
			succeeded: succeeded && i == len(at)-1, event: ev})
	}
	return ev
}

// Archive drops the event's payload, as Polar does after 90 days.
func (s *Server) Archive(ev *Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev.Payload = nil
}

// FailNext makes the next requests fail with these statuses, in order.
func (s *Server) FailNext(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, statuses...)
}

// Requests returns the calls answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func uuid(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	b := h.Sum(nil)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// polarTime is how Polar writes a time.
const polarTime = "2006-01-02T15:04:05.000000Z07:00"

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := s.answer(w, r, q)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Query: q, Status: status})
	s.mu.Unlock()
}

func fail(w http.ResponseWriter, status int, name, detail string) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": name, "detail": detail})
	return status
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, q url.Values) int {
	if st, ok := s.answerEndpoints(w, r); ok {
		return st
	}
	if st, ok := s.answerPortal(w, r); ok {
		return st
	}
	if r.Method != http.MethodGet || r.URL.Path != "/v1/webhooks/deliveries" {
		return fail(w, http.StatusNotFound, "ResourceNotFound", "Not found")
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		return fail(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
	}
	s.mu.Lock()
	if len(s.failures) > 0 {
		st := s.failures[0]
		s.failures = s.failures[1:]
		s.mu.Unlock()
		return fail(w, st, "InternalServerError", "failing as asked")
	}
	s.mu.Unlock()
	for k := range q {
		switch k {
		case "endpoint_id", "start_timestamp", "end_timestamp", "page", "limit":
		default:
			return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "unexpected parameter "+k)
		}
	}
	var start, end time.Time
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"start_timestamp", &start}, {"end_timestamp", &end}} {
		if v := q.Get(b.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", b.name+" is not a datetime")
			}
			*b.t = t
		}
	}
	page, limit := 1, 10
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "page")
		}
		page = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "limit")
		}
		limit = min(n, MaxLimit)
	}

	s.mu.Lock()
	var sel []delivery
	for i := len(s.deliveries) - 1; i >= 0; i-- { // newest first
		d := s.deliveries[i]
		if q.Has("endpoint_id") && d.event.Endpoint != q.Get("endpoint_id") ||
			!start.IsZero() && !d.createdAt.After(start) || !end.IsZero() && !d.createdAt.Before(end) {
			continue
		}
		sel = append(sel, d)
	}
	slices.SortStableFunc(sel, func(a, b delivery) int { return b.createdAt.Compare(a.createdAt) })
	total := len(sel)
	from := min((page-1)*limit, total)
	items := make([]map[string]any, 0, limit)
	for _, d := range sel[from:min(from+limit, total)] {
		var payload any
		if d.event.Payload != nil {
			payload = string(d.event.Payload)
		}
		code := 200
		if !d.succeeded {
			code = 503
		}
		items = append(items, map[string]any{
			"id": d.id, "created_at": d.createdAt.UTC().Format(polarTime), "modified_at": nil,
			"succeeded": d.succeeded, "http_code": code, "response": nil,
			"webhook_event": map[string]any{
				"id": d.event.ID, "created_at": d.event.CreatedAt.UTC().Format(polarTime), "modified_at": nil,
				"last_http_code": code, "succeeded": d.succeeded, "skipped": false, "payload": payload,
				"type": d.event.Type, "is_archived": d.event.Payload == nil,
			},
		})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"items":      items,
		"pagination": map[string]any{"total_count": total, "max_page": (total + limit - 1) / limit},
	})
	return http.StatusOK
}
