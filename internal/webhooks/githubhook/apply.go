package githubhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Order sources of GitHub events, as stored in orders.source.
const (
	SourceMarketplace = "github_marketplace"
	SourceSponsors    = "github_sponsors"
)

// Step names of GitHub events. Each is one claim under its own lease.
const (
	StepWelcomeEmail      = "email.welcome"
	StepFulfillment       = "fulfillment"
	StepCancellationEmail = "email.cancellation"
	StepNoticeEmail       = "email.notice"
)

// currency is the currency of every GitHub price.
const currency = "usd"

// Apply implements webhooks.Provider: the contract's GitHub table. Steps
// are planned only when this event changed an order, so a second hook's
// copy of an event, or a replay, sends nothing again.
func (p *Provider) Apply(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	switch ev.Type {
	case "ping":
		return nil, nil
	case "marketplace_purchase":
		return p.marketplacePurchase(ctx, tx, ev)
	case "sponsorship":
		return p.sponsorship(ctx, tx, ev)
	}
	return nil, webhooks.ErrUnhandled
}

// decode reads the event's body into v, or says why it cannot.
func decode(ev webhooks.Event, v any) error {
	if err := json.Unmarshal(ev.Body, v); err != nil {
		return webhooks.Unprocessable("%s %s: %v", ev.Type, ev.ID, err)
	}
	return nil
}

// --- marketplace_purchase ---

// purchaseEvent is the part of a marketplace_purchase event the handlers
// need.
type purchaseEvent struct {
	Action   string    `json:"action"`
	Purchase *purchase `json:"marketplace_purchase"`
}

type purchase struct {
	Account struct {
		ID                       *int64  `json:"id"`
		Login                    string  `json:"login"`
		OrganizationBillingEmail *string `json:"organization_billing_email"`
	} `json:"account"`
	BillingCycle string `json:"billing_cycle"`
	UnitCount    int64  `json:"unit_count"`
	Plan         plan   `json:"plan"`
}

type plan struct {
	ID                  int64  `json:"id"`
	Name                string `json:"name"`
	MonthlyPriceInCents int64  `json:"monthly_price_in_cents"`
	YearlyPriceInCents  int64  `json:"yearly_price_in_cents"`
	PriceModel          string `json:"price_model"`
}

func (p *Provider) marketplacePurchase(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	var pe purchaseEvent
	if err := decode(ev, &pe); err != nil {
		return nil, err
	}
	switch pe.Action {
	case "":
		return nil, webhooks.Unprocessable("%s %s: no action", ev.Type, ev.ID)
	case "pending_change", "pending_change_cancelled":
		return nil, nil // takes effect later, with its own changed or cancelled event
	case "purchased", "changed", "cancelled":
	default:
		return nil, fmt.Errorf("%s action %q: %w", ev.Type, pe.Action, webhooks.ErrUnhandled)
	}
	o, err := pe.order(ev)
	if err != nil {
		return nil, err
	}
	switch pe.Action {
	case "purchased":
		return p.purchased(ctx, tx, ev, o, pe.Purchase)
	case "changed":
		_, _, err := orders.SetPlan(ctx, tx, o.Source, o.ExternalID, o.Plan, o.AmountCents)
		return nil, err
	default:
		return p.purchaseCancelled(ctx, tx, o, pe.Purchase)
	}
}

// order is the order a purchase stands for, or why it cannot be read.
func (pe purchaseEvent) order(ev webhooks.Event) (orders.Order, error) {
	mp := pe.Purchase
	if mp == nil || mp.Account.ID == nil {
		return orders.Order{}, webhooks.Unprocessable("%s %s: no marketplace_purchase.account.id", ev.Type, ev.ID)
	}
	amount, err := mp.price()
	if err != nil {
		return orders.Order{}, webhooks.Unprocessable("%s %s: %v", ev.Type, ev.ID, err)
	}
	return orders.Order{
		Source:          SourceMarketplace,
		ProviderEventID: ev.ID,
		ExternalID:      "account:" + strconv.FormatInt(*mp.Account.ID, 10),
		Status:          orders.StatusPaid,
		AmountCents:     amount,
		Currency:        currency,
		CustomerEmail:   deref(mp.Account.OrganizationBillingEmail),
		Plan:            strconv.FormatInt(mp.Plan.ID, 10) + ":" + mp.Plan.Name,
	}, nil
}

