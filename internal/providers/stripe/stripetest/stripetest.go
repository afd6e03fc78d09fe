// Package stripetest is a fake of Stripe's Events API for tests, served
// on loopback: `GET /v1/events` and `GET /v1/events/{id}` (and, for thin
// events, `GET /v2/core/events/{id}` and the objects they name: thin.go;
// the billing portal's sessions: portal.go), with the API key
// checked and the list behaving like Stripe's rather than like stripe-mock's
// (which answers one fixed event whatever the filters, and ignores paging).
//
// What it does as Stripe does:
//
//   - Authentication: `Authorization: Bearer <key>` or HTTP basic auth with
//     the key as the user name; anything else is a 401 with Stripe's error
//     body.
//   - Order: newest first (by created, then by the order events were added
//     within one second).
//   - Paging: `limit` (1 to 100, default 10), `starting_after` (the page of
//     older events after that one), `ending_before` (the page of newer
//     events just before that one, still listed newest first), `has_more`.
//     A cursor is a position in the whole list, whatever the filters; an
//     unknown cursor is a 400 naming the parameter, and passing both is a
//     400.
//   - Filters: `created` (a Unix time, or `created[gt|gte|lt|lte]`), `type`
//     (with `*` as a wildcard) or `types[]` (at most 20, not with `type`),
//     `delivery_success` (false: events not yet delivered successfully to
//     every endpoint, pending ones included).
//   - Unknown parameters are refused with 400, as Stripe does, so that a
//     client sending something Stripe would refuse fails here too.
//   - Connect: a request with the Stripe-Account header lists that
//     connected account's events (AddFor), one without it the platform's
//     own; an account the platform is not connected to is a 403.
//
// It can also misbehave as a broken or hostile API would (Misbehave,
// RedirectTo), for the tests of reconciliation's bounds.
//
// Events are stored as raw JSON and served byte for byte, so a test can
// check that a client keeps each event exactly as the API returned it.
package stripetest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MaxTypes is how many types[] Stripe accepts in one request.
const MaxTypes = 20

// Event is one event the fake API holds.
type Event struct {
	ID      string
	Type    string
	Created time.Time
	// Delivered reports whether every webhook endpoint acknowledged the
	// event; false matches delivery_success=false.
	Delivered bool
	// Raw is the event's JSON object exactly as the API returns it.
	Raw []byte
	// Account is the connected account the event belongs to; "": the
	// platform's own.
	Account string

	seq int // order of addition, which breaks ties within one second
}

// Request is one call the fake API answered.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Status int
	// Account is the request's Stripe-Account header.
	Account string
	// Context and Version are its Stripe-Context and Stripe-Version
	// headers (the thin events' reads, thin.go).
	Context, Version string
}

// Misbehaviour is a way the fake API can page wrongly (Misbehave).
type Misbehaviour int

const (
	// Behave: page as Stripe does.
	Behave Misbehaviour = iota
	// RepeatPage answers every list request with the page it would answer
	// without its cursor, and has_more: a client that follows has_more is
	// handed the same cursor again and again.
	RepeatPage
	// EmptyMore answers every list request with no event and has_more.
	EmptyMore
	// Endless answers every list request with a page of events never seen
	// before (created within the request's window), and has_more: a
	// listing that never ends.
	Endless
)

// Server is a running fake of Stripe's Events API.
type Server struct {
	// URL is the base URL to give a client (STRIPE_API_BASE).
	URL string
	// Key is the API key the server accepts.
	Key string

	mu        sync.Mutex
	thin      thinState // v2 events and objects (thin.go)
	events    []*Event
	seq       int
	requests  []Request
	failures  []int
	connected map[string]bool
	misbehave Misbehaviour
	redirect  string
	endless   int
	hooks     hooksState // webhook endpoints (endpoints.go)
	portals   []PortalSession
}

