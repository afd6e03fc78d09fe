package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/reconcile/reconciletest"
)

// TestStripeRunStopsAtABound: against an API that pages wrongly, a run
// stops after a few requests instead of for ever, names the cause, is
// recorded as an error, keeps what it reconciled and releases its lock.
func TestStripeRunStopsAtABound(t *testing.T) {
	for _, c := range []struct {
		name      string
		misbehave stripetest.Misbehaviour
		limits    reconcile.Limits
		want      error
		requests  int // at most
	}{
		// Every list request answered with the same page and has_more: the
		// listing is handed the same cursor again.
		{"RepeatPage", stripetest.RepeatPage, reconcile.Limits{}, reconcile.ErrCursorRepeated, 20},
		// An empty page that says more follows: before, the run ended as if
		// the listing were complete.
		{"EmptyMore", stripetest.EmptyMore, reconcile.Limits{}, reconcile.ErrNoProgress, 5},
		// Fresh events for ever: the run's pages and requests are bounded.
		{"EndlessPages", stripetest.Endless, reconcile.Limits{MaxPages: 30}, reconcile.ErrTooManyPages, 40},
		{"EndlessRequests", stripetest.Endless, reconcile.Limits{MaxRequests: 25}, reconcile.ErrTooManyRequests, 25},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newStripeEnv(t, 3)
			first := e.add(2, -3*time.Hour)
			if _, err := e.rec.Run(context.Background(), reconcile.Options{Since: 4 * time.Hour}); err != nil {
				t.Fatal(err)
			}
			e.add(4, -2*time.Hour)
			e.rec.Limits = c.limits
			e.api.Misbehave(c.misbehave)
			before := len(e.api.Requests())
			done := make(chan struct{})
			var sum reconcile.EventSummary
			var err error
			go func() {
				defer close(done)
				sum, err = e.rec.Run(context.Background(), reconcile.Options{Resume: true})
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("the run is still going after a minute, %d requests", len(e.api.Requests()))
			}
			if !errors.Is(err, c.want) || !errors.Is(err, reconcile.ErrStopped) || !strings.HasPrefix(err.Error(), "reconcile stripe: stopped: ") {
				t.Errorf("error %v, want %v", err, c.want)
			}
			if n := len(e.api.Requests()) - before; n > c.requests {
				t.Errorf("%d requests, want at most %d", n, c.requests)
			}
			runs, _ := e.store.Runs(context.Background(), stripe.Source, 1)
			if len(runs) != 1 || runs[0].Result != "error" || runs[0].Error != err.Error() {
				t.Errorf("recorded runs %+v", runs)
			}
			if release, err := e.store.Lock(context.Background(), stripe.Source); err != nil {
				t.Errorf("the lock after the run: %v", err)
			} else {
				release()
			}
			c, _, _ := e.store.Cursor(context.Background(), stripe.Source, "")
			if c.ID == "" || c.Created.Before(first[1].Created) {
				t.Errorf("cursor %+v after the stopped run, want at %s or later", c, first[1].ID)
			}
			t.Logf("%d requests; %s; %v", len(e.api.Requests())-before, sum, err)
		})
	}

	t.Run("Timeout", func(t *testing.T) {
		e := newStripeEnv(t, 3)
		hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		defer hanging.Close()
		e.rec.Lister = newStripeAPI(t, &stripetest.Server{URL: hanging.URL, Key: stripeKey}, 3)
		e.rec.Limits = reconcile.Limits{Timeout: 300 * time.Millisecond}
		_, err := e.rec.Run(context.Background(), reconcile.Options{Since: time.Hour})
		if !errors.Is(err, reconcile.ErrTimeout) {
			t.Errorf("error %v, want ErrTimeout", err)
		}
		if release, err := e.store.Lock(context.Background(), stripe.Source); err != nil {
			t.Errorf("the lock after the run: %v", err)
		} else {
			release()
		}
	})
}

// TestStripeRunKeepsItsKeyAtItsOrigin: an API that redirects to another
// origin (here another port of the same host, to which Go's own client
// would forward the Authorization header) gets neither the key nor the
// Stripe-Account header there.
func TestStripeRunKeepsItsKeyAtItsOrigin(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.Header.Get("Authorization")+" "+r.Header.Get("Stripe-Account"))
		mu.Unlock()
		w.Write([]byte(`{"object": "list", "data": [], "has_more": false, "url": "/v1/events"}`))
	}))
	defer other.Close()
	e := newStripeEnv(t, 3)
	e.add(2, -time.Hour)
	e.api.AddFor("acct_1", "invoice.paid", e.now.Add(-time.Hour), map[string]any{"id": "in_a"}, false)
	e.rec.Accounts = []string{"acct_1"}
	e.api.RedirectTo(other.URL)
	_, err := e.rec.Run(context.Background(), reconcile.Options{Since: 2 * time.Hour})
	if !errors.Is(err, reconcile.ErrRedirect) {
		t.Errorf("error %v, want ErrRedirect", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) > 0 {
		t.Errorf("the other origin was sent %q", heard)
	}
}

func TestStripeAPIBaseMustBeHTTPS(t *testing.T) {
	if _, err := stripe.NewAPI(stripe.APIConfig{Key: stripeKey, BaseURL: "http://api.stripe.com"}); err == nil {
		t.Error("an http:// base that is not loopback is accepted")
	}
}

