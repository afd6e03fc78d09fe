package github_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	github "github.com/paywebhooks/receiver/internal/providers/github"
	"github.com/paywebhooks/receiver/internal/providers/github/githubtest"
)

func TestGitHubAPIListsEveryPage(t *testing.T) {
	gh := githubtest.New(t, testAppID)
	for i := range 3 {
		gh.AddPlan(githubtest.ListingTier{ID: int64(10 + i), Name: fmt.Sprintf("Plan %d", i), MonthlyPriceInCents: 100 * (i + 1), PriceModel: "FLAT_RATE"})
	}
	updated := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	var want []int64
	for i := range 250 {
		id := int64(5000 + i)
		want = append(want, id)
		gh.Subscribe(11, githubtest.Account{ID: id, Login: fmt.Sprint("org", i), UnitCount: i % 3, BillingCycle: "yearly", UpdatedAt: updated})
	}
	gh.Subscribe(12, githubtest.Account{ID: 9, Login: "moving", PendingChange: &githubtest.PendingChange{ID: 1, PlanID: 10, EffectiveDate: updated}})

	api, err := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: gh.PrivateKeyPEM(), BaseURL: strings.TrimSuffix(gh.URL, "/")})
	if err != nil {
		t.Fatal(err)
	}
	plans, err := api.Tiers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 3 || plans[1].ID != 11 || plans[1].Name != "Plan 1" || plans[1].MonthlyPriceInCents != 200 || plans[1].PriceModel != "FLAT_RATE" {
		t.Errorf("plans %+v", plans)
	}
	accounts, err := api.Accounts(context.Background(), 11)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, a := range accounts {
		got = append(got, a.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accounts (-want +got):\n%s", diff)
	}
	a := accounts[2]
	if a.Login != "org2" || a.BillingCycle != "yearly" || a.UnitCount != 2 || !a.UpdatedAt.Equal(updated) || a.Plan.ID != 11 || a.Type != "Organization" {
		t.Errorf("account %+v", a)
	}
	pages := 0
	for _, r := range gh.Requests() {
		if r.Path == "/marketplace_listing/plans/11/accounts" {
			pages++
			if r.Query.Get("per_page") != "100" {
				t.Errorf("request %v without per_page=100", r.Query)
			}
		}
	}
	if pages != 3 {
		t.Errorf("%d pages of accounts, want 3", pages)
	}
	moving, err := api.Accounts(context.Background(), 12)
	if err != nil || len(moving) != 1 || moving[0].PendingChange == nil || moving[0].PendingChange.PlanID != 10 {
		t.Errorf("pending change: %+v %v", moving, err)
	}
	if _, err := api.Accounts(context.Background(), 99); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown plan: %v", err)
	}
}

func TestGitHubAPIAuthenticatesAsTheApp(t *testing.T) {
	gh := githubtest.New(t, testAppID)
	gh.AddPlan(githubtest.ListingTier{ID: 1, Name: "Free", PriceModel: "FREE"})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})

	for _, tc := range []struct {
		name  string
		appID int64
		key   []byte
		ok    bool
	}{
		{"TheApp", testAppID, gh.PrivateKeyPEM(), true},
		{"AnotherKey", testAppID, otherPEM, false},
		{"AnotherApp", testAppID + 1, gh.PrivateKeyPEM(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, err := github.NewAPI(github.APIConfig{AppID: tc.appID, PrivateKey: tc.key, BaseURL: gh.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = api.Tiers(context.Background())
			if tc.ok != (err == nil) {
				t.Errorf("error %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "401") {
				t.Errorf("error %v, want a 401", err)
			}
		})
	}
	t.Run("ClockAhead", func(t *testing.T) {
		// GitHub refuses a JWT whose exp is more than ten minutes away:
		// ghinstallation's is two minutes after a backdated iat.
		gh.SetClock(func() time.Time { return time.Now().Add(-9 * time.Minute) })
		defer gh.SetClock(time.Now)
		api, _ := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: gh.PrivateKeyPEM(), BaseURL: gh.URL})
		if _, err := api.Tiers(context.Background()); err == nil {
			t.Error("a JWT issued nine minutes in the server's future was accepted")
		}
	})
	t.Run("Stubbed", func(t *testing.T) {
		api, _ := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: gh.PrivateKeyPEM(), BaseURL: gh.URL, Stubbed: true})
		if _, err := api.Tiers(context.Background()); err != nil {
			t.Fatal(err)
		}
		if last := gh.Requests()[len(gh.Requests())-1]; last.Path != "/marketplace_listing/stubbed/plans" {
			t.Errorf("stubbed listing requested %s", last.Path)
		}
	})
	t.Run("BadKey", func(t *testing.T) {
		if _, err := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: []byte("not a key"), BaseURL: gh.URL}); err == nil {
			t.Error("a client with no key")
		}
		if _, err := github.NewAPI(github.APIConfig{PrivateKey: gh.PrivateKeyPEM()}); err == nil {
			t.Error("a client with no app id")
		}
	})
}

func TestReadPrivateKey(t *testing.T) {
	gh := githubtest.New(t, testAppID)
	pemText := string(gh.PrivateKeyPEM())
	path := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(path, []byte(pemText), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, value string }{
		{"Text", pemText},
		{"TextWithBlanks", "\n  " + pemText + "  \n"},
		{"Path", path},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := github.ReadPrivateKey(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := github.NewAPI(github.APIConfig{AppID: testAppID, PrivateKey: b, BaseURL: gh.URL}); err != nil {
				t.Errorf("key read from %s: %v", tc.name, err)
			}
		})
	}
	for _, bad := range []string{"", filepath.Join(t.TempDir(), "missing.pem")} {
		if _, err := github.ReadPrivateKey(bad); err == nil {
			t.Errorf("github.ReadPrivateKey(%q) accepted", bad)
		}
	}
}
