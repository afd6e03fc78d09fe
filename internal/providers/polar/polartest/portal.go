package polartest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// The fake's customer portal: `POST /v1/customer-sessions/` (JSON:
// `customer_id`, or `external_customer_id`; `return_url` optional) answers
// 201 with a customer session whose customer_portal_url is a page of this
// server's, as Polar's carry a short-lived customer_session_token. An
// unknown field is a 422.

// PortalSession is one customer session the fake opened.
type PortalSession struct {
	Customer, ReturnURL, URL string
}

// PortalSessions returns the customer sessions opened so far, in order.
func (s *Server) PortalSessions() []PortalSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.portals)
}

// answerPortal answers the customer sessions' requests, and reports
// whether the request was one.
func (s *Server) answerPortal(w http.ResponseWriter, r *http.Request) (int, bool) {
	if r.URL.Path != "/v1/customer-sessions/" {
		return 0, false
	}
	switch {
	case r.Method != http.MethodPost:
		return fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "Method Not Allowed"), true
	case r.Header.Get("Authorization") != "Bearer "+s.Token:
		return fail(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized"), true
	}
	var body struct {
		CustomerID string  `json:"customer_id"`
		ReturnURL  *string `json:"return_url"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.CustomerID == "" {
		return fail(w, http.StatusUnprocessableEntity, "RequestValidationError", "customer_id required"), true
	}
	s.mu.Lock()
	p := PortalSession{Customer: body.CustomerID,
		URL: fmt.Sprintf("%s/acme/portal?customer_session_token=polar_cst_test_%d", s.URL, len(s.portals)+1)}
	if body.ReturnURL != nil {
		p.ReturnURL = *body.ReturnURL
	}
	s.portals = append(s.portals, p)
	n := len(s.portals)
	s.mu.Unlock()
	now := time.Now().UTC()
	b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("00000000-0000-4000-8000-%012d", n), "created_at": now.Format(time.RFC3339Nano),
		"modified_at": nil, "token": fmt.Sprintf("polar_cst_test_%d", n), "expires_at": now.Add(time.Hour).Format(time.RFC3339Nano),
		"return_url": body.ReturnURL, "customer_portal_url": p.URL, "customer_id": body.CustomerID})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
	return http.StatusCreated, true
}
