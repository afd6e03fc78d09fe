package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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

func TestClientBoundsARun(t *testing.T) {
	var mu sync.Mutex
	served := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		mu.Unlock()
		switch r.URL.Path {
		case "/announced":
			w.Header().Set("Content-Length", "4096")
			w.Write(make([]byte, 4096))
		case "/chunked":
			for range 4 {
				w.Write(make([]byte, 1024))
				w.(http.Flusher).Flush()
			}
		default:
			fmt.Fprint(w, "{}")
		}
	}))
	defer api.Close()
	hc, _ := reconcile.NewClient(api.URL)
	get := func(ctx context.Context, path string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}

	t.Run("Requests", func(t *testing.T) {
		mu.Lock()
		served = 0
		mu.Unlock()
		ctx, release := reconcile.Bound(context.Background(), reconcile.Limits{MaxRequests: 3})
		defer release()
		for i := range 3 {
			if err := get(ctx, "/"); err != nil {
				t.Fatalf("request %d: %v", i+1, err)
			}
		}
		if err := get(ctx, "/"); !errors.Is(err, reconcile.ErrTooManyRequests) {
			t.Errorf("request 4: %v, want ErrTooManyRequests", err)
		}
		if !errors.Is(context.Cause(ctx), reconcile.ErrTooManyRequests) {
			t.Errorf("the run goes on: %v", context.Cause(ctx))
		}
		mu.Lock()
		defer mu.Unlock()
		if served != 3 {
			t.Errorf("the API served %d requests, want 3", served)
		}
	})
	for _, path := range []string{"/announced", "/chunked"} {
		t.Run("Body"+path, func(t *testing.T) {
			ctx, release := reconcile.Bound(context.Background(), reconcile.Limits{MaxBody: 2048})
			defer release()
			if err := get(ctx, path); !errors.Is(err, reconcile.ErrResponseTooLarge) {
				t.Errorf("%s: %v, want ErrResponseTooLarge", path, err)
			}
			ctx, release = reconcile.Bound(context.Background(), reconcile.Limits{MaxBody: 4096})
			defer release()
			if err := get(ctx, path); err != nil {
				t.Errorf("%s of exactly MaxBody: %v", path, err)
			}
		})
	}
	t.Run("Timeout", func(t *testing.T) {
		ctx, release := reconcile.Bound(context.Background(), reconcile.Limits{Timeout: 1})
		defer release()
		<-ctx.Done()
		err := reconcile.Cause(ctx, get(ctx, "/"))
		if !errors.Is(err, reconcile.ErrTimeout) || !errors.Is(err, reconcile.ErrStopped) {
			t.Errorf("%v, want ErrTimeout", err)
		}
	})
	t.Run("CancelledIsNotStopped", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, release := reconcile.Bound(parent, reconcile.Limits{})
		defer release()
		cancel()
		if err := reconcile.Cause(ctx, ctx.Err()); errors.Is(err, reconcile.ErrStopped) || !errors.Is(err, context.Canceled) {
			t.Errorf("an operator's interrupt reads %v", err)
		}
	})
}

func TestPages(t *testing.T) {
	run := func(l reconcile.Limits) (context.Context, *reconcile.Pages) {
		ctx, release := reconcile.Bound(context.Background(), l)
		t.Cleanup(release)
		return ctx, reconcile.NewPages(ctx)
	}
	t.Run("OK", func(t *testing.T) {
		ctx, p := run(reconcile.Limits{})
		for _, c := range []string{"", "evt_3", "evt_6"} {
			if err := errors.Join(p.Next(c), p.Got(3, true)); err != nil {
				t.Fatal(err)
			}
		}
		if err := errors.Join(p.Next("evt_9"), p.Got(0, false)); err != nil || ctx.Err() != nil {
			t.Errorf("the last page, empty: %v %v", err, ctx.Err())
		}
	})
	for _, c := range []struct {
		name    string
		cursors []string
		want    error
	}{
		{"CursorRepeated", []string{"", "evt_3", "evt_6", "evt_3"}, reconcile.ErrCursorRepeated},
		{"FirstPageAgain", []string{"", ""}, reconcile.ErrCursorRepeated},
		{"TooManyPages", []string{"", "a", "b", "c"}, reconcile.ErrTooManyPages},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, p := run(reconcile.Limits{MaxPages: 3})
			var err error
			for _, cur := range c.cursors {
				if err = p.Next(cur); err != nil {
					break
				}
			}
			if !errors.Is(err, c.want) || !errors.Is(context.Cause(ctx), c.want) {
				t.Errorf("%v (the run: %v), want %v", err, context.Cause(ctx), c.want)
			}
		})
	}
	t.Run("NoProgress", func(t *testing.T) {
		ctx, p := run(reconcile.Limits{})
		if err := errors.Join(p.Next(""), p.Got(0, true)); !errors.Is(err, reconcile.ErrNoProgress) ||
			!errors.Is(context.Cause(ctx), reconcile.ErrNoProgress) {
			t.Errorf("%v, want ErrNoProgress", err)
		}
	})
	t.Run("PagesAreCountedPerRun", func(t *testing.T) {
		ctx, _ := run(reconcile.Limits{MaxPages: 3})
		a, b := reconcile.NewPages(ctx), reconcile.NewPages(ctx)
		err := errors.Join(a.Next(""), a.Next("x"), b.Next(""))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Next("y"); !errors.Is(err, reconcile.ErrTooManyPages) {
			t.Errorf("page 4 of the run: %v", err)
		}
	})
}

func TestHold(t *testing.T) {
	ctx, release := reconcile.Bound(context.Background(), reconcile.Limits{MaxHeld: 250})
	defer release()
	h := reconcile.Hold(ctx)
	if err := errors.Join(h.Add(100), h.Add(100), h.Add(50)); err != nil {
		t.Fatal(err)
	}
	if err := h.Add(1); !errors.Is(err, reconcile.ErrTooManyHeld) || !errors.Is(context.Cause(ctx), reconcile.ErrTooManyHeld) {
		t.Errorf("item 251: %v", err)
	}

	t.Run("Bytes", func(t *testing.T) {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(make([]byte, 600<<10))
		}))
		defer api.Close()
		hc, _ := reconcile.NewClient(api.URL)
		ctx, release := reconcile.Bound(context.Background(), reconcile.Limits{MaxHeldBytes: 1 << 20})
		defer release()
		h := reconcile.Hold(ctx)
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.URL, nil)
			resp, e := hc.Do(req)
			if e != nil {
				t.Fatal(e)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			err = h.Add(1)
			if i == 0 && err != nil {
				t.Fatalf("600 KiB held: %v", err)
			}
		}
		if !errors.Is(err, reconcile.ErrTooManyHeld) {
			t.Errorf("1.2 MiB held: %v", err)
		}
	})
}
