package alerts_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/paywebhooks/receiver/internal/alerts"
)

// TestWebhookNeverFollowsARedirect: an alert webhook that redirects (to
// another host, another scheme's URL, or within its own) gets the
// redirect back as a failure that is retried; the Location is never
// called, with the default client or one of the caller's.
func TestWebhookNeverFollowsARedirect(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string // what the redirect's targets received
	record := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
	}
	other := httptest.NewServer(http.HandlerFunc(record))
	defer other.Close()
	payload, err := json.Marshal(alerts.Alert{Cause: alerts.CauseParked, Hour: "2026-12-01T10Z", Title: "t", Text: "parked: evt_1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		status int
		to     string
	}{
		{"TemporaryToAnotherHost", http.StatusTemporaryRedirect, other.URL + "/hook"},
		{"PermanentToAnotherHost", http.StatusPermanentRedirect, other.URL + "/hook"},
		{"FoundToAnotherHost", http.StatusFound, other.URL + "/hook"},
		{"MovedWithinTheHost", http.StatusMovedPermanently, "/moved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			elsewhere = nil
			mu.Unlock()
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/services/T0/B0/secret" {
					record(w, r)
					return
				}
				http.Redirect(w, r, c.to, c.status)
			}))
			defer hook.Close()
			for _, k := range []alerts.WebhookKind{
				{URL: hook.URL + "/services/T0/B0/secret"},
				{URL: hook.URL + "/services/T0/B0/secret", Client: &http.Client{}},
			} {
				err := k.Run(context.Background(), "alert/parked/2026-12-01T10Z", payload)
				var se *alerts.StatusError
				if !errors.As(err, &se) || se.StatusCode() != c.status || se.Permanent() {
					t.Errorf("Run: %v; want a retried StatusError %d", err, c.status)
				}
				if err != nil && !strings.Contains(err.Error(), "never followed") {
					t.Errorf("the error does not say the redirect was not followed: %v", err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(elsewhere) > 0 {
				t.Errorf("the redirect was followed: %q", elsewhere)
			}
		})
	}
}
