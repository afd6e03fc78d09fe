package stripetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
)

// The fake's side of thin events: what an event destination's thin event
// names, as Stripe's API serves it.
//
//   - `GET /v2/core/events/{id}`: the v2 Event (AddThin), byte for byte.
//     Like Stripe's, it wants a dated Stripe-Version (a v2 request without
//     one is a 400), and an event of a connected account is found only
//     with that account as Stripe-Context (404 without it).
//   - `GET /v1/checkout/sessions/{id}`, `/v1/subscriptions/{id}`,
//     `/v1/invoices/{id}`, `/v1/refunds/{id}`, `/v1/disputes/{id}`,
//     `/v1/charges/{id}`, `/v1/customers/{id}`: an object's current state
//     (PutObject), found only with its connected account as Stripe-Account;
//     an unknown one is a 404 resource_missing, as Stripe answers.
//
// FailNext makes them fail like every other request; HangNext makes them
// hang until the client gives up.

// thinState is what the fake holds for thin events.
type thinState struct {
	events  map[string]thinEntry // by event id
	objects map[string]thinEntry // by path
	hang    atomic.Int64         // reads still to hang (HangNext)
	hanging atomic.Int64         // reads hanging now
}

type thinEntry struct {
	account string // the v2 event's context, the object's Stripe-Account
	raw     []byte
}

// Related is the object a thin event names (related_object).
type Related struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	URL  string `json:"url"`
}

// Thin describes a thin event for AddThin.
type Thin struct {
	ID      string    // "": a new evt_test_… id
	Type    string    // v1.checkout.session.completed, v2.core.health.event_generation_failure.resolved, …
	Created time.Time // zero: now
	Live    bool
	Context string // the connected account (acct_…); "": the platform's own
	Related *Related
	// Data is the v2 Event's data (the health event's: alert_id, impact,
	// summary, severity, …); nil: none.
	Data any
	// SnapshotEvent is the v1 snapshot event a v1 thin event was made
	// with, as Stripe sets it while both are sent; "": none.
	SnapshotEvent string
}

// AddThin adds the v2 Event of a thin event and returns its id and the
// notification Stripe posts to an event destination for it (unsigned).
func (s *Server) AddThin(e Thin) (id string, notification []byte) {
	s.mu.Lock()
	if s.thin.events == nil {
		s.thin.events, s.thin.objects = map[string]thinEntry{}, map[string]thinEntry{}
	}
	if e.ID == "" {
		e.ID = fmt.Sprintf("evt_test_65thin%016d", len(s.thin.events)+1)
	}
	s.mu.Unlock()
	if e.Created.IsZero() {
		e.Created = time.Now()
	}
	created := e.Created.UTC().Format("2006-01-02T15:04:05.000Z")
	var context any
	if e.Context != "" {
		context = e.Context
	}
	note := map[string]any{"id": e.ID, "object": "v2.core.event", "type": e.Type, "created": created,
		"livemode": e.Live, "context": context}
	if e.Related != nil {
		note["related_object"] = e.Related
	}
	notification, err := json.MarshalIndent(note, "", "  ")
	if err != nil {
		panic(err)
	}
	full := map[string]any{"reason": map[string]any{"type": "request", "request": map[string]any{"id": "req_test_thin", "idempotency_key": nil}},
		"changes_unknown_to_the_receiver": map[string]any{"note": "kept only by clients that store the event as the API returned it"}}
	for k, v := range note {
		full[k] = v
	}
	if e.Data != nil {
		full["data"] = e.Data
	}
	if e.SnapshotEvent != "" {
		full["snapshot_event"] = e.SnapshotEvent
	}
	raw, err := json.MarshalIndent(full, "", "  ")
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.thin.events[e.ID]; dup {
		panic("stripetest: thin event " + e.ID + " added twice")
	}
	s.thin.events[e.ID] = thinEntry{account: e.Context, raw: raw}
	return e.ID, notification
}

// PutObject makes GET path (an API path: /v1/checkout/sessions/cs_…)
// answer object, marshalled as JSON, from now on: an object's current
// state, replaced by the next PutObject of the same path. account is the
// connected account it belongs to (read with Stripe-Account), "" for the
// platform's own.
func (s *Server) PutObject(path, account string, object any) {
	raw, err := json.MarshalIndent(object, "", "  ")
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.thin.objects == nil {
		s.thin.events, s.thin.objects = map[string]thinEntry{}, map[string]thinEntry{}
	}
	s.thin.objects[path] = thinEntry{account: account, raw: raw}
	if account != "" {
		s.connected[account] = true
	}
}

// HangNext makes the next n reads of v2 events and objects hang without
// an answer until the client gives up (its request is cancelled).
func (s *Server) HangNext(n int) { s.thin.hang.Add(int64(n)) }

// Hanging is how many reads hang now, waiting for their client to give up.
func (s *Server) Hanging() int { return int(s.thin.hanging.Load()) }

var (
	objectPath = regexp.MustCompile(`^/v1/(checkout/sessions|subscriptions|invoices|refunds|disputes|charges|customers)/([A-Za-z0-9_]+)$`)
	v2Version  = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}\.[a-z]+$`)
	objectName = map[string]string{"checkout/sessions": "checkout.session", "subscriptions": "subscription",
		"invoices": "invoice", "refunds": "refund", "disputes": "dispute", "charges": "charge", "customers": "customer"}
)

// answerThin answers the reads of thin events, and reports whether the
// request was one.
func (s *Server) answerThin(w http.ResponseWriter, r *http.Request) (int, bool) {
	id, isEvent := strings.CutPrefix(r.URL.Path, "/v2/core/events/")
	m := objectPath.FindStringSubmatch(r.URL.Path)
	if !isEvent && m == nil {
		return 0, false
	}
	if s.thin.hang.Add(-1) >= 0 {
		s.thin.hanging.Add(1)
		defer s.thin.hanging.Add(-1)
		<-r.Context().Done()
		return http.StatusGatewayTimeout, true // nobody reads it: the client gave up
	}
	s.thin.hang.Add(1)
	s.mu.Lock()
	var e thinEntry
	var ok bool
	if isEvent {
		e, ok = s.thin.events[id]
	} else {
		e, ok = s.thin.objects[r.URL.Path]
	}
	s.mu.Unlock()
	if isEvent {
		if v := r.Header.Get("Stripe-Version"); !v2Version.MatchString(v) {
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error",
				Message: fmt.Sprintf("Requests to /v2 need a Stripe-Version header naming a version (got %q).", v)}), true
		}
		if !ok || e.account != r.Header.Get("Stripe-Context") {
			return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error", Code: "resource_missing",
				Message: fmt.Sprintf("No such event: '%s'", id)}), true
		}
		return writeJSON(w, http.StatusOK, e.raw), true
	}
	if !ok || e.account != r.Header.Get("Stripe-Account") {
		return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error", Code: "resource_missing",
			Param: "id", Message: fmt.Sprintf("No such %s: '%s'", objectName[m[1]], m[2])}), true
	}
	return writeJSON(w, http.StatusOK, e.raw), true
}
