package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/sales"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// What Stripe's events say of entitlements (internal/entitlements): a
// subscription's items are in its events; a one-off Checkout Session's
// (mode payment) are not, and are read from the API by a step once the
// session is paid (KindLineItems); a Stripe Entitlements summary lists at
// most 10 active features, and the rest are read from the API
// (KindFeatures).

// Step names and kinds of what Stripe's API is asked for entitlements.
const (
	StepLineItems = "stripe.line_items"
	KindLineItems = "stripe.line_items"
	StepFeatures  = "stripe.active_entitlements"
	KindFeatures  = "stripe.active_entitlements"
)

// follow queues the statement that follows the rows c names, when
// entitlements are kept.
func (p *Provider) follow(plan *webhooks.Plan, c entitlements.Change) {
	if p.entitlements {
		entitlements.Follow(plan, c)
	}
}

// subscriptionItems are a subscription's items, as JSON.
func subscriptionItems(o *dataObject) []byte {
	if o.Items == nil {
		return nil
	}
	items := []entitlements.Item{}
	for _, it := range o.Items.Data {
		if it.Price == nil {
			continue
		}
		items = append(items, entitlements.Item{Price: it.Price.ID, Product: string(it.Price.Product), Quantity: deref(it.Quantity)})
	}
	b, _ := json.Marshal(items)
	return b
}

// followSession follows a Checkout Session's order (its customer, the app
// user it claims) and, for a one-off purchase (mode payment) that this
// event made a sale, plans the step that reads its line items: a step of
// the order, so that whichever path makes it a sale plans it once.
func (p *Provider) followSession(plan *webhooks.Plan, s session, a meta, status orders.Status) {
	if !p.entitlements {
		return
	}
	entitlements.Follow(plan, entitlements.Change{OrderSource: Source, OrderID: s.ID})
	if status != orders.StatusPaid || s.Mode != "payment" {
		return
	}
	payload, _ := json.Marshal(lineItemsPayload{Session: s.ID, Account: a.Account})
	cond, args := orders.Changed(Source, s.ID, orders.Sold...)
	plan.StepIf(webhooks.Step{Name: StepLineItems, Kind: KindLineItems, Payload: payload}, sales.OfOrder(cond, "", len(args)), args...)
}

type lineItemsPayload struct {
	Session string `json:"session"`
	Account string `json:"account,omitempty"`
}

// entitlementSummary records a customer's active features (Stripe
// Entitlements' entitlements.active_entitlement_summary.updated): the
// list when it is whole, else a step that reads all of it from the API.
func (p *Provider) entitlementSummary(ev *webhooks.Event, a meta, plan *webhooks.Plan) error {
	o, err := object(ev)
	if err != nil {
		return err
	}
	if o.Customer == "" || o.Entitlements == nil {
		return webhooks.Unprocessable("%s %s: the summary has no customer or entitlements", ev.Type, ev.ID)
	}
	at, err := a.ordered(ev)
	if err != nil {
		return err
	}
	if !p.entitlements {
		return fmt.Errorf("ENTITLEMENTS_FILE is unset: %w", webhooks.ErrUnhandled)
	}
	payload, _ := json.Marshal(featuresPayload{Customer: string(o.Customer), Account: a.Account, At: at, EventID: ev.ID,
		Features: featuresOf(o.Entitlements), Whole: !o.Entitlements.HasMore})
	// A step of the event: it records the list (reading the rest from the
	// API when the summary has more) and computes the subject again.
	plan.Step(webhooks.Step{Name: StepFeatures, Kind: KindFeatures, Payload: payload})
	return nil
}

type featuresPayload struct {
	Customer string                 `json:"customer"`
	Account  string                 `json:"account,omitempty"`
	At       time.Time              `json:"at"`
	EventID  string                 `json:"event_id"`
	Features []entitlements.Feature `json:"features"`
	Whole    bool                   `json:"whole"` // the event's list is all of them
}

func featuresOf(l *featureList) []entitlements.Feature {
	out := []entitlements.Feature{}
	for _, f := range l.Data {
		out = append(out, entitlements.Feature{Feature: string(f.Feature), LookupKey: f.LookupKey})
	}
	return out
}

// APIKind is a step kind that asks Stripe's API and records what it said
// for entitlements: KindLineItems and KindFeatures. It is bound to the
// processor that runs it (webhooks.Binder).
type APIKind struct {
	API  *API // nil when STRIPE_API_KEY is unset
	Name string

	store entitlements.Store
	proc  *webhooks.Processor
}

// Bind implements webhooks.Binder.
func (k APIKind) Bind(p *webhooks.Processor) webhooks.StepKind {
	k.store, k.proc = entitlements.Store{Pool: p.Pool()}, p
	return k
}

// Prepare implements webhooks.StepKind.
func (APIKind) Prepare(payload json.RawMessage) (json.RawMessage, error) { return payload, nil }

// Unconfigured implements webhooks.StepKind.
func (k APIKind) Unconfigured() string {
	if k.API == nil && k.Name == KindLineItems {
		return "STRIPE_API_KEY is unset: a Checkout Session's line items cannot be read"
	}
	return ""
}

// Unavailable implements webhooks.StepKind.
func (APIKind) Unavailable(json.RawMessage) string { return "" }