// TestStripeConnectAccounts: a run lists the platform's events, then each
// listed connected account's, with the Stripe-Account header, each with a
// cursor of its own.
func TestStripeConnectAccounts(t *testing.T) {
	e := newStripeEnv(t, 2)
	platform := e.add(3, -2*time.Hour)
	var a, b []stripetest.Event
	for i := range 3 {
		a = append(a, e.api.AddFor("acct_A", "invoice.paid", e.now.Add(-90*time.Minute+time.Duration(i)*time.Minute),
			map[string]any{"id": "in_a" + string(rune('0'+i))}, false))
	}
	b = append(b, e.api.AddFor("acct_B", "charge.refunded", e.now.Add(-80*time.Minute), map[string]any{"id": "ch_b"}, true))
	e.api.AddFor("acct_C", "invoice.paid", e.now.Add(-80*time.Minute), map[string]any{"id": "in_c"}, false) // not listed
	e.deliver(t, a[0])
	e.rec.Accounts = []string{"acct_A", "acct_B"}

	var lines []string
	sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 3 * time.Hour,
		OnEvent: func(r reconcile.EventReport) { lines = append(lines, r.Account+" "+r.ID+" "+string(r.Disposition)) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != 7 || sum.Known != 1 || sum.Processed != 6 || len(sum.Accounts) != 2 ||
		sum.Accounts[0].Found != 3 || sum.Accounts[0].Processed != 2 || sum.Accounts[1].Processed != 1 {
		t.Errorf("summary %+v", sum)
	}
	want := []string{
		" " + platform[0].ID + " processed", " " + platform[1].ID + " processed", " " + platform[2].ID + " processed",
		"acct_A " + a[0].ID + " known", "acct_A " + a[1].ID + " processed", "acct_A " + a[2].ID + " processed",
		"acct_B " + b[0].ID + " processed",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Each account's events were asked for with its header, and only them.
	for _, r := range e.api.Requests() {
		if r.Account == "acct_C" || r.Status != http.StatusOK {
			t.Errorf("request %+v", r)
		}
	}
	for _, scope := range []string{"", "account=acct_A", "account=acct_B"} {
		if _, ok, err := e.store.Cursor(context.Background(), stripe.Source, scope); !ok || err != nil {
			t.Errorf("no cursor for scope %q: %v", scope, err)
		}
	}
	if s := sum.String(); !strings.Contains(s, "acct_A: 3 found, 1 already known, 2 processed") {
		t.Errorf("summary reads %q", s)
	}

	t.Run("Resume", func(t *testing.T) {
		newer := e.api.AddFor("acct_B", "invoice.paid", e.now.Add(-10*time.Minute), map[string]any{"id": "in_b2"}, false)
		before := len(e.proc.Processed())
		sum, err := e.rec.Run(context.Background(), reconcile.Options{Resume: true})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{newer.ID}, reconciletest.KeysOf(e.proc.Processed()[before:])); diff != "" {
			t.Errorf("processed (-want +got):\n%s", diff)
		}
		if sum.Found != 1 || sum.Accounts[1].From.ID != b[0].ID {
			t.Errorf("summary %+v", sum)
		}
	})
	t.Run("AnAccountThatFails", func(t *testing.T) {
		e.rec.Accounts = []string{"acct_gone", "acct_A"}
		newer := e.api.AddFor("acct_A", "invoice.paid", e.now.Add(-5*time.Minute), map[string]any{"id": "in_a9"}, false)
		before := len(e.proc.Processed())
		sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 3 * time.Hour})
		if err == nil || !strings.Contains(err.Error(), "account acct_gone") {
			t.Errorf("error %v, want acct_gone's", err)
		}
		if diff := cmp.Diff([]string{newer.ID}, reconciletest.KeysOf(e.proc.Processed()[before:])); diff != "" {
			t.Errorf("the other account: processed (-want +got):\n%s", diff)
		}
		if sum.Accounts[0].Error == "" {
			t.Errorf("summary %+v", sum)
		}
	})
	t.Run("Star", func(t *testing.T) {
		e.rec.Accounts, e.rec.Note = nil, stripe.NoteAllAccounts
		sum, err := e.rec.Run(context.Background(), reconcile.Options{Since: 3 * time.Hour})
		if err != nil || sum.Note != stripe.NoteAllAccounts || len(sum.Accounts) != 0 || sum.Found != 3 {
			t.Errorf("%+v %v", sum, err)
		}
		if !strings.Contains(sum.String(), "cannot enumerate") {
			t.Errorf("summary reads %q", sum.String())
		}
	})
}

func TestParseConnectAccounts(t *testing.T) {
	for _, c := range []struct {
		v        string
		accounts []string
		all, ok  bool
	}{
		{"", nil, false, true},
		{"acct_1, acct_2,acct_1", []string{"acct_1", "acct_2"}, false, true},
		{"*", nil, true, true},
		{"*,acct_1", nil, false, false},
		{"acct_", nil, false, false},
		{"cus_1", nil, false, false},
		{"acct_1/x", nil, false, false},
		{"acct_1,,acct_2", nil, false, false},
	} {
		accounts, all, err := stripe.ParseConnectAccounts(c.v)
		if (err == nil) != c.ok || all != c.all || !cmp.Equal(accounts, c.accounts) {
			t.Errorf("ParseConnectAccounts(%q) = %v %t %v", c.v, accounts, all, err)
		}
	}
}
