package stripetest_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/event"

	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
)

const key = "rk_test_reconcile_0123456789"

type page struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
	URL     string            `json:"url"`
}

type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Param   string `json:"param"`
		Message string `json:"message"`
	} `json:"error"`
}

// get calls the fake with the key as a bearer token.
func get(t *testing.T, s *stripetest.Server, path string, q url.Values) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// ids lists a page's event ids.
func ids(t *testing.T, body []byte) ([]string, bool) {
	t.Helper()
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("page: %v\n%s", err, body)
	}
	if p.Object != "list" || p.URL != "/v1/events" {
		t.Errorf("page object %q url %q, want list /v1/events", p.Object, p.URL)
	}
	var out []string
	for _, d := range p.Data {
		var e struct{ ID string }
		if err := json.Unmarshal(d, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e.ID)
	}
	return out, p.HasMore
}

// seed adds n events one second apart from base, oldest first, and returns
// their ids in that order.
func seed(s *stripetest.Server, base time.Time, n int, typ func(i int) string, delivered func(i int) bool) []string {
	var out []string
	for i := range n {
		ev := s.Add(typ(i), base.Add(time.Duration(i)*time.Second), map[string]any{"id": fmt.Sprintf("obj_%d", i)}, delivered(i))
		out = append(out, ev.ID)
	}
	return out
}

func always(int) bool        { return true }
func invoicePaid(int) string { return "invoice.paid" }
func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestAuthentication(t *testing.T) {
	s := stripetest.New(t, key)
	s.Add("invoice.paid", time.Now(), map[string]any{"id": "in_1"}, true)
	for _, tc := range []struct {
		name   string
		header string
		want   int
	}{
		{"Bearer", "Bearer " + key, 200},
		{"Basic", "Basic " + basic(key+":"), 200},
		{"NoKey", "", 401},
		{"WrongBearer", "Bearer sk_test_other", 401},
		{"WrongBasic", "Basic " + basic("sk_test_other:"), 401},
		{"OtherScheme", "Token " + key, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/events", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			status, body := do(t, req)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, body)
			}
			if status == 401 {
				var e apiError
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "invalid_request_error" {
					t.Errorf("401 body %s is not a Stripe error", body)
				}
			}
		})
	}
}

