package paddletest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The fake's customer portal: `POST /customers/{customer_id}/portal-sessions`
// (JSON; `subscription_ids` optional) answers 201 with a customer portal
// session, whose urls.general.overview is a page of this server's, as
// Paddle's are authenticated, short-lived links to its hosted portal. A
// customer id that is not ctm_… is a 404, as Paddle answers for a customer
// it does not have.

// PortalSession is one customer portal session the fake opened.
type PortalSession struct {
	Customer, URL string
}

// PortalSessions returns the portal sessions opened so far, in order.
func (s *Server) PortalSessions() []PortalSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.portals)
}

// answerPortal answers the customer portal's requests (authenticated
// already), and reports whether the request was one.
func (s *Server) answerPortal(w http.ResponseWriter, r *http.Request) (int, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/customers/")
	customer, ok2 := strings.CutSuffix(rest, "/portal-sessions")
	if !ok || !ok2 || strings.Contains(customer, "/") {
		return 0, false
	}
	if r.Method != http.MethodPost {
		return writeError(w, http.StatusNotFound, "request_error", "not_found", "Entity not found."), true
	}
	var body struct {
		SubscriptionIDs []string `json:"subscription_ids"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return writeError(w, http.StatusBadRequest, "request_error", "bad_request", "Invalid request body: "+err.Error()), true
	}
	if !strings.HasPrefix(customer, "ctm_") {
		return writeError(w, http.StatusNotFound, "request_error", "entity_not_found",
			fmt.Sprintf("customer %s not found", customer)), true
	}
	s.mu.Lock()
	p := PortalSession{Customer: customer, URL: fmt.Sprintf("%s/portal/%s?action=overview&token=test_%d", s.URL, customer, len(s.portals)+1)}
	s.portals = append(s.portals, p)
	n := len(s.portals)
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"data": map[string]any{"id": fmt.Sprintf("cpls_test_%d", n), "customer_id": customer,
		"urls":       map[string]any{"general": map[string]any{"overview": p.URL}, "subscriptions": []any{}},
		"created_at": time.Now().UTC().Format(time.RFC3339Nano)}, "meta": map[string]any{"request_id": fmt.Sprintf("req_test_%d", n)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b)
	return http.StatusCreated, true
}
