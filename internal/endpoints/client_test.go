package endpoints_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/paywebhooks/receiver/internal/endpoints"
	"github.com/paywebhooks/receiver/internal/reconcile"
)

// TestList: a listing is read whole, every page, each item once by its id
// (one without is passed over), the next page after the last item's id or
// at the number the page gives; a cursor given twice, more announced after
// a page with nothing new (an empty one too), and a page's error end it.
func TestList(t *testing.T) {
	id := func(s string) string { return s }
	// byID answers the pages of a listing that goes on after an id.
	byID := func(pages map[string][]string, more map[string]bool) func(string) ([]string, bool, string, error) {
		return func(after string) ([]string, bool, string, error) { return pages[after], more[after], "", nil }
	}
	t.Run("AfterTheLastID", func(t *testing.T) {
		var asked []string
		page := byID(map[string][]string{"": {"a", "b"}, "b": {"b", "", "c"}, "c": {"d"}}, map[string]bool{"": true, "b": true})
		got, err := endpoints.List(context.Background(), id, func(after string) ([]string, bool, string, error) {
			asked = append(asked, after)
			return page(after)
		})
		if err != nil || !slices.Equal(got, []string{"a", "b", "c", "d"}) || !slices.Equal(asked, []string{"", "b", "c"}) {
			t.Errorf("got %q, %v; pages asked %q", got, err, asked)
		}
	})
	t.Run("ByNumber", func(t *testing.T) {
		got, err := endpoints.List(context.Background(), id, func(cursor string) ([]string, bool, string, error) {
			n := 1
			if cursor != "" {
				n, _ = strconv.Atoi(cursor)
			}
			return []string{"p" + strconv.Itoa(n)}, n < 3, strconv.Itoa(n + 1), nil
		})
		if err != nil || !slices.Equal(got, []string{"p1", "p2", "p3"}) {
			t.Errorf("got %q, %v", got, err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		got, err := endpoints.List(context.Background(), id, byID(nil, nil))
		if err != nil || got != nil {
			t.Errorf("got %q, %v", got, err)
		}
	})
	n := 0
	for name, c := range map[string]struct {
		page func(string) ([]string, bool, string, error)
		want error
	}{
		"CursorRepeated": {func(string) ([]string, bool, string, error) {
			n++
			return []string{strconv.Itoa(n)}, true, "again", nil
		}, reconcile.ErrCursorRepeated},
		"NoProgress": {byID(map[string][]string{"": {"a"}, "a": {"a"}}, map[string]bool{"": true, "a": true}), reconcile.ErrNoProgress},
		"PageFails":  {func(string) ([]string, bool, string, error) { return nil, false, "", errBoom }, errBoom},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := endpoints.List(context.Background(), id, c.page)
			if !errors.Is(err, c.want) || got != nil {
				t.Errorf("got %q, %v; want %v", got, err, c.want)
			}
		})
	}
}

var errBoom = errors.New("boom")

// TestClientOf: a provider's calls on its own type make a Client, an
// Updater and a Creator; what they answer is read by Read, what fails
// fails as it did.
func TestClientOf(t *testing.T) {
	type hook struct{ id, at string }
	var fail error
	c := endpoints.ClientOf[hook]{
		List: func(context.Context) ([]hook, error) { return []hook{{"a", "/x"}, {"b", "/y"}}, fail },
		Read: func(h hook) endpoints.Endpoint {
			return endpoints.Endpoint{ID: h.id, URL: "https://pay.example.com" + h.at}
		},
		Apply: func(_ context.Context, ep endpoints.Endpoint, ch endpoints.Change) (hook, error) {
			return hook{ep.ID, "/changed"}, fail
		},
		Add: func(_ context.Context, url string, _ []string, _ string) (hook, string, error) {
			return hook{"new", "/created"}, "whsec", fail
		},
	}
	var client endpoints.Client = c
	eps, err := client.Endpoints(context.Background())
	if err != nil || len(eps) != 2 || eps[1].ID != "b" || eps[1].URL != "https://pay.example.com/y" {
		t.Errorf("Endpoints: %+v, %v", eps, err)
	}
	ep, err := client.(endpoints.Updater).Update(context.Background(), endpoints.Endpoint{ID: "a"}, endpoints.Change{Enable: true})
	if err != nil || ep.ID != "a" || ep.URL != "https://pay.example.com/changed" {
		t.Errorf("Update: %+v, %v", ep, err)
	}
	ep, secret, err := client.(endpoints.Creator).Create(context.Background(), "https://pay.example.com/created", nil, "")
	if err != nil || ep.ID != "new" || secret != "whsec" {
		t.Errorf("Create: %+v, %q, %v", ep, secret, err)
	}
	fail = errBoom
	if eps, err := client.Endpoints(context.Background()); eps != nil || !errors.Is(err, errBoom) {
		t.Errorf("Endpoints failing: %+v, %v", eps, err)
	}
	if ep, err := client.(endpoints.Updater).Update(context.Background(), endpoints.Endpoint{ID: "a"}, endpoints.Change{}); ep.ID != "" || !errors.Is(err, errBoom) {
		t.Errorf("Update failing: %+v, %v", ep, err)
	}
	if ep, secret, err := client.(endpoints.Creator).Create(context.Background(), "u", nil, ""); ep.ID != "" || secret != "" || !errors.Is(err, errBoom) {
		t.Errorf("Create failing: %+v, %q, %v", ep, secret, err)
	}
}
