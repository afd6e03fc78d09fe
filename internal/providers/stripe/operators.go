package stripe

import (
	"github.com/paywebhooks/receiver/internal/ops"
	"github.com/paywebhooks/receiver/internal/providers/stripe/invoices"
)

// Owners are the owners of the tables this folder keeps, which operators
// read beside the receiver's own (registry.Provider.Owners): its invoices
// (and their failed payments).
var Owners = []ops.Owner{invoices.Owner{}}
