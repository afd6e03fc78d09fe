package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The session cookie is stateless and holds no secret: its expiry and an
// HMAC of it under a key derived from ADMIN_TOKEN. Every replica with the
// same token accepts it, and changing the token signs everyone out. The
// CSRF token of a page is an HMAC of the session under the same key, so
// that it is bound to the session and needs no storage either.
const (
	cookieName     = "console_session"
	sessionTTL     = 12 * time.Hour
	csrfField      = "csrf"
	csrfHeader     = "X-CSRF-Token"
	sessionContext = ctxKey("session")
)

type ctxKey string

type auth struct {
	tokenHash [32]byte
	key       []byte
}

func newAuth(token string) auth {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("paywebhooks console session v1"))
	return auth{tokenHash: sha256.Sum256([]byte(token)), key: mac.Sum(nil)}
}

// tokenOK compares a presented token with ADMIN_TOKEN in constant time:
// both are hashed first, so neither the content nor the length leaks.
func (a auth) tokenOK(presented string) bool {
	h := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(h[:], a.tokenHash[:]) == 1
}

func (a auth) sign(msg string) string {
	mac := hmac.New(sha256.New, a.key)
	mac.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// newSession returns a cookie value valid until expires.
func (a auth) newSession(expires time.Time) string {
	payload := "s1." + strconv.FormatInt(expires.Unix(), 10)
	return payload + "." + a.sign(payload)
}

// sessionOK checks a cookie value: its signature, then its expiry.
func (a auth) sessionOK(v string, now time.Time) bool {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return false
	}
	payload, sig := v[:i], v[i+1:]
	if subtle.ConstantTimeCompare([]byte(sig), []byte(a.sign(payload))) != 1 {
		return false
	}
	exp, err := strconv.ParseInt(strings.TrimPrefix(payload, "s1."), 10, 64)
	return err == nil && strings.HasPrefix(payload, "s1.") && now.Unix() < exp
}

func (a auth) csrfToken(session string) string { return a.sign("csrf." + session) }

func (a auth) csrfOK(session, presented string) bool {
	return presented != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(a.csrfToken(session))) == 1
}

// sessionOf returns the session the request was authenticated with, if it
// came with the cookie (not with a bearer token).
func sessionOf(r *http.Request) (string, bool) {
	s, ok := r.Context().Value(sessionContext).(string)
	return s, ok
}

// authed lets a request through with the token as a bearer, or with a
// valid session cookie; a state-changing request made with the cookie must
// carry the page's CSRF token and, when the browser says where it comes
// from, come from the console itself. Without credentials the answer is
// 401 with the sign-in form.
func (c *Console) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if authz := r.Header.Get("Authorization"); authz != "" {
			token, ok := strings.CutPrefix(authz, "Bearer ")
			if !ok || !c.auth.tokenOK(strings.TrimSpace(token)) {
				c.cfg.Log.WarnContext(r.Context(), "console: bearer token refused", "remote", r.RemoteAddr, "path", r.URL.Path)
				c.unauthorized(w, r, "The bearer token is not the console's token.")
				return
			}
			h(w, r)
			return
		}
		ck, err := r.Cookie(cookieName)
		if err != nil || !c.auth.sessionOK(ck.Value, c.cfg.Now()) {
			c.unauthorized(w, r, "")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !sameOrigin(r) {
				c.forbidden(w, r, "The request comes from another site.")
				return
			}
			presented := r.Header.Get(csrfHeader)
			if presented == "" {
				presented = r.PostFormValue(csrfField)
			}
			if !c.auth.csrfOK(ck.Value, presented) {
				c.forbidden(w, r, "The form's CSRF token is missing or wrong: reload the page and try again.")
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionContext, ck.Value)))
	})
}

// sameOrigin reports whether a request's Origin (or, without one, its
// Referer), when the browser sends one, is the console's own.
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		if from = r.Header.Get("Referer"); from == "" {
			return true // a script, or a browser that says nothing: the CSRF token decides
		}
	}
	u, err := url.Parse(from)
	return err == nil && u.Host != "" && u.Host == r.Host
}

func (c *Console) forbidden(w http.ResponseWriter, r *http.Request, msg string) {
	c.cfg.Log.WarnContext(r.Context(), "console: request refused", "remote", r.RemoteAddr, "method", r.Method,
		"path", r.URL.Path, "reason", msg)
	c.fail(w, r, http.StatusForbidden, msg, nil)
}

// loginView is the sign-in page's data.
type loginView struct {
	Next    string
	Problem string
}

func (c *Console) unauthorized(w http.ResponseWriter, r *http.Request, problem string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="console"`)
	if wantsJSON(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "sign in: send Authorization: Bearer <ADMIN_TOKEN>"})
		return
	}
	next := ""
	if r.Method == http.MethodGet {
		next = r.URL.RequestURI()
	}
	c.render(w, r, http.StatusUnauthorized, "login", "Sign in", "", loginView{Next: next, Problem: problem})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", "Sign in", "", loginView{Next: localPath(r.URL.Query().Get("next"))})
}

// login checks the form's token and sets the session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !sameOrigin(r) {
		c.forbidden(w, r, "The request comes from another site.")
		return
	}
	next := localPath(r.PostFormValue("next"))
	if !c.auth.tokenOK(r.PostFormValue("token")) {
		c.cfg.Log.WarnContext(r.Context(), "console: sign-in refused", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="console"`)
		c.render(w, r, http.StatusUnauthorized, "login", "Sign in", "", loginView{Next: next, Problem: "That is not the console's token."})
		return
	}
	expires := c.cfg.Now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: c.auth.newSession(expires), Path: "/", Expires: expires,
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	c.cfg.Log.InfoContext(r.Context(), "console: signed in", "actor", actor(r))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// localPath keeps a redirect target on the console: a path of its own,
// never another host ("//host", "/\host").
func localPath(p string) string {
	if p == "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return "/"
	}
	return p
}
