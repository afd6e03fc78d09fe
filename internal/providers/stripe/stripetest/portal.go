package stripetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The fake's billing portal: `POST /v1/billing_portal/sessions` (a form:
// customer, required; return_url, optional; Stripe-Account for a connected
// account's customer) answers a billing_portal.session whose url is a page
// of this server's (/p/session/test_<n>), as Stripe's own sessions are
// short-lived pages of billing.stripe.com. A customer not cus_… is a 400
// resource_missing, as Stripe answers for a customer it does not have.

// PortalSession is one portal session the fake opened.
type PortalSession struct {
	Customer, Account, ReturnURL, URL string
}

// PortalSessions returns the portal sessions opened so far, in order.
func (s *Server) PortalSessions() []PortalSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.portals)
}

// answerPortal answers the billing portal's requests, and reports whether
// the request was one.
func (s *Server) answerPortal(w http.ResponseWriter, r *http.Request) (int, bool) {
	if r.URL.Path != "/v1/billing_portal/sessions" {
		return 0, false
	}
	if r.Method != http.MethodPost {
		return writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)}), true
	}
	if err := r.ParseForm(); err != nil {
		return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "Invalid form body."}), true
	}
	customer := r.PostForm.Get("customer")
	switch {
	case customer == "":
		return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Code: "parameter_missing",
			Param: "customer", Message: "Missing required param: customer."}), true
	case !strings.HasPrefix(customer, "cus_"):
		return writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Code: "resource_missing",
			Param: "customer", Message: fmt.Sprintf("No such customer: '%s'", customer)}), true
	}
	s.mu.Lock()
	p := PortalSession{Customer: customer, Account: r.Header.Get("Stripe-Account"), ReturnURL: r.PostForm.Get("return_url"),
		URL: fmt.Sprintf("%s/p/session/test_%d", s.URL, len(s.portals)+1)}
	s.portals = append(s.portals, p)
	s.mu.Unlock()
	var returnURL any
	if p.ReturnURL != "" {
		returnURL = p.ReturnURL
	}
	b, _ := json.MarshalIndent(map[string]any{"id": fmt.Sprintf("bps_test_%d", len(s.portals)), "object": "billing_portal.session",
		"customer": customer, "livemode": false, "return_url": returnURL, "url": p.URL}, "", "  ")
	return writeJSON(w, http.StatusOK, b), true
}