// Run implements webhooks.StepKind.
func (k APIKind) Run(ctx context.Context, _ string, payload json.RawMessage) error {
	if k.proc == nil {
		return errors.New("stripe: the step kind is not bound to a processor")
	}
	var err error
	switch k.Name {
	case KindLineItems:
		err = k.lineItems(ctx, payload)
	case KindFeatures:
		err = k.features(ctx, payload)
	default:
		return permanent{fmt.Errorf("stripe: unknown step kind %q", k.Name)}
	}
	if err != nil {
		return err
	}
	// What changed is told now, by a step of its own; Job plans it
	// otherwise, should this process stop first.
	go func() {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = k.store.PlanPending(pctx, k.proc, 10, nil)
	}()
	return nil
}

// lineItems reads a paid Checkout Session's line items (every page) and
// records them on its order.
func (k APIKind) lineItems(ctx context.Context, payload json.RawMessage) error {
	var p lineItemsPayload
	if err := json.Unmarshal(payload, &p); err != nil || p.Session == "" {
		return permanent{fmt.Errorf("stripe line items step: payload %s", payload)}
	}
	items := []entitlements.Item{}
	q := url.Values{"limit": {"100"}}
	for page := 0; ; page++ {
		if page == 50 {
			return permanent{fmt.Errorf("stripe line items of %s: more than 50 pages", p.Session)}
		}
		body, err := k.API.Do(ctx, http.MethodGet, "/v1/checkout/sessions/"+url.PathEscape(p.Session)+"/line_items", q, nil, account(p.Account))
		if err != nil {
			return apiFailure(err)
		}
		var list struct {
			Data []struct {
				ID    string `json:"id"`
				Price *struct {
					ID      string     `json:"id"`
					Product expandable `json:"product"`
				} `json:"price"`
				Quantity *int64 `json:"quantity"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return fmt.Errorf("stripe line items of %s: %w", p.Session, err)
		}
		for _, it := range list.Data {
			if it.Price != nil {
				items = append(items, entitlements.Item{Price: it.Price.ID, Product: string(it.Price.Product), Quantity: deref(it.Quantity)})
			}
		}
		if !list.HasMore || len(list.Data) == 0 {
			break
		}
		q.Set("starting_after", list.Data[len(list.Data)-1].ID)
	}
	return k.store.SetOrderItems(ctx, Source, p.Session, items)
}

// features records a customer's active features: the summary's own list
// when it is whole, else every page of GET /v1/entitlements/active_entitlements.
func (k APIKind) features(ctx context.Context, payload json.RawMessage) error {
	var p featuresPayload
	if err := json.Unmarshal(payload, &p); err != nil || p.Customer == "" {
		return permanent{fmt.Errorf("stripe active entitlements step: payload %s", payload)}
	}
	features := p.Features
	if !p.Whole {
		if k.API == nil {
			return permanent{errors.New("the summary lists more than it carries, and STRIPE_API_KEY is unset: the rest cannot be read")}
		}
		features = []entitlements.Feature{}
		q := url.Values{"customer": {p.Customer}, "limit": {"100"}}
		for page := 0; ; page++ {
			if page == 50 {
				return permanent{fmt.Errorf("stripe active entitlements of %s: more than 50 pages", p.Customer)}
			}
			body, err := k.API.Do(ctx, http.MethodGet, "/v1/entitlements/active_entitlements", q, nil, account(p.Account))
			if err != nil {
				return apiFailure(err)
			}
			var list struct {
				Data []struct {
					ID        string     `json:"id"`
					Feature   expandable `json:"feature"`
					LookupKey string     `json:"lookup_key"`
				} `json:"data"`
				HasMore bool `json:"has_more"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				return fmt.Errorf("stripe active entitlements of %s: %w", p.Customer, err)
			}
			for _, f := range list.Data {
				features = append(features, entitlements.Feature{Feature: string(f.Feature), LookupKey: f.LookupKey})
			}
			if !list.HasMore || len(list.Data) == 0 {
				break
			}
			q.Set("starting_after", list.Data[len(list.Data)-1].ID)
		}
	}
	return k.store.SetFeatures(ctx, entitlements.CustomerKey(Source, p.Customer), features, p.At, p.EventID)
}

// permanent is an error retrying cannot help: the step is parked.
type permanent struct{ error }

func (permanent) Permanent() bool { return true }

// apiFailure is a failed API call as a step's error: Stripe's 4xx (other
// than 429) is permanent (a session it does not know), anything else is
// retried.
func apiFailure(err error) error {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
		return permanent{err}
	}
	return err
}

// StepKinds are the kinds of the steps Stripe's plans add for
// entitlements, built from the provider's variables (env): the API client
// when STRIPE_API_KEY is set.
func StepKinds(env func(string) string) (webhooks.StepKinds, error) {
	var api *API
	if key := env(apiKey.Name); key != "" {
		var err error
		if api, err = NewAPI(APIConfig{Key: key, BaseURL: env(apiBase.Name)}); err != nil {
			return nil, err
		}
	}
	return webhooks.StepKinds{
		KindLineItems: APIKind{API: api, Name: KindLineItems},
		KindFeatures:  APIKind{API: api, Name: KindFeatures},
	}, nil
}