// New starts a fake API that accepts key, and stops it when the test ends.
func New(tb testing.TB, key string) *Server {
	tb.Helper()
	s := &Server{Key: key, connected: map[string]bool{}}
	ts := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	tb.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Add creates an event of type typ, created at created, whose data.object
// is object (marshalled as JSON), and returns it. Its id is generated; its
// JSON is laid out as Stripe lays out API responses, with a field stripe-go
// does not know so that a client that re-marshals the event loses it.
func (s *Server) Add(typ string, created time.Time, object any, delivered bool) Event {
	return s.AddFor("", typ, created, object, delivered)
}

// AddFor is Add for an event of the connected account (acct_…), listed
// with the Stripe-Account header; its JSON carries the account, as Stripe's
// events of connected accounts do. The platform is connected to the
// account from then on.
func (s *Server) AddFor(account, typ string, created time.Time, object any, delivered bool) Event {
	s.mu.Lock()
	id := fmt.Sprintf("evt_test%016d", s.seq+1)
	s.mu.Unlock()
	obj, err := json.Marshal(object)
	if err != nil {
		panic(fmt.Sprintf("stripetest: object of %s: %v", typ, err))
	}
	pending := 0
	if !delivered {
		pending = 1
	}
	raw := map[string]any{
		"id":               id,
		"object":           "event",
		"api_version":      "2023-10-16",
		"created":          created.Unix(),
		"data":             map[string]json.RawMessage{"object": obj},
		"livemode":         false,
		"pending_webhooks": pending,
		"request":          map[string]any{"id": nil, "idempotency_key": nil},
		"type":             typ,
		"account":          account,
		"context_unknown_to_stripe_go": map[string]any{
			"note": "kept only by clients that store the event as the API returned it",
		},
	}
	if account == "" {
		delete(raw, "account")
	}
	b, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("stripetest: event %s: %v", id, err))
	}
	ev, err := s.AddRaw(b, delivered)
	if err != nil {
		panic(err)
	}
	return ev
}

