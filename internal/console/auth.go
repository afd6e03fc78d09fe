package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paywebhooks/receiver/internal/reqlog"
)

// A browser signs in with the token once (POST /login) and gets a session
// cookie (session.go): a random id whose row in console_sessions makes it
// valid, until it expires or POST /logout revokes it. The CSRF token of a
// page is an HMAC of the session cookie under a key derived from
// ADMIN_TOKEN, so that it is bound to the session and needs no storage.
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

func (a auth) verify(msg, sig string) bool {
	return subtle.ConstantTimeCompare([]byte(sig), []byte(a.sign(msg))) == 1
}

func (a auth) csrfToken(cookie string) string { return a.sign("csrf." + cookie) }

func (a auth) csrfOK(cookie, presented string) bool {
	return presented != "" && a.verify("csrf."+cookie, presented)
}

// session is the session a request was authenticated with.
type session struct {
	cookie string
	id     sessionID
}

// sessionOf returns the session the request was authenticated with, if it
// came with the cookie (not with a bearer token).
func sessionOf(r *http.Request) (session, bool) {
	s, ok := r.Context().Value(sessionContext).(session)
	return s, ok
}

// authed lets a request through with the token as a bearer, or with the
// cookie of a live session; a state-changing request made with the cookie
// must carry the page's CSRF token and, when the browser says where it
// comes from, come from the console itself. Without credentials the answer
// is 401 with the sign-in form. A bearer token is a sign-in: throttled as
// one (throttle.go).
func (c *Console) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if authz := r.Header.Get("Authorization"); authz != "" {
			ok, ran := c.checkToken(w, r, func() bool {
				token, ok := strings.CutPrefix(authz, "Bearer ")
				return ok && c.auth.tokenOK(strings.TrimSpace(token))
			})
			if !ran {
				return
			}
			if !ok {
				c.cfg.Log.WarnContext(r.Context(), "console: bearer token refused", "client", c.clientOf(r), "path", reqlog.Untrusted(r.URL.Path, 200))
				c.unauthorized(w, r, "The bearer token is not the console's token.")
				return
			}
			h(w, r)
			return
		}
		ck, err := r.Cookie(cookieName)
		if err != nil {
			c.unauthorized(w, r, "")
			return
		}
		id, err := c.auth.sessionIDOf(ck.Value)
		if err != nil {
			c.unauthorized(w, r, "")
			return
		}
		live, err := c.sessions.live(r.Context(), id, c.cfg.Now())
		if err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The console's sessions could not be read: try again.", err)
			return
		}
		if !live {
			c.clearCookie(w, r)
			c.unauthorized(w, r, "Your session has ended (signed out, or expired): sign in again.")
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
		h(w, r.WithContext(context.WithValue(r.Context(), sessionContext, session{cookie: ck.Value, id: id})))
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
		"path", reqlog.Untrusted(r.URL.Path, 200), "reason", msg)
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
		next = localPath(r.URL.RequestURI())
	}
	c.render(w, r, http.StatusUnauthorized, "login", "Sign in", "", loginView{Next: next, Problem: problem})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", "Sign in", "", loginView{Next: localPath(r.URL.Query().Get("next"))})
}

// login checks the form's token (throttled) and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !sameOrigin(r) {
		c.forbidden(w, r, "The request comes from another site.")
		return
	}
	next := localPath(r.PostFormValue("next"))
	ok, ran := c.checkToken(w, r, func() bool { return c.auth.tokenOK(r.PostFormValue("token")) })
	if !ran {
		return
	}
	if !ok {
		c.cfg.Log.WarnContext(r.Context(), "console: sign-in refused", "client", c.clientOf(r))
		w.Header().Set("WWW-Authenticate", `Bearer realm="console"`)
		c.render(w, r, http.StatusUnauthorized, "login", "Sign in", "", loginView{Next: next, Problem: "That is not the console's token."})
		return
	}
	now := c.cfg.Now()
	expires := now.Add(sessionTTL)
	client := c.clientIP(r)
	if len(client) > 64 {
		client = client[:64]
	}
	id, err := c.sessions.create(r.Context(), now, expires, client)
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "The session could not be stored: try again.", err)
		return
	}
	if _, err := c.sessions.expire(r.Context(), now); err != nil {
		c.cfg.Log.WarnContext(r.Context(), "console: expired sessions not deleted", "error", err)
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: c.auth.cookieValue(id), Path: "/", Expires: expires,
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r),
	})
	c.cfg.Log.InfoContext(r.Context(), "console: signed in", "actor", actor(r), "client", c.clientOf(r))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout revokes the session, on every replica, and clears the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if s, ok := sessionOf(r); ok {
		if err := c.sessions.revoke(r.Context(), s.id, c.cfg.Now()); err != nil {
			c.fail(w, r, http.StatusServiceUnavailable, "The session could not be ended: try again.", err)
			return
		}
		c.cfg.Log.InfoContext(r.Context(), "console: signed out", "actor", actor(r))
	}
	c.clearCookie(w, r)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
}

// secure reports whether the cookie is to be Secure: ADMIN_COOKIE_SECURE,
// TLS served by the console itself, or a request from a proxy of
// TRUSTED_PROXIES that says the browser's side was https.
func (c *Console) secure(r *http.Request) bool {
	if c.cfg.CookieSecure || r.TLS != nil {
		return true
	}
	peer := peerIP(r)
	for _, p := range c.cfg.TrustedProxies {
		if peer.IsValid() && p.Contains(peer) {
			proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
			return strings.EqualFold(strings.TrimSpace(proto), "https")
		}
	}
	return false
}

// maxNext bounds a redirect target.
const maxNext = 2048

// localPath keeps a redirect target on the console: a path of its own,
// or "/". Browsers drop tabs and newlines from a URL and read a backslash
// as a slash, so "/\t/evil.example" and "/\evil.example" would leave the
// console; a percent-encoded one ("/%09/", "/%5C", "/%2F/") is refused as
// well, in case anything decodes it on the way.
func localPath(p string) string {
	if len(p) > maxNext || !localRaw(p) {
		return "/"
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	dec, err := url.PathUnescape(p)
	if err != nil || !localDecoded(dec) {
		return "/"
	}
	return p
}

// localRaw: a path starting with one slash, of printable ASCII with no
// backslash or space (what RequestURI gives).
func localRaw(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if b := p[i]; b <= ' ' || b >= 0x7f || b == '\\' {
			return false
		}
	}
	return true
}

// localDecoded: the same once decoded, where other characters than ASCII
// controls and backslashes are allowed (a search for a name).
func localDecoded(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || !utf8.ValidString(p) {
		return false
	}
	for _, r := range p {
		if r < ' ' || r == 0x7f || r == '\\' || r >= 0x80 && r <= 0x9f {
			return false
		}
	}
	return true
}
