// Package sales says, once for every provider, what a sale sets off: the
// email that confirms it and the call to the fulfillment API. A provider's
// plan decides that an order has become a sale (a paid Checkout Session, a
// completed Paddle transaction, a paid Polar order, a Marketplace purchase,
// a refund that failed after the order had started refunded) and calls
// Plan with the condition that says so; it never plans these steps itself.
//
// # Once per sale, whichever path comes first
//
// The steps are those of the order, not of the event that happened to
// make it a sale: each is a step of the business object "order:<source>:
// <external id>" (webhooks.Step.Object, named here by the condition, in
// SQL, since a path may know its order only by a payment: a refund's), so
// that a second path to the same sale (the event after a checkout return,
// a catch-up after a fail-over that lost the first path's commit, a thin
// event's recovery) plans nothing more, and a step that must run again
// sends the same Message-ID and Idempotency-Key, whoever planned it.
//
// # The order, as the sale left it
//
// The condition is one of internal/orders' (orders.Changed, RestoredSale):
// it holds when this transaction wrote the order into a sold status, and
// its row is the order as this transaction left it. That row reaches the
// email and the call as an orders.Order (mail.Email.Order,
// fulfillment.Payload.Order): decided and read in the same statement that
// plans the step, so that the confirmation tells what the sale was even
// when a refund follows before the email goes, and a step with no address
// to write to is known skipped when it is planned.
package sales

import (
	"strconv"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Step names of a sale, the same for every provider.
const (
	StepConfirmation = "email.confirmation"
	StepFulfillment  = "fulfillment"
)

// Sale is what a provider's sale says besides its order.
type Sale struct {
	// Email is the message that confirms the sale (its template, its
	// recipient: To, else the order's address, else Notify; Data). A zero
	// Template plans none.
	Email mail.Email
	// EmailStep names the email's step; "": StepConfirmation.
	EmailStep string
	// OnlyWithAddress plans the email only for an order with an address;
	// otherwise an email with no recipient is recorded skipped.
	OnlyWithAddress bool
	// NoFulfillment: the sale is not the fulfillment API's (a sponsorship).
	NoFulfillment bool
	// Again tells this sale of the order from an earlier sale of the same
	// order (a Marketplace purchase after a cancellation: its effective
	// date); "" for an order that is sold once.
	Again string
}

// Plan queues on plan the consequences of a sale: for the order that cond
// (a step condition of internal/orders, with args) selects when this
// transaction made it a sale, its email and its fulfillment call, each a
// step of the order.
func Plan(plan *webhooks.Plan, s Sale, cond string, args ...any) {
	cond = OfOrder(cond, s.Again, len(args))
	if s.Again != "" {
		args = append(args, s.Again)
	}
	if s.Email.Template != "" {
		name := s.EmailStep
		if name == "" {
			name = StepConfirmation
		}
		c := cond
		if s.OnlyWithAddress {
			c = WithAddress(c)
		}
		plan.StepIf(mail.Step(name, s.Email), c, args...)
	}
	if !s.NoFulfillment {
		plan.StepIf(fulfillment.Step(StepFulfillment), cond, args...)
	}
}

// OfOrder makes cond (a condition that puts an order in the step's payload
// as "order", with n arguments) name the step's object: the order,
// "order:<source>:<external id>", and ":<again>" when again is not ""
// (then the next argument, $n+1).
func OfOrder(cond, again string, n int) string {
	suffix := ""
	if again != "" {
		suffix = ` || ':' || $` + strconv.Itoa(n+1) + `::text`
	}
	return `SELECT c.patch || jsonb_build_object('step_object', 'order:' || (c.patch -> 'order' ->> 'source') || ':' ||
    (c.patch -> 'order' ->> 'external_id')` + suffix + `)
FROM (` + cond + `) AS c(patch) WHERE c.patch ? 'order'`
}

// WithAddress narrows cond (a condition that puts an order in the step's
// payload) to an order with an email address.
func WithAddress(cond string) string {
	return `SELECT c.patch FROM (` + cond + `) AS c(patch) WHERE c.patch -> 'order' ->> 'customer_email' <> ''`
}
