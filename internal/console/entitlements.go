package console

import (
	"context"
	"net/http"
	"strings"

	"github.com/paywebhooks/receiver/internal/entitlements"
)

// Entitlements reads subjects' entitlements: internal/entitlements.Store.
type Entitlements interface {
	Get(ctx context.Context, subject string) (entitlements.Body, error)
	Show(ctx context.Context, subject string) (entitlements.Shown, error)
	SubjectsOfEvent(ctx context.Context, eventKey string) ([]string, error)
}

// api lets a request through with API_TOKEN as a bearer, and nothing else:
// not ADMIN_TOKEN, not the console's session cookie. A wrong token is a
// sign-in that failed, throttled as one (throttle.go).
func (c *Console) api(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if c.apiAuth == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no read API: API_TOKEN is unset"})
			return
		}
		authz := r.Header.Get("Authorization")
		if authz == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="api"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "send Authorization: Bearer <API_TOKEN>"})
			return
		}
		ok, ran := c.checkToken(w, r, func() bool {
			token, ok := strings.CutPrefix(authz, "Bearer ")
			return ok && c.apiAuth.tokenOK(strings.TrimSpace(token))
		})
		if !ran {
			return
		}
		if !ok {
			c.cfg.Log.WarnContext(r.Context(), "api: bearer token refused", "client", c.clientOf(r), "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="api"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "the bearer token is not API_TOKEN"})
			return
		}
		h(w, r)
	})
}

// apiEntitlements answers GET /api/entitlements/<subject>: the subject's
// latest version, the body the app was told.
func (c *Console) apiEntitlements(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	switch {
	case c.cfg.Entitlements == nil:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "entitlements are off: ENTITLEMENTS_FILE is unset"})
		return
	case subject == "" || len(subject) > 1024:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "name a subject: /api/entitlements/<subject>"})
		return
	}
	b, err := c.cfg.Entitlements.Get(r.Context(), subject)
	if err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "api: entitlements not read", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the entitlements could not be read: try again"})
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// entitlementsView is the entitlements page's data.
type entitlementsView struct {
	Subject string
	Off     bool
	Shown   entitlements.Shown
	Found   bool
}

// entitlementsPage shows a subject's entitlements and what grants each
// (GET /entitlements/<subject>, or /entitlements?subject=).
func (c *Console) entitlementsPage(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	if subject == "" {
		subject = strings.TrimSpace(r.URL.Query().Get("subject"))
	}
	v := entitlementsView{Subject: subject, Off: c.cfg.Entitlements == nil}
	if !v.Off && subject != "" {
		shown, err := c.cfg.Entitlements.Show(r.Context(), subject)
		if err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The subject's entitlements could not be read.", err)
			return
		}
		v.Shown, v.Found = shown, true
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, v.Shown)
		return
	}
	c.render(w, r, http.StatusOK, "entitlements", "Entitlements "+subject, "entitlements", v)
}
