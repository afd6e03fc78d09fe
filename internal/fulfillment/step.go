package fulfillment

import (
	"context"
	"encoding/json"
	jsonv2 "encoding/json/v2"
	"errors"

	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// KindFulfillment is the step kind of a call to the fulfillment API.
const KindFulfillment = "fulfillment"

// Payload is the payload of a fulfillment step: the order, as the event's
// transaction wrote it, put there by the condition the step was planned on
// (orders.Changed).
type Payload struct {
	Order *orders.Order `json:"order,omitempty"`
}

// Step is a fulfillment step named name, for the order its condition puts
// in its payload.
func Step(name string) webhooks.Step {
	return webhooks.Step{Name: name, Kind: KindFulfillment, Payload: json.RawMessage(`{}`)}
}

// RequestFor is the request that fulfils o: the one place every provider's
// fulfillment call is built. A payload stored before orders carried their
// mode has none: its call says livemode null.
func RequestFor(o orders.Order) Request {
	r := Request{
		OrderID:       o.ID,
		Source:        o.Source,
		ExternalID:    o.ExternalID,
		AmountCents:   o.AmountCents,
		Currency:      o.Currency,
		CustomerEmail: o.CustomerEmail,
		Livemode:      o.Livemode,
	}
	if o.AccountID != "" {
		r.AccountID = &o.AccountID
	}
	return r
}

// Kind runs fulfillment steps with Client.
type Kind struct {
	Client *Client // nil when FULFILLMENT_URL is unset
}

// Prepare implements webhooks.StepKind; a fulfillment step needs nothing
// of the process that plans it.
func (Kind) Prepare(payload json.RawMessage) (json.RawMessage, error) { return payload, nil }

// Unconfigured implements webhooks.StepKind.
func (k Kind) Unconfigured() string {
	if k.Client == nil {
		return "FULFILLMENT_URL is unset"
	}
	return ""
}

// Refs implements webhooks.Referrer: the Idempotency-Key every attempt of
// the step sends (also its webhook-id when calls are signed).
func (Kind) Refs(key string, _ json.RawMessage) []webhooks.Ref {
	return []webhooks.Ref{{Name: "Idempotency-Key", Value: IdempotencyKey(key)}}
}

// Unavailable implements webhooks.StepKind.
func (k Kind) Unavailable(payload json.RawMessage) string {
	var p Payload
	switch err := jsonv2.Unmarshal(payload, &p); {
	case err != nil:
		return "fulfillment step payload unreadable: " + err.Error()
	case p.Order == nil:
		return "the step carries no order"
	}
	return ""
}

// Run implements webhooks.StepKind: one call, with the step's stable
// Idempotency-Key.
func (k Kind) Run(ctx context.Context, key string, payload json.RawMessage) error {
	var p Payload
	if err := jsonv2.Unmarshal(payload, &p); err != nil || p.Order == nil {
		return &invalidError{msg: "fulfillment step payload: " + errors.Join(err, errors.New("no order")).Error()}
	}
	return k.Client.Fulfill(ctx, IdempotencyKey(key), RequestFor(*p.Order))
}

// StatusCode is the HTTP status the API answered: the step's attempt
// records it (webhooks.StatusCode).
func (e *StatusError) StatusCode() int { return e.Code }