// price is what the purchase costs per billing cycle: the plan's price for
// the cycle, times the unit count for a per-unit plan. GitHub spells price
// models both FLAT_RATE and flat-rate.
func (mp *purchase) price() (int64, error) {
	var unit int64
	switch strings.ToLower(mp.BillingCycle) {
	case "monthly":
		unit = mp.Plan.MonthlyPriceInCents
	case "yearly":
		unit = mp.Plan.YearlyPriceInCents
	default:
		return 0, fmt.Errorf("billing_cycle %q", mp.BillingCycle)
	}
	switch strings.ReplaceAll(strings.ToLower(mp.Plan.PriceModel), "_", "-") {
	case "flat-rate", "free":
		return unit, nil
	case "per-unit":
		if mp.UnitCount < 0 || (mp.UnitCount > 0 && unit > math.MaxInt64/mp.UnitCount) {
			return 0, fmt.Errorf("unit_count %d at %d cents", mp.UnitCount, unit)
		}
		return unit * mp.UnitCount, nil
	}
	return 0, fmt.Errorf("price_model %q", mp.Plan.PriceModel)
}

// recipient is where an account's mail goes: its billing email, else
// NOTIFY_EMAIL.
func (p *Provider) recipient(billingEmail string) string {
	if billingEmail != "" {
		return billingEmail
	}
	return p.notify
}

// purchased creates the account's order, or reactivates it after a
// cancellation. A copy of the event that made the order (another hook's, or
// a replay) changes nothing.
func (p *Provider) purchased(ctx context.Context, tx webhooks.Tx, ev webhooks.Event, o orders.Order, mp *purchase) ([]webhooks.Step, error) {
	existing, err := orders.ByExternalID(ctx, tx, o.Source, o.ExternalID)
	switch {
	case err == nil && existing.ProviderEventID == ev.ID:
		return nil, nil
	case err != nil && !errors.Is(err, orders.ErrNotFound):
		return nil, fmt.Errorf("read order %s: %w", o.ExternalID, err)
	}
	o, changed, err := orders.Upsert(ctx, tx, o, orders.StatusCancelled)
	if err != nil || !changed {
		return nil, err
	}
	return []webhooks.Step{
		{Name: StepWelcomeEmail, Email: &webhooks.EmailStep{
			Template: "marketplace_welcome",
			To:       p.recipient(o.CustomerEmail),
			Data: map[string]any{
				"Account":      mp.Account.Login,
				"Plan":         mp.Plan.Name,
				"AmountCents":  o.AmountCents,
				"Currency":     o.Currency,
				"BillingCycle": strings.ToLower(mp.BillingCycle),
			},
		}},
		{Name: StepFulfillment, Fulfillment: &fulfillment.Request{
			OrderID:       o.ID,
			Source:        o.Source,
			ExternalID:    o.ExternalID,
			AmountCents:   o.AmountCents,
			Currency:      o.Currency,
			CustomerEmail: o.CustomerEmail,
		}},
	}, nil
}

// purchaseCancelled moves the account's paid order to cancelled.
func (p *Provider) purchaseCancelled(ctx context.Context, tx webhooks.Tx, o orders.Order, mp *purchase) ([]webhooks.Step, error) {
	cancelled, changed, err := orders.Transition(ctx, tx, o.Source, o.ExternalID, orders.StatusPaid, orders.StatusCancelled)
	if err != nil || !changed {
		return nil, err
	}
	to := cancelled.CustomerEmail
	if to == "" {
		to = o.CustomerEmail
	}
	return []webhooks.Step{{Name: StepCancellationEmail, Email: &webhooks.EmailStep{
		Template: "marketplace_cancelled",
		To:       p.recipient(to),
		Data:     map[string]any{"Account": mp.Account.Login, "Plan": mp.Plan.Name},
	}}}, nil
}

// --- sponsorship ---

