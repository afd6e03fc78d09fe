// Package paddletest is a fake of Paddle Billing's List Events API for
// tests, served on loopback: `GET /events`, answered as Paddle documents it
// (developer.paddle.com, "List events"; the Go SDK's ListEventsRequest and
// Collection, github.com/PaddleHQ/paddle-go-sdk/v4 v4.1.0):
//
//   - Authentication: `Authorization: Bearer <API key>`; anything else is
//     a 403 with Paddle's error body (`{"error": {"type", "code",
//     "detail", "documentation_url"}, "meta": {"request_id"}}`).
//   - Each event is `{"event_id", "event_type", "occurred_at", "data"}`,
//     served byte for byte as added. Event ids are `evt_` and 26 lower-case
//     characters that sort as the events were created, as Paddle's
//     (time-ordered) ids do.
//   - `order_by`: `id[ASC]` (oldest first) or `id[DESC]`; without it,
//     oldest first. `after`: the events after that id in that order (an id
//     Paddle no longer keeps still works as a position). `per_page`:
//     default 50, at most 200 (more is answered with 200).
//     `event_type`: a comma-separated list of types. Any other parameter
//     is a 400.
//   - The response: `{"data": [...], "meta": {"request_id", "pagination":
//     {"per_page", "next", "has_more", "estimated_total"}}}`, where next is
//     the URL of the next page (`after` the last event of this one).
//
// It can also misbehave as a broken or hostile API would (Misbehave), for
// the tests of reconciliation's bounds.
package paddletest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MaxPerPage is the largest per_page Paddle answers.
const MaxPerPage = 200

// Event is one event the fake API holds.
type Event struct {
	ID         string
	Type       string
	OccurredAt time.Time
	// Raw is the event's JSON object exactly as the API returns it.
	Raw []byte
}

// Request is one call the fake API answered.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Status int
}

// Misbehaviour is a way the fake API can page wrongly (Misbehave).
type Misbehaviour int

const (
	// Behave: page as Paddle does.
	Behave Misbehaviour = iota
	// RepeatPage answers every request with the page it would answer
	// without its after, and has_more.
	RepeatPage
	// Endless answers every request with a page of events never listed
	// before, and has_more.
	Endless
)

// Server is a running fake of Paddle's List Events API.
type Server struct {
	// URL is the base URL to give a client (PADDLE_API_BASE).
	URL string
	// Key is the API key the server accepts.
	Key string

	mu        sync.Mutex
	events    []*Event
	seq       int
	requests  []Request
	failures  []int
	misbehave Misbehaviour
	settings  settingsState   // notification settings (endpoints.go)
	portals   []PortalSession // customer portal sessions (portal.go)
}

// New starts a fake API that accepts key, and stops it when the test ends.
func New(tb testing.TB, key string) *Server {
	tb.Helper()
	s := &Server{Key: key}
	ts := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	tb.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Add creates an event of type typ that occurred at occurredAt, whose data
// is data (marshalled as JSON), and returns it, its id generated. Its JSON
// is laid out as Paddle's API lays it out.
func (s *Server) Add(typ string, occurredAt time.Time, data any) Event {
	d, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("paddletest: data of %s: %v", typ, err))
	}
	s.mu.Lock()
	s.seq++
	id := eventID(occurredAt, s.seq)
	s.mu.Unlock()
	raw, err := json.MarshalIndent(map[string]any{
		"event_id":    id,
		"event_type":  typ,
		"occurred_at": occurredAt.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"data":        json.RawMessage(d),
	}, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("paddletest: event %s: %v", id, err))
	}
	ev, err := s.AddRaw(raw)
	if err != nil {
		panic(err)
	}
	return ev
}

// eventID is an id that sorts by when the event occurred, then by order of
// addition: 26 characters of Crockford's base-32 alphabet, lower-case, as
// Paddle's.
func eventID(at time.Time, seq int) string {
	return "evt_" + base32(uint64(at.UnixMilli())) + base32(uint64(seq))
}

func base32(n uint64) string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	var b [13]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = alphabet[n%32]
		n /= 32
	}
	return string(b[:])
}

