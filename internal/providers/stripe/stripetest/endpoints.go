package stripetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The fake's webhook endpoints (the endpoint check's API), as Stripe
// answers them (docs.stripe.com/api/webhook_endpoints):
//
//   - GET /v1/webhook_endpoints: newest first, `limit` 1 to 100 (default
//     10), `starting_after` or `ending_before` (an unknown id is a 400),
//     `has_more`; any other parameter is a 400.
//   - GET /v1/webhook_endpoints/{id}.
//   - POST /v1/webhook_endpoints/{id}, form-encoded: `enabled_events[]`
//     (indexed or not; the whole list, replacing the old), `disabled`,
//     `url`, `description`, `metadata[…]`. `api_version` is refused, as
//     Stripe refuses it there.
//   - POST /v1/webhook_endpoints: `url` and `enabled_events[]` required,
//     `api_version`, `description`, `connect`, `metadata[…]`; the answer
//     carries `secret` (whsec_…), which no later read shows; a 17th
//     endpoint is refused.
//   - An Idempotency-Key on a POST is remembered: the same key and body
//     are answered as the first time, without doing it again; the same
//     key with another body is a 400 idempotency_error.
//
// Every endpoint is of the mode given to AddWebhookEndpoint (a created one
// of test mode, as a test key's), and is listed whatever the key's mode.

// MaxWebhookEndpoints is how many endpoints an account may have.
const MaxWebhookEndpoints = 16

// WebhookEndpoint is one webhook endpoint the fake holds.
type WebhookEndpoint struct {
	ID            string
	URL           string
	Status        string // enabled (default), disabled
	EnabledEvents []string
	APIVersion    string // "": null, the account's default
	Livemode      bool
	Description   string
	Secret        string // whsec_…, shown only in the creation's answer
}

// hooksState is the fake's webhook endpoints, oldest first.
type hooksState struct {
	list []*WebhookEndpoint
	seq  int
	// idem are the answers given to Idempotency-Keys: the body's hash and
	// the answer.
	idem map[string][2]string
}

// AddWebhookEndpoint adds an endpoint, its id (we_…) and secret generated
// when empty, its status enabled when empty, and returns it.
func (s *Server) AddWebhookEndpoint(we WebhookEndpoint) WebhookEndpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addHookLocked(we)
}

func (s *Server) addHookLocked(we WebhookEndpoint) *WebhookEndpoint {
	s.hooks.seq++
	if we.ID == "" {
		we.ID = fmt.Sprintf("we_test%016d", s.hooks.seq)
	}
	if we.Status == "" {
		we.Status = "enabled"
	}
	if we.Secret == "" {
		sum := sha256.Sum256([]byte(we.ID))
		we.Secret = "whsec_" + hex.EncodeToString(sum[:16])
	}
	we.EnabledEvents = slices.Clone(we.EnabledEvents)
	p := &we
	s.hooks.list = append(s.hooks.list, p)
	return p
}

// WebhookEndpoints returns the endpoints, oldest first.
func (s *Server) WebhookEndpoints() []WebhookEndpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]WebhookEndpoint, len(s.hooks.list))
	for i, we := range s.hooks.list {
		out[i] = *we
		out[i].EnabledEvents = slices.Clone(we.EnabledEvents)
	}
	return out
}

// DeleteWebhookEndpoint deletes an endpoint, as the dashboard does.
func (s *Server) DeleteWebhookEndpoint(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.list = slices.DeleteFunc(s.hooks.list, func(we *WebhookEndpoint) bool { return we.ID == id })
}

// answerHooks answers the webhook endpoints' paths (ok false: another
// path, not answered).
func (s *Server) answerHooks(w http.ResponseWriter, r *http.Request) (int, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/webhook_endpoints")
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return 0, false
	}
	id := strings.TrimPrefix(rest, "/")
	switch {
	case r.Method == http.MethodGet && id == "":
		return s.listHooks(w, r), true
	case r.Method == http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		we := s.hookLocked(id)
		if we == nil {
			return noSuchHook(w, id), true
		}
		return writeHook(w, http.StatusOK, we, false), true
	case r.Method == http.MethodPost:
		return s.postHook(w, r, id), true
	}
	return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error",
		Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)}), true
}

func (s *Server) hookLocked(id string) *WebhookEndpoint {
	for _, we := range s.hooks.list {
		if we.ID == id {
			return we
		}
	}
	return nil
}

func noSuchHook(w http.ResponseWriter, id string) int {
	return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "id",
		Message: fmt.Sprintf("No such webhook endpoint: '%s'", id)})
}

func (s *Server) listHooks(w http.ResponseWriter, r *http.Request) int {
	limit, after, before := 10, "", ""
	for name, vals := range r.URL.Query() {
		v := vals[len(vals)-1]
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: name,
					Message: "This value must be greater than or equal to 1 and less than or equal to 100."})
			}
			limit = n
		case "starting_after":
			after = v
		case "ending_before":
			before = v
		default:
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: name,
				Message: "Received unknown parameter: " + name})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.Clone(s.hooks.list)
	slices.Reverse(all) // newest first
	window := all
	for _, c := range []struct{ param, id string }{{"starting_after", after}, {"ending_before", before}} {
		if c.id == "" {
			continue
		}
		p := slices.IndexFunc(all, func(we *WebhookEndpoint) bool { return we.ID == c.id })
		if p < 0 {
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Code: "resource_missing",
				Param: c.param, Message: fmt.Sprintf("No such webhook endpoint: '%s'", c.id)})
		}
		if c.param == "starting_after" {
			window = all[p+1:]
		} else {
			window = all[:p]
		}
	}
	page, more := window, false
	if len(window) > limit {
		more = true
		if before != "" {
			page = window[len(window)-limit:]
		} else {
			page = window[:limit]
		}
	}
	data := make([]json.RawMessage, len(page))
	for i, we := range page {
		data[i] = hookJSON(we, false)
	}
	b, _ := json.MarshalIndent(map[string]any{"object": "list", "data": data, "has_more": more, "url": "/v1/webhook_endpoints"}, "", "  ")
	return writeJSON(w, http.StatusOK, b)
}

