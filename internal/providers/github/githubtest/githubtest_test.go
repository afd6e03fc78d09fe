package githubtest_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/providers/github/githubtest"
)

const appID = 4242

func call(t *testing.T, url, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

func claims(iat, exp int64, iss any) map[string]any {
	return map[string]any{"iat": iat, "exp": exp, "iss": iss}
}

func TestJWT(t *testing.T) {
	s := githubtest.New(t, appID)
	s.AddPlan(githubtest.ListingTier{ID: 1, Name: "Pro", PriceModel: "FLAT_RATE"})
	now := time.Now().Unix()
	other := githubtest.New(t, appID) // same app id, another key

	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"OK", s.Sign(claims(now-30, now+90, fmt.Sprint(appID))), 200},
		{"IssAsNumber", s.Sign(claims(now-30, now+90, appID)), 200},
		{"NoToken", "", 401},
		{"NotAJWT", "ghs_installationtoken", 401},
		{"SignedWithAnotherKey", other.Sign(claims(now-30, now+90, fmt.Sprint(appID))), 401},
		{"OtherApp", s.Sign(claims(now-30, now+90, "99")), 401},
		{"Expired", s.Sign(claims(now-700, now-100, fmt.Sprint(appID))), 401},
		{"ExpTooFar", s.Sign(claims(now, now+660, fmt.Sprint(appID))), 401},
		{"IssuedInTheFuture", s.Sign(claims(now+120, now+300, fmt.Sprint(appID))), 401},
		{"FractionalTimes", s.Sign(map[string]any{"iat": float64(now) - 0.5, "exp": float64(now) + 60.5, "iss": fmt.Sprint(appID)}), 401},
		{"AlgNone", unsigned(fmt.Sprint(appID), now), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := call(t, s.URL+"marketplace_listing/plans", tc.token)
			if status != tc.want {
				t.Errorf("status %d, want %d: %s", status, tc.want, body)
			}
			if status == 401 {
				var m struct{ Message string }
				if json.Unmarshal(body, &m) != nil || m.Message == "" {
					t.Errorf("401 without GitHub's message: %s", body)
				}
			}
		})
	}
}

// unsigned is a JWT with alg none.
func unsigned(iss string, now int64) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none"}) + "." + enc(claims(now-30, now+60, iss)) + "."
}

func token(s *githubtest.Server) string {
	now := time.Now().Unix()
	return s.Sign(claims(now-30, now+90, fmt.Sprint(s.AppID)))
}