func basic(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestPagination(t *testing.T) {
	s := stripetest.New(t, key)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	all := seed(s, base, 7, invoicePaid, always) // oldest first
	newest := reversed(all)

	t.Run("NewestFirstWithLimit", func(t *testing.T) {
		status, body := get(t, s, "/v1/events", url.Values{"limit": {"3"}})
		got, more := ids(t, body)
		if status != 200 || !more {
			t.Fatalf("status %d has_more %t", status, more)
		}
		if diff := cmp.Diff(newest[:3], got); diff != "" {
			t.Errorf("first page (-want +got):\n%s", diff)
		}
	})
	t.Run("DefaultLimitIs10", func(t *testing.T) {
		_, body := get(t, s, "/v1/events", nil)
		got, more := ids(t, body)
		if len(got) != 7 || more {
			t.Errorf("%d events, has_more %t; want 7, false", len(got), more)
		}
	})
	t.Run("StartingAfterGoesOlder", func(t *testing.T) {
		_, body := get(t, s, "/v1/events", url.Values{"limit": {"3"}, "starting_after": {newest[2]}})
		got, more := ids(t, body)
		if diff := cmp.Diff(newest[3:6], got); diff != "" || !more {
			t.Errorf("has_more %t, page (-want +got):\n%s", more, diff)
		}
		_, body = get(t, s, "/v1/events", url.Values{"limit": {"3"}, "starting_after": {newest[5]}})
		got, more = ids(t, body)
		if diff := cmp.Diff(newest[6:], got); diff != "" || more {
			t.Errorf("last page: has_more %t, (-want +got):\n%s", more, diff)
		}
	})
	t.Run("EndingBeforeGivesTheNewerPageClosestToTheCursor", func(t *testing.T) {
		// From the oldest event, the three just newer, still newest first.
		_, body := get(t, s, "/v1/events", url.Values{"limit": {"3"}, "ending_before": {all[0]}})
		got, more := ids(t, body)
		if diff := cmp.Diff([]string{all[3], all[2], all[1]}, got); diff != "" || !more {
			t.Errorf("has_more %t, page (-want +got):\n%s", more, diff)
		}
		_, body = get(t, s, "/v1/events", url.Values{"limit": {"3"}, "ending_before": {all[3]}})
		got, more = ids(t, body)
		if diff := cmp.Diff([]string{all[6], all[5], all[4]}, got); diff != "" || more {
			t.Errorf("has_more %t, page (-want +got):\n%s", more, diff)
		}
	})
	t.Run("UnknownCursor", func(t *testing.T) {
		for _, param := range []string{"starting_after", "ending_before"} {
			status, body := get(t, s, "/v1/events", url.Values{param: {"evt_gone"}})
			var e apiError
			json.Unmarshal(body, &e)
			if status != 400 || e.Error.Param != param || e.Error.Code != "resource_missing" {
				t.Errorf("%s unknown: status %d, %s", param, status, body)
			}
		}
	})
	t.Run("BothCursors", func(t *testing.T) {
		status, _ := get(t, s, "/v1/events", url.Values{"starting_after": {all[1]}, "ending_before": {all[2]}})
		if status != 400 {
			t.Errorf("status %d, want 400", status)
		}
	})
	t.Run("LimitOutOfRange", func(t *testing.T) {
		for _, l := range []string{"0", "101", "x"} {
			if status, _ := get(t, s, "/v1/events", url.Values{"limit": {l}}); status != 400 {
				t.Errorf("limit %s: status %d, want 400", l, status)
			}
		}
	})
	t.Run("UnknownParameter", func(t *testing.T) {
		status, body := get(t, s, "/v1/events", url.Values{"sort": {"asc"}})
		if status != 400 {
			t.Errorf("status %d, want 400: %s", status, body)
		}
	})
}

func TestFilters(t *testing.T) {
	s := stripetest.New(t, key)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	types := []string{"invoice.paid", "invoice.created", "charge.refunded", "checkout.session.completed"}
	all := seed(s, base, 8, func(i int) string { return types[i%4] }, func(i int) bool { return i%3 != 0 })
	at := func(i int) string { return fmt.Sprint(base.Add(time.Duration(i) * time.Second).Unix()) }

	for _, tc := range []struct {
		name string
		q    url.Values
		want []int // indexes into all, oldest first
	}{
		{"Types", url.Values{"types[]": {"invoice.paid", "charge.refunded"}}, []int{0, 2, 4, 6}},
		{"TypesIndexed", url.Values{"types[0]": {"invoice.paid"}, "types[1]": {"charge.refunded"}}, []int{0, 2, 4, 6}},
		{"TypeWildcard", url.Values{"type": {"invoice.*"}}, []int{0, 1, 4, 5}},
		{"CreatedGte", url.Values{"created[gte]": {at(5)}}, []int{5, 6, 7}},
		{"CreatedGt", url.Values{"created[gt]": {at(5)}}, []int{6, 7}},
		{"CreatedLtLte", url.Values{"created[lt]": {at(2)}, "created[gte]": {at(0)}}, []int{0, 1}},
		{"CreatedExact", url.Values{"created": {at(3)}}, []int{3}},
		{"DeliveryFailed", url.Values{"delivery_success": {"false"}}, []int{0, 3, 6}},
		{"DeliverySucceeded", url.Values{"delivery_success": {"true"}}, []int{1, 2, 4, 5, 7}},
		{"Combined", url.Values{"delivery_success": {"false"}, "types[]": {"invoice.paid", "charge.refunded"}, "created[lte]": {at(5)}}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, s, "/v1/events", tc.q)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			got, _ := ids(t, body)
			var want []string
			for i := len(tc.want) - 1; i >= 0; i-- {
				want = append(want, all[tc.want[i]])
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("TypeAndTypes", func(t *testing.T) {
		if status, _ := get(t, s, "/v1/events", url.Values{"type": {"invoice.paid"}, "types[]": {"invoice.paid"}}); status != 400 {
			t.Errorf("status %d, want 400", status)
		}
	})
	t.Run("MoreThan20Types", func(t *testing.T) {
		q := url.Values{}
		for i := range 21 {
			q.Add("types[]", fmt.Sprintf("t.%d", i))
		}
		if status, _ := get(t, s, "/v1/events", q); status != 400 {
			t.Errorf("status %d, want 400", status)
		}
	})
	t.Run("CursorIsAPositionWhateverTheFilters", func(t *testing.T) {
		// all[1] is invoice.created: not selected, yet a valid cursor.
		_, body := get(t, s, "/v1/events", url.Values{"types[]": {"invoice.paid"}, "ending_before": {all[1]}})
		got, _ := ids(t, body)
		if diff := cmp.Diff([]string{all[4]}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestEventsServedByteForByte(t *testing.T) {
	s := stripetest.New(t, key)
	raw := []byte(`{"id":"evt_raw","object":"event","created":1700000000,"type":"invoice.paid",
  "data": {"object": {"id": "in_1", "amount_paid": 100}},   "a_field_from_the_future": [1, 2]}`)
	if _, err := s.AddRaw(raw, false); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, s, "/v1/events", nil)
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Data) != 1 || string(p.Data[0]) != string(raw) {
		t.Errorf("served %s, want exactly %s", p.Data, raw)
	}
	status, got := get(t, s, "/v1/events/evt_raw", nil)
	if status != 200 || string(got) != string(raw) {
		t.Errorf("GET /v1/events/evt_raw: %d %s", status, got)
	}
	if status, _ := get(t, s, "/v1/events/evt_none", nil); status != 404 {
		t.Errorf("unknown event: status %d, want 404", status)
	}
}

// TestStripeGoClient lists the fake with stripe-go v76 itself, paging
// forward (starting_after) and backward (ending_before), with the filters
// as stripe-go encodes them.
func TestStripeGoClient(t *testing.T) {
	s := stripetest.New(t, key)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	all := seed(s, base, 9, func(i int) string { return []string{"invoice.paid", "invoice.created"}[i%2] }, func(i int) bool { return i != 4 })
	client := event.Client{B: stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:           stripe.String(s.URL),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}), Key: key}

	list := func(p *stripe.EventListParams) []string {
		t.Helper()
		var out []string
		it := client.List(p)
		for it.Next() {
			out = append(out, it.Event().ID)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Run("Forward", func(t *testing.T) {
		p := &stripe.EventListParams{}
		p.Limit = stripe.Int64(2)
		if diff := cmp.Diff(reversed(all), list(p)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("BackwardFromTheOldest", func(t *testing.T) {
		p := &stripe.EventListParams{}
		p.Limit = stripe.Int64(2)
		p.EndingBefore = stripe.String(all[0])
		if diff := cmp.Diff(all[1:], list(p)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("Filters", func(t *testing.T) {
		p := &stripe.EventListParams{Types: stripe.StringSlice([]string{"invoice.paid"}), DeliverySuccess: stripe.Bool(false),
			CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: base.Unix()}}
		if diff := cmp.Diff([]string{all[4]}, list(p)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		last := s.Requests()[len(s.Requests())-1]
		if last.Query.Get("types[0]") != "invoice.paid" || last.Query.Get("delivery_success") != "false" ||
			last.Query.Get("created[gte]") != fmt.Sprint(base.Unix()) {
			t.Errorf("stripe-go sent %v", last.Query)
		}
	})
	t.Run("WrongKey", func(t *testing.T) {
		c := client
		c.Key = "rk_test_wrong"
		it := c.List(&stripe.EventListParams{})
		if it.Next() {
			t.Fatal("listed with a wrong key")
		}
		var se *stripe.Error
		if err := it.Err(); !errors.As(err, &se) || se.HTTPStatusCode != 401 {
			t.Errorf("error %v, want a 401", err)
		}
	})
}

func TestFailNextAndRemove(t *testing.T) {
	s := stripetest.New(t, key)
	ev := s.Add("invoice.paid", time.Now(), map[string]any{"id": "in_1"}, true)
	s.FailNext(500, 1)
	if status, _ := get(t, s, "/v1/events", nil); status != 500 {
		t.Errorf("injected failure: status %d", status)
	}
	if status, _ := get(t, s, "/v1/events", nil); status != 200 {
		t.Errorf("after the failure: status %d", status)
	}
	s.Remove(ev.ID)
	if status, _ := get(t, s, "/v1/events", url.Values{"ending_before": {ev.ID}}); status != 400 {
		t.Errorf("cursor of a removed event: status %d, want 400", status)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests recorded, want 3", n)
	}
}
