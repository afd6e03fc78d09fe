package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/paywebhooks/receiver/internal/reconcile"
)

func TestCheckAPIBase(t *testing.T) {
	for v, ok := range map[string]bool{
		"https://api.stripe.com":           true,
		"https://api.example.com:8443/v1":  true,
		"http://127.0.0.1:8080":            true,
		"http://127.3.4.5":                 true,
		"http://[::1]:9000":                true,
		"http://localhost:12111":           true,
		"http://LOCALHOST":                 true,
		"http://api.stripe.com":            false, // the key would travel in clear
		"http://10.0.0.1":                  false,
		"http://[::ffff:10.0.0.1]":         false,
		"http://localhost.example.com":     false,
		"http://127.0.0.1.nip.io":          false,
		"https://user:pass@api.paddle.com": false,
		"ftp://api.stripe.com":             false,
		"api.stripe.com":                   false,
		"":                                 false,
	} {
		if err := reconcile.CheckAPIBase(v); (err == nil) != ok {
			t.Errorf("CheckAPIBase(%q) = %v, want ok %t", v, err, ok)
		}
	}
	if _, err := reconcile.NewClient("http://api.paddle.com"); err == nil {
		t.Error("NewClient takes an http:// base that is not loopback")
	}
}

// recorder is a server that records the credentials it is sent.
type recorder struct {
	*httptest.Server
	mu    sync.Mutex
	heard []string
}

func newRecorder(t *testing.T, addr string) *recorder {
	t.Helper()
	r := &recorder{}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.Server = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.heard = append(r.heard, fmt.Sprintf("%s %s Authorization=%q Stripe-Account=%q",
			req.Method, req.URL.Path, req.Header.Get("Authorization"), req.Header.Get("Stripe-Account")))
		r.mu.Unlock()
		fmt.Fprint(w, `{}`)
	})}}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.heard...)
}

// bearer adds a credential in the transport, as ghinstallation adds the
// GitHub App's JWT: on every request it carries, redirects included.
type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer app-jwt")
	return b.next.RoundTrip(r)
}

// TestClientRefusesAnotherOrigin: an API that redirects elsewhere (another
// port of the same host, another loopback address) gets nothing there, with
// the credential in a header or added by a wrapping transport; the run
// stops, naming the cause. A redirect within the origin is not followed
// either.
func TestClientRefusesAnotherOrigin(t *testing.T) {
	samePort := newRecorder(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(samePort.Listener.Addr().String())
	otherHost := newRecorder(t, "127.0.0.2:0")
	for _, c := range []struct {
		name   string
		target string
		wrap   bool
	}{
		{"AnotherPort", samePort.URL, false},
		{"AnotherPortJWT", samePort.URL, true},
		{"AnotherHost", otherHost.URL, false},
		{"AnotherHostJWT", otherHost.URL, true},
		{"SameHostOtherScheme", "https://127.0.0.1:" + port, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, c.target+"/v1/events", http.StatusTemporaryRedirect)
			}))
			defer api.Close()
			hc, err := reconcile.NewClient(api.URL)
			if err != nil {
				t.Fatal(err)
			}
			if c.wrap {
				hc.Transport = bearer{hc.Transport}
			}
			ctx, release := reconcile.Bound(context.Background(), reconcile.Limits{})
			defer release()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+"/v1/events", nil)
			req.Header.Set("Authorization", "Bearer sk_test_secret")
			req.Header.Set("Stripe-Account", "acct_1")
			_, err = hc.Do(req)
			if !errors.Is(err, reconcile.ErrRedirect) {
				t.Errorf("Do: %v, want ErrRedirect", err)
			}
			if err := reconcile.Cause(ctx, ctx.Err()); !errors.Is(err, reconcile.ErrRedirect) ||
				!strings.HasPrefix(err.Error(), "stopped: ") {
				t.Errorf("the run's cause: %v", err)
			}
		})
	}
	if got := append(samePort.requests(), otherHost.requests()...); len(got) > 0 {
		t.Errorf("another origin was sent: %q", got)
	}

	t.Run("WithinTheOrigin", func(t *testing.T) {
		var followed []string
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", http.StatusMovedPermanently)
				return
			}
			followed = append(followed, r.URL.Path+" "+r.Header.Get("Authorization"))
		}))
		defer api.Close()
		hc, _ := reconcile.NewClient(api.URL)
		hc.Transport = bearer{hc.Transport}
		ctx, release := reconcile.Bound(context.Background(), reconcile.Limits{})
		defer release()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+"/old", nil)
		if _, err := hc.Do(req); !errors.Is(err, reconcile.ErrRedirect) {
			t.Errorf("Do: %v, want ErrRedirect", err)
		}
		if len(followed) > 0 {
			t.Errorf("a redirect within the origin was followed: %q", followed)
		}
	})
}