func TestPlansAndAccounts(t *testing.T) {
	s := githubtest.New(t, appID)
	s.AddPlan(githubtest.ListingTier{ID: 7, Number: 1, Name: "Pro", MonthlyPriceInCents: 1500, YearlyPriceInCents: 15000, PriceModel: "FLAT_RATE"})
	s.AddPlan(githubtest.ListingTier{ID: 8, Number: 2, Name: "Team", MonthlyPriceInCents: 500, PriceModel: "PER_UNIT", UnitName: "seat"})
	updated := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		s.Subscribe(8, githubtest.Account{ID: int64(100 + i), Login: fmt.Sprintf("org%d", i), UnitCount: 3,
			OrganizationBillingEmail: fmt.Sprintf("billing@org%d.example", i), UpdatedAt: updated.Add(time.Duration(-i) * time.Hour)})
	}
	s.Subscribe(7, githubtest.Account{ID: 200, Login: "solo", Type: "User", BillingCycle: "yearly",
		PendingChange: &githubtest.PendingChange{ID: 1, EffectiveDate: updated.AddDate(0, 1, 0), PlanID: 8, UnitCount: 2}})
	tok := token(s)

	t.Run("Plans", func(t *testing.T) {
		status, _, body := call(t, s.URL+"marketplace_listing/plans", tok)
		var plans []map[string]any
		if err := json.Unmarshal(body, &plans); status != 200 || err != nil {
			t.Fatalf("status %d: %s", status, body)
		}
		if len(plans) != 2 || plans[0]["price_model"] != "FLAT_RATE" || plans[1]["unit_name"] != "seat" ||
			plans[0]["state"] != "published" || plans[0]["accounts_url"] != s.URL+"marketplace_listing/plans/7/accounts" {
			t.Errorf("plans: %s", body)
		}
	})
	t.Run("AccountShape", func(t *testing.T) {
		_, _, body := call(t, s.URL+"marketplace_listing/plans/7/accounts", tok)
		var accounts []struct {
			Type, Login string
			ID          int64
			Purchase    struct {
				BillingCycle string  `json:"billing_cycle"`
				UnitCount    *int    `json:"unit_count"`
				UpdatedAt    *string `json:"updated_at"`
				Plan         struct{ ID int64 }
			} `json:"marketplace_purchase"`
			Pending *struct {
				Plan struct{ ID int64 }
			} `json:"marketplace_pending_change"`
		}
		if err := json.Unmarshal(body, &accounts); err != nil || len(accounts) != 1 {
			t.Fatalf("%v: %s", err, body)
		}
		a := accounts[0]
		if a.Type != "User" || a.ID != 200 || a.Purchase.BillingCycle != "yearly" || a.Purchase.UnitCount != nil ||
			a.Purchase.UpdatedAt != nil || a.Purchase.Plan.ID != 7 || a.Pending == nil || a.Pending.Plan.ID != 8 {
			t.Errorf("account: %s", body)
		}
	})
	t.Run("LinkPaging", func(t *testing.T) {
		var got []int64
		url := s.URL + "marketplace_listing/plans/8/accounts?per_page=2"
		pages := 0
		for url != "" {
			status, h, body := call(t, url, tok)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			var accounts []struct{ ID int64 }
			json.Unmarshal(body, &accounts)
			for _, a := range accounts {
				got = append(got, a.ID)
			}
			url = next(h.Get("Link"))
			pages++
			if pages == 1 && !strings.Contains(h.Get("Link"), `rel="last"`) {
				t.Errorf("first page Link %q has no last", h.Get("Link"))
			}
			if pages == 2 && !strings.Contains(h.Get("Link"), `rel="prev"`) {
				t.Errorf("second page Link %q has no prev", h.Get("Link"))
			}
		}
		if diff := cmp.Diff([]int64{100, 101, 102, 103, 104}, got); diff != "" || pages != 3 {
			t.Errorf("%d pages, accounts (-want +got):\n%s", pages, diff)
		}
	})
	t.Run("SortUpdatedAsc", func(t *testing.T) {
		_, _, body := call(t, s.URL+"marketplace_listing/plans/8/accounts?sort=updated&direction=asc", tok)
		var accounts []struct{ ID int64 }
		json.Unmarshal(body, &accounts)
		var got []int64
		for _, a := range accounts {
			got = append(got, a.ID)
		}
		if diff := cmp.Diff([]int64{104, 103, 102, 101, 100}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("Stubbed", func(t *testing.T) {
		if status, _, _ := call(t, s.URL+"marketplace_listing/stubbed/plans", tok); status != 200 {
			t.Errorf("status %d", status)
		}
	})
	t.Run("UnknownPlan", func(t *testing.T) {
		if status, _, _ := call(t, s.URL+"marketplace_listing/plans/9/accounts", tok); status != 404 {
			t.Errorf("status %d, want 404", status)
		}
	})
	t.Run("Unsubscribe", func(t *testing.T) {
		s.Unsubscribe(200)
		_, _, body := call(t, s.URL+"marketplace_listing/plans/7/accounts", tok)
		if strings.TrimSpace(string(body)) != "[]" {
			t.Errorf("after unsubscribe: %s", body)
		}
	})
	t.Run("FailNext", func(t *testing.T) {
		s.FailNext(502, 1)
		if status, _, _ := call(t, s.URL+"marketplace_listing/plans", tok); status != 502 {
			t.Errorf("status %d, want 502", status)
		}
		if status, _, _ := call(t, s.URL+"marketplace_listing/plans", tok); status != 200 {
			t.Errorf("after the failure: status %d", status)
		}
	})
}

// next reads the rel="next" URL of a Link header.
func next(link string) string {
	for _, part := range strings.Split(link, ",") {
		url, rel, ok := strings.Cut(strings.TrimSpace(part), ";")
		if ok && strings.TrimSpace(rel) == `rel="next"` {
			return strings.Trim(url, "<>")
		}
	}
	return ""
}
