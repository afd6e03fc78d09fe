package sendername

import (
	"slices"
	"strings"

	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/sales"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// handledTypes are the event types Plan acts on (Spec.Types): each has a
// row in docs/events.md and is listed in docs/deploy.md.
var handledTypes = []string{"order.paid"}

// Plan implements webhooks.Provider: the contract's Sendername table.
// Every write is safe to run twice, and every step is planned on the
// condition that this event changed the state, so a copy of the event
// under another webhook-id, or a replay past emptied claims, changes
// nothing and sends nothing.
func (p *Provider) Plan(ev *webhooks.Event, plan *webhooks.Plan) error {
	if !slices.Contains(handledTypes, ev.Type) {
		return webhooks.ErrUnhandled
	}
	e, ok := ev.Payload.(*event)
	if !ok { // a stored event, replayed
		decoded, err := Decode(ev.ID, ev.Body)
		if err != nil {
			return webhooks.Unprocessable("event %s: %v", ev.ID, err)
		}
		e = decoded.Payload.(*event)
	}
	var d order
	if err := webhooks.UnmarshalSigned(e.Data, &d); err != nil {
		return webhooks.Unprocessable("%s %s: data: %v", ev.Type, ev.ID, err)
	}
	return orderPaid(ev, d, plan)
}

// order is the part of an order the plan reads. A JSON null reads as the
// zero value.
type order struct {
	ID       string `json:"id"`
	Amount   *int64 `json:"amount"`   // what the customer paid, in cents
	Currency string `json:"currency"` // ISO 4217
	Customer struct {
		Email string `json:"email"`
	} `json:"customer"`
}

// orderPaid records the order paid and, when this event made it a sale,
// plans what a sale sets off (sales.Plan): the confirmation, when the
// payload gives an address, and the fulfillment call.
func orderPaid(ev *webhooks.Event, d order, plan *webhooks.Plan) error {
	if d.ID == "" || d.Amount == nil || *d.Amount < 0 || d.Currency == "" {
		return webhooks.Unprocessable("%s %s: the order has no id, amount or currency", ev.Type, ev.ID)
	}
	orders.Create(plan, orders.Order{
		Source:          Source,
		ProviderEventID: ev.ID,
		ExternalID:      d.ID,
		Status:          orders.StatusPaid,
		AmountCents:     *d.Amount,
		Currency:        strings.ToLower(d.Currency),
		CustomerEmail:   d.Customer.Email,
	}, orders.Position{})
	var sale sales.Sale
	if d.Customer.Email != "" {
		sale.Email = mail.Email{Template: "order_confirmation", To: d.Customer.Email}
	}
	cond, args := orders.Changed(Source, d.ID, orders.Sold...)
	sales.Plan(plan, sale, cond, args...)
	return nil
}
