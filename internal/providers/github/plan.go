package github

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/sales"
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
	StepFulfillment       = sales.StepFulfillment
	StepCancellationEmail = "email.cancellation"
	StepNoticeEmail       = "email.notice"
)

// currency is the currency of every GitHub price.
const currency = "usd"

// Ranks of events of the same time in the life of an order: a later rank
// wins a tie (GitHub's own examples give a purchase and its cancellation
// the same effective_date).
const (
	rankPurchased = 1
	rankChanged   = 2
	rankCancelled = 3
	rankCreated   = 1
	rankEnded     = 2
)

// Plan implements webhooks.Provider: the contract's GitHub table. Steps
// are planned on the condition that this event changed an order, so a
// second hook's copy of an event, a replay or an older event sends nothing.
func (p *Provider) Plan(ev *webhooks.Event, plan *webhooks.Plan) error {
	switch ev.Type {
	case "ping":
		return nil
	case "marketplace_purchase":
		return p.marketplacePurchase(ev, plan)
	case "sponsorship":
		return p.sponsorship(ev, plan)
	}
	return webhooks.ErrUnhandled
}

// top returns the payload's top level, as Verify decoded it, or decodes a
// stored body's.
func top(ev *webhooks.Event) (*shape, error) {
	if s, ok := ev.Payload.(*shape); ok && s != nil {
		return s, nil
	}
	var s shape
	if err := webhooks.UnmarshalSigned(ev.Body, &s); err != nil {
		return nil, webhooks.Unprocessable("%s %s: %v", ev.Type, ev.ID, err)
	}
	return &s, nil
}

func decode(ev *webhooks.Event, raw json.RawMessage, v any) error {
	if err := webhooks.UnmarshalSigned(raw, v); err != nil {
		return webhooks.Unprocessable("%s %s: %v", ev.Type, ev.ID, err)
	}
	return nil
}

// --- marketplace_purchase ---

type purchase struct {
	Account struct {
		ID                       *int64  `json:"id"`
		Login                    string  `json:"login"`
		OrganizationBillingEmail *string `json:"organization_billing_email"`
	} `json:"account"`
	BillingCycle string      `json:"billing_cycle"`
	UnitCount    int64       `json:"unit_count"`
	Plan         listingTier `json:"plan"`
}

type listingTier struct {
	ID                  int64  `json:"id"`
	Name                string `json:"name"`
	MonthlyPriceInCents int64  `json:"monthly_price_in_cents"`
	YearlyPriceInCents  int64  `json:"yearly_price_in_cents"`
	PriceModel          string `json:"price_model"`
}

func (p *Provider) marketplacePurchase(ev *webhooks.Event, pl *webhooks.Plan) error {
	s, err := top(ev)
	if err != nil {
		return err
	}
	action := deref(s.Action)
	var rank int
	switch action {
	case "":
		return webhooks.Unprocessable("%s %s: no action", ev.Type, ev.ID)
	case "pending_change", "pending_change_cancelled":
		return nil // takes effect later, with its own changed or cancelled event
	case "purchased":
		rank = rankPurchased
	case "changed":
		rank = rankChanged
	case "cancelled":
		rank = rankCancelled
	default:
		return fmt.Errorf("%s action %q: %w", ev.Type, action, webhooks.ErrUnhandled)
	}
	if !present(s.Purchase) {
		return webhooks.Unprocessable("%s %s: no marketplace_purchase", ev.Type, ev.ID)
	}
	var mp purchase
	if err := decode(ev, s.Purchase, &mp); err != nil {
		return err
	}
	at, err := effectiveDate(s.EffectiveDate)
	if err != nil {
		return webhooks.Unprocessable("%s %s: %v", ev.Type, ev.ID, err)
	}
	pos := orders.Position{At: at, Rank: rank}
	o, err := mp.order(ev)
	if err != nil {
		return err
	}
	if p.entitlements {
		defer entitlements.Follow(pl, entitlements.Change{OrderSource: o.Source, OrderID: o.ExternalID})
	}
	switch action {
	case "purchased":
		// A new account's order, or an order paid again after its
		// cancellation; never one this event made already (another hook's
		// copy), nor one whose last event is newer.
		orders.Upsert(pl, o, pos, orders.StatusCancelled)
		// Each purchase of the account is a sale of its own: one after a
		// cancellation is told by its effective date.
		cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusPaid)
		sales.Plan(pl, sales.Sale{EmailStep: StepWelcomeEmail, Again: at.UTC().Format(time.RFC3339), Email: mail.Email{
			Template: "marketplace_welcome", To: o.CustomerEmail, Notify: p.notify,
			Data: map[string]any{
				"Account":      mp.Account.Login,
				"Plan":         mp.Plan.Name,
				"AmountCents":  o.AmountCents,
				"Currency":     o.Currency,
				"BillingCycle": strings.ToLower(mp.BillingCycle),
			},
		}}, cond, args...)
	case "changed":
		orders.SetTier(pl, o.Source, o.ExternalID, o.Tier, o.AmountCents, pos)
	case "cancelled":
		orders.Transition(pl, o.Source, o.ExternalID, orders.StatusPaid, orders.StatusCancelled, pos)
		cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusCancelled)
		pl.StepIf(mail.Step(StepCancellationEmail, mail.Email{
			Template: "marketplace_cancelled", To: o.CustomerEmail, Notify: p.notify,
			Data: map[string]any{"Account": mp.Account.Login, "Plan": mp.Plan.Name},
		}), cond, args...)
		// An account whose purchase never arrived is recorded cancelled,
		// so that the purchase, older, changes nothing if it comes.
		o.Status = orders.StatusCancelled
		orders.Create(pl, o, pos)
	}
	return nil
}

