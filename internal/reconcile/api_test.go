package reconcile_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/paywebhooks/receiver/internal/reconcile"
)

// TestSendJSON: v goes as JSON, with the API's own headers, and the body
// of a 2xx answer comes back; a POST without an Idempotency-Key is not
// tried again after a 5xx.
func TestSendJSON(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.URL.Path == "/fail":
			w.WriteHeader(http.StatusBadGateway)
		case r.Method != http.MethodPatch || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("Authorization") != "Bearer k" || string(body) != `{"on":true}`:
			t.Errorf("%s %s, %q, %q: %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), body)
			w.WriteHeader(http.StatusBadRequest)
		default:
			_, _ = w.Write([]byte(`{"id":"x"}`))
		}
	}))
	defer srv.Close()
	api, err := reconcile.NewAPI(reconcile.APIConfig{Base: srv.URL, Header: http.Header{"Authorization": {"Bearer k"}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := api.SendJSON(context.Background(), http.MethodPatch, "/things/x", map[string]bool{"on": true})
	if err != nil || string(out) != `{"id":"x"}` {
		t.Errorf("got %s, %v", out, err)
	}
	calls.Store(0)
	var he *reconcile.HTTPError
	if _, err := api.SendJSON(context.Background(), http.MethodPost, "/fail", struct{}{}); !errors.As(err, &he) || he.Status != http.StatusBadGateway || calls.Load() != 1 {
		t.Errorf("a POST that failed: %v, %d calls", err, calls.Load())
	}
}
