package github_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	github "github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/providers/github/githubtest"
	"github.com/paywebhooks/receiver/internal/reconcile"
)

// TestMarketplaceRunStopsAtABound: against a listing that pages wrongly
// or grows without end, a run stops after a bounded number of requests and
// accounts held, names the cause, is recorded as an error, corrects
// nothing from the broken listing and releases its lock.
func TestMarketplaceRunStopsAtABound(t *testing.T) {
	for _, c := range []struct {
		name      string
		misbehave githubtest.Misbehaviour
		limits    reconcile.Limits
		want      error
		requests  int // at most
	}{
		{"RepeatPage", githubtest.RepeatPage, reconcile.Limits{}, reconcile.ErrCursorRepeated, 5},
		{"StalePages", githubtest.StalePages, reconcile.Limits{}, reconcile.ErrNoProgress, 5},
		{"EndlessHeld", githubtest.Endless, reconcile.Limits{MaxHeld: 1_000}, reconcile.ErrTooManyHeld, 15},
		{"EndlessHeldBytes", githubtest.Endless, reconcile.Limits{MaxHeldBytes: 256 << 10}, reconcile.ErrTooManyHeld, 15},
		{"EndlessPages", githubtest.Endless, reconcile.Limits{MaxPages: 8}, reconcile.ErrTooManyPages, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newMarketplaceEnv(t)
			for i := range 3 {
				e.gh.Subscribe(7, githubtest.Account{ID: int64(100 + i), Login: "org", BillingCycle: "monthly"})
			}
			e.rec.Limits = c.limits
			e.gh.Misbehave(c.misbehave)
			done := make(chan struct{})
			var sum github.MarketplaceSummary
			var err error
			go func() {
				defer close(done)
				sum, err = e.rec.Run(context.Background(), github.MarketplaceOptions{})
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("the run is still going after a minute, %d requests", len(e.gh.Requests()))
			}
			if !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "reconcile github marketplace: stopped: ") {
				t.Errorf("error %v, want %v", err, c.want)
			}
			if n := len(e.gh.Requests()); n > c.requests {
				t.Errorf("%d requests, want at most %d", n, c.requests)
			}
			if len(e.proc.Processed()) != 0 || sum.Corrected != 0 {
				t.Errorf("a broken listing corrected something: %+v", sum)
			}
			runs, _ := e.store.Runs(context.Background(), github.SourceMarketplace, 1)
			if len(runs) != 1 || runs[0].Result != "error" || runs[0].Error != err.Error() {
				t.Errorf("recorded runs %+v", runs)
			}
			if release, err := e.store.Lock(context.Background(), github.SourceMarketplace); err != nil {
				t.Errorf("the lock after the run: %v", err)
			} else {
				release()
			}
			t.Logf("%d requests: %v", len(e.gh.Requests()), err)
		})
	}
}

// TestMarketplaceJWTStaysAtItsOrigin: the app's JWT is added by
// ghinstallation's transport to every request it carries, redirects
// included; an API that redirects to another origin gets nothing there.
func TestMarketplaceJWTStaysAtItsOrigin(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(`[]`))
	}))
	defer other.Close()
	e := newMarketplaceEnv(t)
	e.gh.RedirectTo(other.URL)
	_, err := e.rec.Run(context.Background(), github.MarketplaceOptions{DryRun: true})
	if !errors.Is(err, reconcile.ErrRedirect) {
		t.Errorf("error %v, want ErrRedirect", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) > 0 {
		t.Errorf("the other origin was sent %q", heard)
	}
}

func TestGitHubAPIURLMustBeHTTPS(t *testing.T) {
	gh := githubtest.New(t, testAppID)
	if _, err := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: gh.PrivateKeyPEM(), BaseURL: "http://github.example.com"}); err == nil {
		t.Error("an http:// base that is not loopback is accepted")
	}
}