// effectiveDate reads a Marketplace event's effective_date.
func effectiveDate(s *string) (time.Time, error) {
	if s == nil || *s == "" {
		return time.Time{}, fmt.Errorf("no effective_date")
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return time.Time{}, fmt.Errorf("effective_date %q: %v", *s, err)
	}
	return t, nil
}

// order is the order a purchase stands for, or why it cannot be read.
func (mp purchase) order(ev *webhooks.Event) (orders.Order, error) {
	if mp.Account.ID == nil {
		return orders.Order{}, webhooks.Unprocessable("%s %s: no marketplace_purchase.account.id", ev.Type, ev.ID)
	}
	amount, err := mp.price()
	if err != nil {
		return orders.Order{}, webhooks.Unprocessable("%s %s: %v", ev.Type, ev.ID, err)
	}
	return orders.Order{
		Source:          SourceMarketplace,
		ProviderEventID: ev.Key, // not the GUID alone: see the package comment
		ExternalID:      "account:" + strconv.FormatInt(*mp.Account.ID, 10),
		Status:          orders.StatusPaid,
		AmountCents:     amount,
		Currency:        currency,
		CustomerEmail:   deref(mp.Account.OrganizationBillingEmail),
		Tier:            strconv.FormatInt(mp.Plan.ID, 10) + ":" + mp.Plan.Name,
		// Its subject (internal/entitlements): github:<account id>; its
		// plan is what it is for.
		CustomerKey: "github:" + strconv.FormatInt(*mp.Account.ID, 10),
	}, nil
}

// price is what the purchase costs per billing cycle.
func (mp purchase) price() (int64, error) {
	return MarketplacePrice(mp.BillingCycle, mp.Plan.PriceModel, mp.Plan.MonthlyPriceInCents,
		mp.Plan.YearlyPriceInCents, mp.UnitCount)
}

// --- sponsorship ---

// sponsorship is the part of a sponsorship the handlers need, decoded
// with types of our own: go-github drops the sponsorship and fails on
// changes.tier.from, which is a whole tier object. changes is not read at
// all, so no spelling of it can make an event unreadable.
type sponsorship struct {
	NodeID    string `json:"node_id"`
	CreatedAt string `json:"created_at"`
	Sponsor   *struct {
		Login string `json:"login"`
	} `json:"sponsor"`
	Tier *tier `json:"tier"`
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

func (p *Provider) sponsorship(ev *webhooks.Event, pl *webhooks.Plan) error {
	s, err := top(ev)
	if err != nil {
		return err
	}
	action := deref(s.Action)
	var rank int
	switch action {
	case "":
		return webhooks.Unprocessable("%s %s: no action", ev.Type, ev.ID)
	case "edited", "tier_changed", "pending_cancellation", "pending_tier_change":
		return nil // acknowledged and stored; no order changes
	case "created":
		rank = rankCreated
	case "cancelled":
		rank = rankEnded
	default:
		return fmt.Errorf("%s action %q: %w", ev.Type, action, webhooks.ErrUnhandled)
	}
	var sp sponsorship
	if present(s.Sponsorship) {
		if err := decode(ev, s.Sponsorship, &sp); err != nil {
			return err
		}
	}
	if sp.NodeID == "" {
		return webhooks.Unprocessable("%s %s: no sponsorship.node_id", ev.Type, ev.ID)
	}
	if sp.Tier == nil {
		sp.Tier = &tier{}
	}
	// A sponsorship's events share its created_at: their rank orders them.
	var pos orders.Position
	if at, err := time.Parse(time.RFC3339, sp.CreatedAt); err == nil {
		pos = orders.Position{At: at, Rank: rank}
	}
	data := map[string]any{"Tier": sp.Tier.Name, "AmountCents": sp.Tier.MonthlyPriceInCents,
		"Currency": currency, "CustomAmount": sp.Tier.customAmount(), "OneTime": sp.Tier.IsOneTime}
	if sp.Sponsor != nil {
		data["Sponsor"] = sp.Sponsor.Login
	}
	o := orders.Order{
		Source:          SourceSponsors,
		ProviderEventID: ev.Key, // not the GUID alone: see the package comment
		ExternalID:      sp.NodeID,
		Status:          orders.StatusPaid,
		AmountCents:     sp.Tier.MonthlyPriceInCents,
		Currency:        currency,
		Tier:            sp.Tier.Name,
	}
	if action == "created" {
		orders.Create(pl, o, pos)
		cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusPaid)
		sales.Plan(pl, sales.Sale{EmailStep: StepNoticeEmail, NoFulfillment: true,
			Email: mail.Email{Template: "sponsorship_created", Notify: p.notify, Data: data}}, cond, args...)
		return nil
	}
	orders.Transition(pl, o.Source, o.ExternalID, orders.StatusPaid, orders.StatusCancelled, pos)
	cond, args := orders.Changed(o.Source, o.ExternalID, orders.StatusCancelled)
	pl.StepIf(mail.Step(StepNoticeEmail, mail.Email{Template: "sponsorship_cancelled", Notify: p.notify, Data: data}),
		cond, args...)
	// A sponsorship whose creation never arrived is recorded cancelled, so
	// that the creation, older, changes nothing if it comes.
	o.Status = orders.StatusCancelled
	orders.Create(pl, o, pos)
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