// AddRaw adds an event given as its full JSON object (a fixture, say); its
// id, type, created and account are read from it. Raw is served as given.
func (s *Server) AddRaw(raw []byte, delivered bool) (Event, error) {
	var head struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Created int64  `json:"created"`
		Account string `json:"account"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Event{}, fmt.Errorf("stripetest: event: %w", err)
	}
	if head.ID == "" || head.Type == "" {
		return Event{}, fmt.Errorf("stripetest: event without id or type")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if e.ID == head.ID {
			return Event{}, fmt.Errorf("stripetest: event %s added twice", head.ID)
		}
	}
	s.seq++
	ev := &Event{
		ID:        head.ID,
		Type:      head.Type,
		Created:   time.Unix(head.Created, 0),
		Delivered: delivered,
		Raw:       bytes.Clone(raw),
		Account:   head.Account,
		seq:       s.seq,
	}
	if ev.Account != "" {
		s.connected[ev.Account] = true
	}
	s.events = append(s.events, ev)
	return *ev, nil
}

// Misbehave makes the list endpoint page as m says, from the next request
// on.
func (s *Server) Misbehave(m Misbehaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.misbehave = m
}

// RedirectTo makes every request answered with a 307 to the same path and
// query at base (another server's URL); "" stops it.
func (s *Server) RedirectTo(base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redirect = base
}

// Remove drops an event, as Stripe does after 30 days: a cursor naming it
// is then refused.
func (s *Server) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = slices.DeleteFunc(s.events, func(e *Event) bool { return e.ID == id })
}

// Requests returns the calls answered so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// FailNext makes the next n requests fail with status (a Stripe api_error
// body), before authentication is even looked at.
func (s *Server) FailNext(status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, status)
	}
}

// sortedLocked is every event, newest first, as Stripe lists them.
func (s *Server) sortedLocked() []*Event {
	out := slices.Clone(s.events)
	slices.SortFunc(out, func(a, b *Event) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return b.seq - a.seq
	})
	return out
}

// apiError is Stripe's error body.
type apiError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	status := s.answer(w, r)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Status: status,
		Account: r.Header.Get("Stripe-Account"), Context: r.Header.Get("Stripe-Context"), Version: r.Header.Get("Stripe-Version")})
	s.mu.Unlock()
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) int {
	w.Header().Set("Request-Id", fmt.Sprintf("req_test%d", time.Now().UnixNano()))
	s.mu.Lock()
	var fail int
	if len(s.failures) > 0 {
		fail, s.failures = s.failures[0], s.failures[1:]
	}
	redirect := s.redirect
	s.mu.Unlock()
	if redirect != "" {
		http.Redirect(w, r, strings.TrimSuffix(redirect, "/")+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		return http.StatusTemporaryRedirect
	}
	if fail != 0 {
		return writeError(w, fail, apiError{Type: "api_error", Message: "An unknown error occurred (injected by the test)."})
	}
	if st, e := s.authenticate(r); st != 0 {
		return writeError(w, st, e)
	}
	if acct := r.Header.Get("Stripe-Account"); acct != "" {
		s.mu.Lock()
		ok := s.connected[acct]
		s.mu.Unlock()
		if !ok {
			return writeError(w, http.StatusForbidden, apiError{Type: "invalid_request_error", Code: "account_invalid",
				Message: "The provided key does not have access to account '" + acct + "' (or that account does not exist). Application access may have been revoked."})
		}
	}
	if st, ok := s.answerHooks(w, r); ok {
		return st
	}
	if st, ok := s.answerPortal(w, r); ok {
		return st
	}
	if r.Method != http.MethodGet {
		return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)})
	}
	if st, ok := s.answerThin(w, r); ok {
		return st
	}
	switch {
	case r.URL.Path == "/v1/events":
		return s.list(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/events/"):
		return s.get(w, strings.TrimPrefix(r.URL.Path, "/v1/events/"))
	}
	return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error",
		Message: fmt.Sprintf("Unrecognized request URL (GET: %s).", r.URL.Path)})
}

// authenticate checks the API key the way Stripe takes it: a bearer token,
// or basic auth with the key as user name.
func (s *Server) authenticate(r *http.Request) (int, apiError) {
	h := r.Header.Get("Authorization")
	var key string
	switch {
	case h == "":
		return http.StatusUnauthorized, apiError{Type: "invalid_request_error",
			Message: "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."}
	case strings.HasPrefix(h, "Bearer "):
		key = strings.TrimPrefix(h, "Bearer ")
	case strings.HasPrefix(h, "Basic "):
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Basic "))
		if err != nil {
			return http.StatusUnauthorized, apiError{Type: "invalid_request_error", Message: "Invalid basic auth header."}
		}
		key, _, _ = strings.Cut(string(b), ":")
	default:
		return http.StatusUnauthorized, apiError{Type: "invalid_request_error", Message: "Invalid Authorization header."}
	}
	if key != s.Key || key == "" {
		return http.StatusUnauthorized, apiError{Type: "invalid_request_error",
			Message: "Invalid API Key provided: " + mask(key)}
	}
	return 0, apiError{}
}

func mask(key string) string {
	if len(key) <= 8 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

func (s *Server) get(w http.ResponseWriter, id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events {
		if e.ID == id {
			return writeJSON(w, http.StatusOK, e.Raw)
		}
	}
	return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error", Code: "resource_missing",
		Param: "id", Message: fmt.Sprintf("No such event: '%s'", id)})
}

// query is a parsed, validated list request.
type query struct {
	limit         int
	startingAfter string
	endingBefore  string
	created       map[string]int64 // gt, gte, lt, lte, eq
	typ           string
	types         []string
	delivery      *bool
}

var (
	indexedParam = regexp.MustCompile(`^([a-z_]+)\[(\d*)\]$`)
	rangeParam   = regexp.MustCompile(`^created\[(gt|gte|lt|lte)\]$`)
)

func parseQuery(v url.Values) (query, *apiError) {
	q := query{limit: 10, created: map[string]int64{}}
	invalid := func(param, msg string) (query, *apiError) {
		return query{}, &apiError{Type: "invalid_request_error", Param: param, Message: msg}
	}
	for name, vals := range v {
		val := vals[len(vals)-1]
		switch {
		case name == "limit":
			n, err := strconv.Atoi(val)
			if err != nil {
				return invalid(name, fmt.Sprintf("Invalid integer: %s", val))
			}
			if n < 1 || n > 100 {
				return invalid(name, "This value must be greater than or equal to 1 and less than or equal to 100.")
			}
			q.limit = n
		case name == "starting_after":
			q.startingAfter = val
		case name == "ending_before":
			q.endingBefore = val
		case name == "created":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return invalid(name, fmt.Sprintf("Invalid integer: %s", val))
			}
			q.created["eq"] = n
		case rangeParam.MatchString(name):
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return invalid(name, fmt.Sprintf("Invalid integer: %s", val))
			}
			q.created[rangeParam.FindStringSubmatch(name)[1]] = n
		case name == "type":
			q.typ = val
		case indexedParam.MatchString(name) && indexedParam.FindStringSubmatch(name)[1] == "types":
			q.types = append(q.types, vals...)
		case indexedParam.MatchString(name) && indexedParam.FindStringSubmatch(name)[1] == "expand":
			// Accepted; events have nothing to expand here.
		case name == "delivery_success":
			b, err := strconv.ParseBool(val)
			if err != nil || (val != "true" && val != "false") {
				return invalid(name, fmt.Sprintf("Invalid boolean: %s", val))
			}
			q.delivery = &b
		default:
			return invalid(name, fmt.Sprintf("Received unknown parameter: %s", name))
		}
	}
	switch {
	case q.startingAfter != "" && q.endingBefore != "":
		return invalid("ending_before", "You may only specify one of these parameters: ending_before, starting_after.")
	case q.typ != "" && len(q.types) > 0:
		return invalid("types", "You may only specify one of these parameters: type, types.")
	case len(q.types) > MaxTypes:
		return invalid("types", fmt.Sprintf("You may pass at most %d types.", MaxTypes))
	}
	slices.Sort(q.types)
	return q, nil
}

func (q query) match(e *Event) bool {
	c := e.Created.Unix()
	for op, n := range q.created {
		ok := true
		switch op {
		case "eq":
			ok = c == n
		case "gt":
			ok = c > n
		case "gte":
			ok = c >= n
		case "lt":
			ok = c < n
		case "lte":
			ok = c <= n
		}
		if !ok {
			return false
		}
	}
	if q.typ != "" && !typeMatches(q.typ, e.Type) {
		return false
	}
	if len(q.types) > 0 && !slices.Contains(q.types, e.Type) {
		return false
	}
	if q.delivery != nil && *q.delivery != e.Delivered {
		return false
	}
	return true
}

// typeMatches applies Stripe's type filter, where * stands for any run of
// characters ("invoice.*").
func typeMatches(pattern, typ string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == typ
	}
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
	ok, _ := regexp.MatchString(re, typ)
	return ok
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) int {
	q, e := parseQuery(r.URL.Query())
	if e != nil {
		return writeError(w, http.StatusBadRequest, *e)
	}
	account := r.Header.Get("Stripe-Account")
	s.mu.Lock()
	all := slices.DeleteFunc(s.sortedLocked(), func(e *Event) bool { return e.Account != account })
	misbehave := s.misbehave
	s.mu.Unlock()
	switch misbehave {
	case RepeatPage:
		q.startingAfter, q.endingBefore = "", ""
	case EmptyMore:
		return writePage(w, nil, true)
	case Endless:
		return writePage(w, s.endlessPage(q), true)
	}

	// A cursor is a position in the whole list, newest first.
	window := all
	cursor, param := q.startingAfter, "starting_after"
	if q.endingBefore != "" {
		cursor, param = q.endingBefore, "ending_before"
	}
	if cursor != "" {
		p := slices.IndexFunc(all, func(e *Event) bool { return e.ID == cursor })
		if p < 0 {
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Code: "resource_missing",
				Param: param, Message: fmt.Sprintf("No such event: '%s'", cursor)})
		}
		if param == "starting_after" {
			window = all[p+1:]
		} else {
			window = all[:p]
		}
	}
	var matching []*Event
	for _, e := range window {
		if q.match(e) {
			matching = append(matching, e)
		}
	}
	page, hasMore := matching, false
	if len(matching) > q.limit {
		hasMore = true
		if q.endingBefore != "" {
			page = matching[len(matching)-q.limit:] // the newer events closest to the cursor
		} else {
			page = matching[:q.limit]
		}
	}
	if misbehave == RepeatPage {
		hasMore = true
	}
	return writePage(w, page, hasMore)
}

// endlessPage makes a page of events never listed before, created within
// q's window, newest first.
func (s *Server) endlessPage(q query) []*Event {
	at := time.Now().Add(-time.Minute).Unix()
	if lo, ok := q.created["gte"]; ok && at < lo {
		at = lo
	}
	if hi, ok := q.created["lt"]; ok && at >= hi {
		at = hi - 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	page := make([]*Event, q.limit)
	for i := range page {
		s.endless++
		// Newest first, so that a client paging either way sees new ids.
		id := fmt.Sprintf("evt_endless%012d", 1_000_000_000_000-s.endless)
		page[i] = &Event{ID: id, Type: "product.created", Created: time.Unix(at, 0), Raw: []byte(fmt.Sprintf(
			`{"id": %q, "object": "event", "api_version": "2023-10-16", "created": %d, "livemode": false, "pending_webhooks": 0, `+
				`"type": "product.created", "data": {"object": {"id": "prod_%d", "object": "product"}}}`, id, at, s.endless))}
	}
	return page
}

// writePage writes a list page as Stripe lays it out.
func writePage(w http.ResponseWriter, page []*Event, hasMore bool) int {
	var b bytes.Buffer
	b.WriteString("{\n  \"object\": \"list\",\n  \"data\": [")
	for i, e := range page {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(e.Raw)
	}
	fmt.Fprintf(&b, "\n  ],\n  \"has_more\": %t,\n  \"url\": \"/v1/events\"\n}", hasMore)
	return writeJSON(w, http.StatusOK, b.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, body []byte) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
	return status
}

func writeError(w http.ResponseWriter, status int, e apiError) int {
	b, _ := json.MarshalIndent(map[string]apiError{"error": e}, "", "  ")
	return writeJSON(w, status, b)
}
