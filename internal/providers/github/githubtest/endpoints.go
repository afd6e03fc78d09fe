package githubtest

import (
	"encoding/json"
	"net/http"
	"slices"
)

// The fake's App endpoints (the endpoint check's API), answered to the
// App's JWT as GitHub answers them (docs.github.com/rest/apps/webhooks,
// /rest/apps/apps):
//
//   - GET /app/hook/config: `{"content_type", "insecure_ssl", "secret":
//     "********", "url"}` (404 when the App has no webhook).
//   - GET /app: the App, with the `events` its webhook is subscribed to.

// AppHook is the App's webhook as the fake holds it.
type AppHook struct {
	URL         string // "": the App has no webhook
	ContentType string // json (default), form
	InsecureSSL bool
	Events      []string
}

// SetAppHook sets the App's webhook.
func (s *Server) SetAppHook(h AppHook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.Events = slices.Clone(h.Events)
	s.hook = h
}

// answerApp answers /app and /app/hook/config (ok false: another path).
func (s *Server) answerApp(w http.ResponseWriter, r *http.Request) (int, bool) {
	if r.URL.Path != "/app" && r.URL.Path != "/app/hook/config" {
		return 0, false
	}
	if r.Method != http.MethodGet {
		return writeMessage(w, http.StatusNotFound, "Not Found"), true
	}
	s.mu.Lock()
	h := s.hook
	s.mu.Unlock()
	if r.URL.Path == "/app" {
		events := h.Events
		if events == nil {
			events = []string{}
		}
		b, _ := json.Marshal(map[string]any{"id": s.AppID, "slug": "paywebhooks-test", "name": "paywebhooks test",
			"owner": map[string]any{"login": "paywebhooks", "id": 1}, "permissions": map[string]string{"metadata": "read"},
			"events": events, "installations_count": 1})
		return writeJSON(w, http.StatusOK, b), true
	}
	if h.URL == "" {
		return writeMessage(w, http.StatusNotFound, "Not Found"), true
	}
	ct, insecure := h.ContentType, "0"
	if ct == "" {
		ct = "json"
	}
	if h.InsecureSSL {
		insecure = "1"
	}
	b, _ := json.Marshal(map[string]string{"content_type": ct, "insecure_ssl": insecure, "secret": "********", "url": h.URL})
	return writeJSON(w, http.StatusOK, b), true
}