// sponsorshipEvent is the part of a sponsorship event the handlers need,
// decoded with types of our own: go-github drops the sponsorship and fails
// on changes.tier.from, which is a whole tier object. changes is not read
// at all, so no spelling of it can make an event unreadable.
type sponsorshipEvent struct {
	Action      string `json:"action"`
	Sponsorship *struct {
		NodeID  string `json:"node_id"`
		Sponsor *struct {
			Login string `json:"login"`
		} `json:"sponsor"`
		Tier *tier `json:"tier"`
	} `json:"sponsorship"`
}

// tier is a sponsorship tier. Old payloads spell is_custom_ammount.
type tier struct {
	Name                string `json:"name"`
	MonthlyPriceInCents int64  `json:"monthly_price_in_cents"`
	IsOneTime           bool   `json:"is_one_time"`
	IsCustomAmount      *bool  `json:"is_custom_amount"`
	IsCustomAmmount     *bool  `json:"is_custom_ammount"`
}

// customAmount reports whether the sponsor chose the amount, whichever
// spelling carried it.
func (t *tier) customAmount() bool {
	if t.IsCustomAmount != nil {
		return *t.IsCustomAmount
	}
	return deref(t.IsCustomAmmount)
}

func (p *Provider) sponsorship(ctx context.Context, tx webhooks.Tx, ev webhooks.Event) ([]webhooks.Step, error) {
	var se sponsorshipEvent
	if err := decode(ev, &se); err != nil {
		return nil, err
	}
	switch se.Action {
	case "":
		return nil, webhooks.Unprocessable("%s %s: no action", ev.Type, ev.ID)
	case "edited", "tier_changed", "pending_cancellation", "pending_tier_change":
		return nil, nil // acknowledged and stored; no order changes
	case "created", "cancelled":
	default:
		return nil, fmt.Errorf("%s action %q: %w", ev.Type, se.Action, webhooks.ErrUnhandled)
	}
	s := se.Sponsorship
	if s == nil || s.NodeID == "" {
		return nil, webhooks.Unprocessable("%s %s: no sponsorship.node_id", ev.Type, ev.ID)
	}
	if s.Tier == nil {
		s.Tier = &tier{}
	}
	data := map[string]any{"Tier": s.Tier.Name, "AmountCents": s.Tier.MonthlyPriceInCents,
		"Currency": currency, "CustomAmount": s.Tier.customAmount(), "OneTime": s.Tier.IsOneTime}
	if s.Sponsor != nil {
		data["Sponsor"] = s.Sponsor.Login
	}
	if se.Action == "created" {
		return p.sponsorshipCreated(ctx, tx, ev, s.NodeID, s.Tier, data)
	}
	return p.sponsorshipCancelled(ctx, tx, s.NodeID, data)
}

func (p *Provider) sponsorshipCreated(ctx context.Context, tx webhooks.Tx, ev webhooks.Event, nodeID string, t *tier, data map[string]any) ([]webhooks.Step, error) {
	_, created, err := orders.Create(ctx, tx, orders.Order{
		Source:          SourceSponsors,
		ProviderEventID: ev.ID,
		ExternalID:      nodeID,
		Status:          orders.StatusPaid,
		AmountCents:     t.MonthlyPriceInCents,
		Currency:        currency,
		Plan:            t.Name,
	})
	if err != nil || !created {
		return nil, err
	}
	return []webhooks.Step{{Name: StepNoticeEmail, Email: &webhooks.EmailStep{
		Template: "sponsorship_created", To: p.notify, Data: data,
	}}}, nil
}

func (p *Provider) sponsorshipCancelled(ctx context.Context, tx webhooks.Tx, nodeID string, data map[string]any) ([]webhooks.Step, error) {
	_, changed, err := orders.Transition(ctx, tx, SourceSponsors, nodeID, orders.StatusPaid, orders.StatusCancelled)
	if err != nil || !changed {
		return nil, err
	}
	return []webhooks.Step{{Name: StepNoticeEmail, Email: &webhooks.EmailStep{
		Template: "sponsorship_cancelled", To: p.notify, Data: data,
	}}}, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
