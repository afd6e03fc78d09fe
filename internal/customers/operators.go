package customers

import "github.com/paywebhooks/receiver/internal/ops"

// Owner is the customers' account to operators (ops.Owner): a customer's
// id finds the last event that gave its address. An event's records show
// no customer: its address is in the orders and invoices shown.
type Owner struct{}

// Name is the name of customers among the owners.
func (Owner) Name() string { return "customers" }

// Related reads nothing: no event's records show a customer's row.
func (Owner) Related(ops.Concern) ops.Lookup { return ops.Lookup{} }

// Search finds the last event applied to the customer the text names.
func (Owner) Search(t *ops.Term) ops.Search {
	return t.LastEventOf("customers", "customer_id")
}
