package endpoints

import (
	"context"
	"errors"

	"github.com/paywebhooks/receiver/internal/reconcile"
)

// List reads a listing of a provider's endpoint settings whole, every page
// of it, within the run's bounds: the pages are followed with
// reconcile.Pages (a cursor given twice, or more announced after a page
// that brought nothing new, stops the run), and what is held is bounded by
// reconcile.Hold. page fetches the page of cursor ("" for the first) and
// returns its items, whether the API says more follow, and the cursor of
// the next page: "" for the id of the page's last item (a listing that
// goes on after an id), or the next page's number (one that counts its
// pages). An item
// is kept the first time it is listed, by its id; one without an id is
// passed over. The listing ends with a page that says no more follow, or
// that is empty.
func List[T any](ctx context.Context, id func(T) string, page func(cursor string) (items []T, more bool, next string, err error)) ([]T, error) {
	pages, held := reconcile.NewPages(ctx), reconcile.Hold(ctx)
	seen := map[string]bool{}
	var out []T
	cursor := ""
	for {
		if err := pages.Next(cursor); err != nil {
			return nil, err
		}
		items, more, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, it := range items {
			if k := id(it); k != "" && !seen[k] {
				seen[k] = true
				fresh++
				out = append(out, it)
			}
		}
		if err := errors.Join(pages.Got(fresh, more), held.Add(fresh)); err != nil {
			return nil, err
		}
		if !more || len(items) == 0 {
			return out, nil
		}
		cursor = next
		if cursor == "" {
			cursor = id(items[len(items)-1])
		}
	}
}