// AddRaw adds an event given as its full JSON object; its id, type and
// occurred_at are read from it. Raw is served as given.
func (s *Server) AddRaw(raw []byte) (Event, error) {
	var head struct {
		ID         string `json:"event_id"`
		Type       string `json:"event_type"`
		OccurredAt string `json:"occurred_at"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Event{}, fmt.Errorf("paddletest: event: %w", err)
	}
	at, err := time.Parse(time.RFC3339Nano, head.OccurredAt)
	if head.ID == "" || head.Type == "" || err != nil {
		return Event{}, fmt.Errorf("paddletest: event without event_id, event_type or occurred_at")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.events, func(e *Event) bool { return e.ID == head.ID }) {
		return Event{}, fmt.Errorf("paddletest: event %s added twice", head.ID)
	}
	ev := &Event{ID: head.ID, Type: head.Type, OccurredAt: at, Raw: bytes.Clone(raw)}
	s.events = append(s.events, ev)
	slices.SortFunc(s.events, func(a, b *Event) int { return strings.Compare(a.ID, b.ID) })
	return *ev, nil
}

// Requests returns the calls answered so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// FailNext makes the next n requests fail with status.
func (s *Server) FailNext(status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, status)
	}
}

// Misbehave makes the listing page as m says, from the next request on.
func (s *Server) Misbehave(m Misbehaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.misbehave = m
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	status := s.answer(w, r)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Status: status})
	s.mu.Unlock()
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) int {
	s.mu.Lock()
	var fail int
	if len(s.failures) > 0 {
		fail, s.failures = s.failures[0], s.failures[1:]
	}
	s.mu.Unlock()
	if fail != 0 {
		return writeError(w, fail, "api_error", "internal_error", "An internal error has occurred (injected by the test).")
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || key == "":
		return writeError(w, http.StatusForbidden, "request_error", "authentication_missing",
			"Authentication header missing. Make sure you are sending an API key in the Authorization header.")
	case key != s.Key:
		return writeError(w, http.StatusForbidden, "request_error", "authentication_malformed",
			"API key is invalid or has been revoked.")
	}
	if st, ok := s.answerSettings(w, r); ok {
		return st
	}
	if st, ok := s.answerPortal(w, r); ok {
		return st
	}
	if r.Method != http.MethodGet || r.URL.Path != "/events" {
		return writeError(w, http.StatusNotFound, "request_error", "not_found", "Entity not found.")
	}
	return s.list(w, r)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) int {
	perPage, desc, after := 50, false, ""
	var types []string
	for name, vals := range r.URL.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "per_page":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "per_page must be a positive integer")
			}
			perPage = min(n, MaxPerPage)
		case "order_by":
			switch v {
			case "id[ASC]":
			case "id[DESC]":
				desc = true
			default:
				return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "order_by: id[ASC] or id[DESC]")
			}
		case "after":
			after = v
		case "event_type":
			for _, t := range strings.Split(v, ",") {
				if t = strings.TrimSpace(t); t != "" {
					types = append(types, t)
				}
			}
		default:
			return writeError(w, http.StatusBadRequest, "request_error", "invalid_field", "unknown query parameter: "+name)
		}
	}
	s.mu.Lock()
	all := slices.Clone(s.events)
	misbehave := s.misbehave
	s.mu.Unlock()
	if desc {
		slices.Reverse(all)
	}
	if misbehave == RepeatPage {
		after = ""
	}
	var matching []*Event
	for _, e := range all {
		if after != "" && ((!desc && e.ID <= after) || (desc && e.ID >= after)) {
			continue
		}
		if len(types) > 0 && !slices.Contains(types, e.Type) {
			continue
		}
		matching = append(matching, e)
	}
	page, hasMore := matching, false
	if len(matching) > perPage {
		page, hasMore = matching[:perPage], true
	}
	if misbehave == Endless {
		page, hasMore = s.endlessPage(perPage), true
	}
	if misbehave == RepeatPage {
		hasMore = true
	}

	next := r.URL.Query()
	if len(page) > 0 {
		next.Set("after", page[len(page)-1].ID)
	}
	var b bytes.Buffer
	b.WriteString("{\n  \"data\": [")
	for i, e := range page {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(e.Raw)
	}
	meta, _ := json.Marshal(map[string]any{
		"request_id": fmt.Sprintf("req_%d", time.Now().UnixNano()),
		"pagination": map[string]any{
			"per_page":        perPage,
			"next":            s.URL + "/events?" + next.Encode(),
			"has_more":        hasMore,
			"estimated_total": len(matching),
		},
	})
	fmt.Fprintf(&b, "\n  ],\n  \"meta\": %s\n}", meta)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
	return http.StatusOK
}

// endlessPage makes a page of events never listed before.
func (s *Server) endlessPage(n int) []*Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	page := make([]*Event, n)
	at := time.Now().Add(-time.Minute)
	for i := range page {
		s.seq++
		id := eventID(at, s.seq)
		page[i] = &Event{ID: id, Type: "customer.updated", OccurredAt: at, Raw: []byte(fmt.Sprintf(
			`{"event_id": %q, "event_type": "customer.updated", "occurred_at": %q, "data": {"id": "ctm_%d"}}`,
			id, at.UTC().Format(time.RFC3339Nano), s.seq))}
	}
	return page
}

func writeError(w http.ResponseWriter, status int, typ, code, detail string) int {
	b, _ := json.MarshalIndent(map[string]any{
		"error": map[string]string{"type": typ, "code": code, "detail": detail,
			"documentation_url": "https://developer.paddle.com/v1/errors/shared/" + code},
		"meta": map[string]string{"request_id": fmt.Sprintf("req_%d", time.Now().UnixNano())},
	}, "", "  ")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
	return status
}
