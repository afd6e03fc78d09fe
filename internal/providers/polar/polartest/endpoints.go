package polartest

import (
	"encoding/json"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The fake's webhook endpoints (the endpoint check's API), as Polar's
// server answers them (polarsource/polar, server/polar/webhook/endpoints.py
// and schemas.py, server/polar/kit/pagination.py):
//
//   - GET /v1/webhooks/endpoints: `page` (from 1), `limit` (default 10, at
//     most 100: more is answered with 100), `organization_id`, `user_id`;
//     any other parameter is a 422. `{"items", "pagination":
//     {"total_count", "max_page"}}`, oldest first, each endpoint with its
//     `secret`, as Polar's.
//   - PATCH /v1/webhooks/endpoints/{id}: `url`, `name`, `format`,
//     `events`, `enabled`; POST /v1/webhooks/endpoints: `url`, `format`
//     and `events` required, `name`, `organization_id`; answered 201. An
//     unknown field, a format other than raw, discord or slack, or a URL
//     that is not https is a 422.

// WebhookEndpoint is one webhook endpoint the fake holds.
type WebhookEndpoint struct {
	ID      string // a UUID; generated when empty
	URL     string
	Name    string
	Format  string // raw (default), discord, slack
	Events  []string
	Enabled bool
	Secret  string
}

// endpointsState is the fake's webhook endpoints, oldest first.
type endpointsState struct {
	list []*WebhookEndpoint
	seq  int
}

// AddEndpoint adds a webhook endpoint, its id, format and secret filled in
// when empty, and returns it.
func (s *Server) AddEndpoint(we WebhookEndpoint) WebhookEndpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addEndpointLocked(we)
}

func (s *Server) addEndpointLocked(we WebhookEndpoint) *WebhookEndpoint {
	s.endpoints.seq++
	n := strconv.Itoa(s.endpoints.seq)
	if we.ID == "" {
		we.ID = uuid("endpoint", n)
	}
	if we.Format == "" {
		we.Format = "raw"
	}
	if we.Secret == "" {
		we.Secret = "whsec_" + strings.ReplaceAll(uuid("secret", we.ID), "-", "")
	}
	we.Events = slices.Clone(we.Events)
	p := &we
	s.endpoints.list = append(s.endpoints.list, p)
	return p
}

// Endpoints returns the webhook endpoints, oldest first.
func (s *Server) Endpoints() []WebhookEndpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]WebhookEndpoint, len(s.endpoints.list))
	for i, we := range s.endpoints.list {
		out[i] = *we
		out[i].Events = slices.Clone(we.Events)
	}
	return out
}

// DeleteEndpoint deletes a webhook endpoint.
func (s *Server) DeleteEndpoint(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints.list = slices.DeleteFunc(s.endpoints.list, func(we *WebhookEndpoint) bool { return we.ID == id })
}

// answerEndpoints answers the webhook endpoints' paths (ok false: another
// path).
func (s *Server) answerEndpoints(w http.ResponseWriter, r *http.Request) (int, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/webhooks/endpoints")
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return 0, false
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		return fail(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized"), true
	}
	id := strings.TrimPrefix(rest, "/")
	switch {
	case r.Method == http.MethodGet && id == "":
		return s.listEndpoints(w, r), true
	case r.Method == http.MethodPatch && id != "", r.Method == http.MethodPost && id == "":
		return s.writeEndpoint(w, r, id), true
	}
	return fail(w, http.StatusNotFound, "ResourceNotFound", "Not found"), true
}

func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) int {
	page, limit := 1, 10
	for k, vals := range r.URL.Query() {
		v := vals[len(vals)-1]
		switch k {
		case "page", "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", k)
			}
			if k == "page" {
				page = n
			} else {
				limit = min(n, MaxLimit)
			}
		case "organization_id", "user_id":
		default:
			return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "unexpected parameter "+k)
		}
	}
	s.mu.Lock()
	total := len(s.endpoints.list)
	from := min((page-1)*limit, total)
	items := make([]map[string]any, 0, limit)
	for _, we := range s.endpoints.list[from:min(from+limit, total)] {
		items = append(items, endpointJSON(we))
	}
	s.mu.Unlock()
	return writeEndpointJSON(w, http.StatusOK, map[string]any{
		"items": items, "pagination": map[string]any{"total_count": total, "max_page": (total + limit - 1) / limit},
	})
}

// polarEvent is what the fake takes as an event type.
var polarEvent = regexp.MustCompile(`^[a-z_]+\.[a-z_]+$`)

func (s *Server) writeEndpoint(w http.ResponseWriter, r *http.Request, id string) int {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "the body must be JSON")
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var b struct {
		URL            *string   `json:"url"`
		Name           *string   `json:"name"`
		Format         *string   `json:"format"`
		Events         *[]string `json:"events"`
		Enabled        *bool     `json:"enabled"`
		OrganizationID *string   `json:"organization_id"`
	}
	if err := dec.Decode(&b); err != nil {
		return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", err.Error())
	}
	switch {
	case b.URL != nil && !strings.HasPrefix(*b.URL, "https://"):
		return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "url: URL scheme should be 'https'")
	case b.Format != nil && !slices.Contains([]string{"raw", "discord", "slack"}, *b.Format):
		return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "format: raw, discord or slack")
	case b.Events != nil && slices.ContainsFunc(*b.Events, func(e string) bool { return !polarEvent.MatchString(e) }):
		return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "events: not a webhook event type")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var we *WebhookEndpoint
	status := http.StatusOK
	if id == "" {
		if b.URL == nil || b.Format == nil || b.Events == nil {
			return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "url, format and events are required")
		}
		we = s.addEndpointLocked(WebhookEndpoint{Enabled: true})
		status = http.StatusCreated
	} else if i := slices.IndexFunc(s.endpoints.list, func(we *WebhookEndpoint) bool { return we.ID == id }); i >= 0 {
		we = s.endpoints.list[i]
	} else {
		return fail(w, http.StatusNotFound, "ResourceNotFound", "Not found")
	}
	if b.URL != nil {
		we.URL = *b.URL
	}
	if b.Name != nil {
		we.Name = *b.Name
	}
	if b.Format != nil {
		we.Format = *b.Format
	}
	if b.Events != nil {
		we.Events = slices.Clone(*b.Events)
	}
	if b.Enabled != nil {
		we.Enabled = *b.Enabled
	}
	return writeEndpointJSON(w, status, endpointJSON(we))
}

// endpointJSON is an endpoint as Polar's API writes it, secret included.
func endpointJSON(we *WebhookEndpoint) map[string]any {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(polarTime)
	var name any
	if we.Name != "" {
		name = we.Name
	}
	return map[string]any{
		"id": we.ID, "created_at": at, "modified_at": nil, "url": we.URL, "name": name, "format": we.Format,
		"secret": we.Secret, "organization_id": uuid("organization"), "events": we.Events, "enabled": we.Enabled,
	}
}

func writeEndpointJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status
}
