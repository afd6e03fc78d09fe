package wiring

import (
	"github.com/paywebhooks/receiver/internal/customers"
	"github.com/paywebhooks/receiver/internal/disputes"
	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/subscriptions"
)

// Owners returns the owners of the business tables operators read
// (ops.Owner: an event's records, a search), in the order of an event's
// records: the orders, the tables of the providers of list (Stripe's
// invoices), the refunds, subscriptions and disputes, and the customers
// (searched, never shown). The console, `events show` and the API all read
// through the owners it returns, so a table a fork adds is one line here
// (or, a provider's own, its registry line's Owners).
func Owners(list []registry.Provider) []ops.Owner {
	out := []ops.Owner{orders.Owner{}}
	out = append(out, registry.Owners(list)...)
	return append(out, orders.RefundsOwner{}, subscriptions.Owner{}, disputes.Owner{}, customers.Owner{})
}