// eventTypePattern is what the fake takes as an event type: Stripe's are
// lower-case words joined by dots, or "*".
var eventTypePattern = regexp.MustCompile(`^(\*|[a-z0-9_]+(\.[a-z0-9_]+)+)$`)

func (s *Server) postHook(w http.ResponseWriter, r *http.Request, id string) int {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error",
			Message: "Invalid request: the body must be form-encoded (application/x-www-form-urlencoded)."})
	}
	if err := r.ParseForm(); err != nil {
		return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "Invalid form body."})
	}
	form := r.PostForm
	key := r.Header.Get("Idempotency-Key")
	hash := sha256.Sum256([]byte(r.URL.Path + "?" + form.Encode()))
	s.mu.Lock()
	defer s.mu.Unlock()
	if key != "" {
		if prev, ok := s.hooks.idem[key]; ok {
			if prev[0] != hex.EncodeToString(hash[:]) {
				return writeError(w, http.StatusBadRequest, apiError{Type: "idempotency_error",
					Message: "Keys for idempotent requests can only be used with the same parameters they were first used with."})
			}
			return writeJSON(w, http.StatusOK, []byte(prev[1]))
		}
	}
	events, hasEvents, bad := formEvents(form)
	if bad != "" {
		return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "enabled_events",
			Message: "Invalid enabled_events: " + bad})
	}
	var we *WebhookEndpoint
	created := id == ""
	for name := range form {
		base, _, _ := strings.Cut(name, "[")
		switch base {
		case "enabled_events", "url", "description", "metadata":
		case "disabled":
			if created {
				return unknownParam(w, name)
			}
		case "api_version", "connect":
			if !created {
				return unknownParam(w, name)
			}
		default:
			return unknownParam(w, name)
		}
	}
	if created {
		switch {
		case form.Get("url") == "":
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "url", Message: "Missing required param: url."})
		case !hasEvents:
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "enabled_events",
				Message: "Missing required param: enabled_events."})
		case len(s.hooks.list) >= MaxWebhookEndpoints:
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error",
				Message: fmt.Sprintf("You have reached the maximum of %d test webhook endpoints.", MaxWebhookEndpoints)})
		}
		we = s.addHookLocked(WebhookEndpoint{URL: form.Get("url"), EnabledEvents: events, APIVersion: form.Get("api_version"),
			Description: form.Get("description")})
	} else {
		if we = s.hookLocked(id); we == nil {
			return noSuchHook(w, id)
		}
		if hasEvents {
			we.EnabledEvents = events
		}
		if v := form.Get("url"); v != "" {
			we.URL = v
		}
		if form.Has("description") {
			we.Description = form.Get("description")
		}
		switch form.Get("disabled") {
		case "":
		case "true":
			we.Status = "disabled"
		case "false":
			we.Status = "enabled"
		default:
			return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: "disabled",
				Message: "Invalid boolean: " + form.Get("disabled")})
		}
	}
	answer := hookJSON(we, created)
	if key != "" {
		if s.hooks.idem == nil {
			s.hooks.idem = map[string][2]string{}
		}
		s.hooks.idem[key] = [2]string{hex.EncodeToString(hash[:]), string(answer)}
	}
	return writeJSON(w, http.StatusOK, answer)
}

func unknownParam(w http.ResponseWriter, name string) int {
	return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Param: name,
		Message: "Received unknown parameter: " + name})
}

// formEvents reads enabled_events[] (enabled_events[0], [1]… in order, or
// repeated enabled_events[]): the list, whether there was one, and what is
// wrong with it.
func formEvents(form url.Values) (events []string, has bool, bad string) {
	type item struct {
		i int
		v string
	}
	var items []item
	for name, vals := range form {
		idx, ok := strings.CutPrefix(name, "enabled_events[")
		if !ok {
			continue
		}
		has = true
		idx = strings.TrimSuffix(idx, "]")
		n := len(items)
		if idx != "" {
			var err error
			if n, err = strconv.Atoi(idx); err != nil {
				return nil, true, name
			}
		}
		for _, v := range vals {
			items = append(items, item{n, v})
		}
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].i < items[b].i })
	for _, it := range items {
		if !eventTypePattern.MatchString(it.v) {
			return nil, true, it.v
		}
		events = append(events, it.v)
	}
	if has && len(events) == 0 {
		return nil, true, "an empty list"
	}
	return events, has, ""
}

// hookJSON is an endpoint as Stripe's API writes it; withSecret in the
// answer of its creation only.
func hookJSON(we *WebhookEndpoint, withSecret bool) json.RawMessage {
	var version any
	if we.APIVersion != "" {
		version = we.APIVersion
	}
	var desc any
	if we.Description != "" {
		desc = we.Description
	}
	m := map[string]any{
		"id": we.ID, "object": "webhook_endpoint", "api_version": version, "application": nil, "created": 1700000000,
		"description": desc, "enabled_events": we.EnabledEvents, "livemode": we.Livemode, "metadata": map[string]string{},
		"status": we.Status, "url": we.URL,
	}
	if withSecret {
		m["secret"] = we.Secret
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return b
}

func writeHook(w http.ResponseWriter, status int, we *WebhookEndpoint, withSecret bool) int {
	return writeJSON(w, status, hookJSON(we, withSecret))
}
