package stripe

import (
	"bytes"
	"context"
	"encoding/json/jsontext"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paywebhooks/receiver/internal/reconcile"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Stripe's thin events come from an event destination, with a secret of
// its own, to a route of their own (ThinSpec, POST /webhooks/stripe/thin),
// signed with Stripe-Signature exactly as snapshot events are. A thin
// event carries no object and no API version, only what happened and to
// what: {"id", "object": "v2.core.event", "type", "created" (RFC 3339),
// "livemode", "context" (a connected account, or null), "related_object":
// {"id", "type", "url"}}. The receiver makes it whole before it acts:
//
//   - The notification is verified, its livemode and context held to
//     STRIPE_LIVEMODE and STRIPE_CONNECT_ACCOUNTS (another mode or an
//     account not listed is acknowledged 200 ignored, with nothing
//     fetched), and keyed by its id.
//   - Only a type it acts on, never claimed before, is fetched (a copy is
//     answered from its claims, with no call): the v2 Event from GET
//     /v2/core/events/<id> (Stripe-Context: <context>), then the current
//     state of the object it names from GET <its url>, in APIVersion, as
//     snapshot events are read. A failed fetch is answered 503 and writes
//     nothing; Stripe retries. What was fetched is the event's stored body
//     (see fetchedBody), planned now and by any replay without fetching.
//   - v1.<type> of a type the Stripe provider handles applies the object's
//     state as that type's snapshot event does, through the Stripe
//     provider's own plan (a synthetic snapshot event, see synthetic).
//   - v2.core.health.event_generation_failure.resolved, Stripe's word
//     that it failed to generate an event it will never deliver nor list,
//     applies the state of the object named in data.impact as its missing
//     event would have, and raises an operator alert (recover).
//   - v2.core.event_destination.ping is answered 200 and counted.
//
// Ordering. Stripe's objects carry no version; a snapshot event is ordered
// by its created, the second it happened. A fetched state is the newest
// truth there is when it is read: it is ordered at the second it was
// fetched (fetched_at, kept with the body), so that a snapshot event
// created before then (whose change the fetch already shows) changes
// nothing when it arrives later, and one created in that second or after
// is applied (within a second the later arrival wins, as between two
// snapshot events). The fetch's second is the receiver's clock: keep it
// synchronised (NTP), as Stripe's signed timestamps already ask.
//
// While a team moves from a snapshot endpoint to thin events, one change
// arrives both ways. A v1 thin event whose v2 Event names its snapshot
// event (snapshot_event, which Stripe sets while both are sent) writes
// under that event's id: the same order, refund, dunning attempt and
// notices as the snapshot event, so each effect happens once whichever
// comes first. Without it, the writes still converge (business keys, state
// ordering) and the steps go once per change (each is planned only when
// its transaction changed the state).

// ThinSource is the source of thin events in keys, rows, logs and metrics.
const ThinSource = "stripe_thin"

// The thin event types that are not a v1 event's.
const (
	TypeGenerationFailure = "v2.core.health.event_generation_failure.resolved"
	TypeDestinationPing   = "v2.core.event_destination.ping"
)

// Bounds of the fetch of one thin event: the v2 Event and the object it
// names (a refund's charge too), retries included.
const (
	// FetchTimeout bounds the whole fetch: well within the time Stripe
	// waits for an answer, so that a hanging API is answered 503 (and
	// retried by Stripe) rather than cut off.
	FetchTimeout = 8 * time.Second
	// MaxFetches bounds the fetches under way at once in a process: a
	// delivery holds its slot (MAX_INFLIGHT) while it fetches, and past
	// this many a thin event is refused 503 at once, so that a slow API
	// never takes the slots of the other providers' deliveries.
	MaxFetches = 16
	// maxFetchRequests and maxFetchBody bound its requests and each
	// response.
	maxFetchRequests = 12
	maxFetchBody     = 1 << 20
)

// thinTypes are the thin event types the receiver acts on: the v1 thin
// version of every type the Stripe provider handles, the health event, and
// the destination's ping (answered and counted).
var thinTypes = func() []string {
	out := []string{TypeGenerationFailure, TypeDestinationPing}
	for _, t := range handledTypes {
		// A Stripe Entitlements summary names no object the API can
		// fetch: it comes to the snapshot endpoint only.
		if t != "entitlements.active_entitlement_summary.updated" {
			out = append(out, "v1."+t)
		}
	}
	return out
}()

// thinSecret is STRIPE_THIN_WEBHOOK_SECRET: the Stripe signing secret's
// variable (its checks, bounds and mask) for an event destination's.
var thinSecret = func() webhooks.Var {
	v := Spec.Secret
	v.Name = "STRIPE_THIN_WEBHOOK_SECRET"
	v.Doc = "the signing secret (`whsec_…`) of a Stripe event destination that sends **thin** events (payload " +
		"style Thin: `v1.<type>` of the types above, `v2.core.health.event_generation_failure.resolved`, " +
		"`v2.core.event_destination.ping`); comma-separated while a secret is rolled. Each thin event is fetched " +
		"from Stripe's API before it is acted on: it needs `STRIPE_API_KEY` (a secret key: Stripe opens `/v2` to " +
		"those)"
	v.DevPrefix = "whsec_devthin_"
	v.DevHint = "  Thin events forwarded by the Stripe CLI are signed with its own secret instead: run\n" +
		"    STRIPE_THIN_WEBHOOK_SECRET=$(stripe listen --print-secret) make run\n" +
		"  and, in another terminal,\n" +
		"    stripe listen --thin-events " + TypeGenerationFailure + " --forward-thin-to localhost:8080/webhooks/stripe/thin"
	return v
}()

// ThinSpec describes the Stripe thin-event route to the registry: a second
// Spec of this folder, with its own secret and path, that reads the Stripe
// Spec's variables (the API key and base, the mode and the accounts).
var ThinSpec = webhooks.Spec{
	Source:           ThinSource,
	Path:             "/webhooks/stripe/thin",
	Secret:           thinSecret,
	SignatureHeaders: []string{"Stripe-Signature"},
	Types:            thinTypes,
	// Unversioned: a thin event has no api_version, and what is fetched
	// for it is read in the versions pinned here (V2APIVersion, APIVersion).
	Retention:    Spec.Retention, // Stripe retries an event destination as it retries an endpoint
	Retries:      Spec.Retries,
	OrderSources: Spec.OrderSources,
	New: func(s webhooks.Settings) (webhooks.Provider, error) {
		filter, _, err := FilterOf(s.Env)
		if err != nil {
			return nil, err
		}
		var api *API
		if key := s.Env(apiKey.Name); key != "" {
			if api, err = NewAPI(APIConfig{Key: key, BaseURL: s.Env(apiBase.Name)}); err != nil {
				return nil, err
			}
		}
		return NewThin(s.Secrets, api, WithFilter(filter), WithNotifyEmail(s.NotifyEmail), WithEntitlements(s.Entitlements)), nil
	},
	Warnings: func(s webhooks.Settings) []string {
		if len(s.Secrets) == 0 {
			return nil
		}
		switch key := s.Env(apiKey.Name); {
		case key == "":
			return []string{thinSecret.Name + " is set but " + apiKey.Name + " is not: a thin event only names its event, " +
				"which is read from Stripe's API; every thin event the receiver acts on is answered 503 (and Stripe " +
				"retries it for up to 3 days) until " + apiKey.Name + " is set"}
		case strings.HasPrefix(key, "rk_"):
			return []string{apiKey.Name + " is a restricted key, and Stripe documents its /v2 API (GET /v2/core/events/<id>, " +
				"which every thin event needs) as open to secret keys (sk_…) only: if Stripe refuses it, thin events are " +
				"answered 503 until the key is a secret key"}
		}
		return nil
	},
	WrongSecretHint: "the signature does not match any configured secret although it was signed just now: " +
		"if this is `stripe listen --forward-thin-to`, use the secret `stripe listen --print-secret` prints; " +
		"otherwise the signing secret of the event destination that sends here (Workbench > Webhooks)",
	Sign:    Spec.Sign,
	Example: thinExample,
}

// ThinProvider verifies, fetches and plans Stripe's thin events.
type ThinProvider struct {
	secrets  []string
	api      *API      // nil: STRIPE_API_KEY unset, and nothing can be fetched
	snap     *Provider // the Stripe provider, whose plan applies what is fetched
	fetching chan struct{}
	timeout  time.Duration
	now      func() time.Time

	mu      sync.Mutex
	flights map[string]*flight // fetches under way, by event id
}

// flight is one fetch of a thin event, which the copies of it that arrive
// meanwhile wait for rather than fetch again.
type flight struct {
	done chan struct{}
	t    *thinEvent
	body []byte
	err  error
}

// NewThin returns the provider of thin events signed with any of secrets,
// fetched with api (nil: none can be), acting as the Stripe provider built
// with opts does (its Filter, its NOTIFY_EMAIL).
func NewThin(secrets []string, api *API, opts ...Option) *ThinProvider {
	return &ThinProvider{secrets: secrets, api: api, snap: New(nil, opts...),
		fetching: make(chan struct{}, MaxFetches), timeout: FetchTimeout, now: time.Now, flights: map[string]*flight{}}
}

// notification is a thin event as Stripe posts it (and as the v2 Event
// API returns it, with more members).
type notification struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Type          string            `json:"type"`
	Created       webhooks.TimeHint `json:"created"`
	Livemode      flag              `json:"livemode"`
	Context       text              `json:"context"`
	RelatedObject *relatedObject    `json:"related_object"`
	// SnapshotEvent is the v1 snapshot event a v1 thin event was made
	// with, while both are sent (a string, or an object with an id).
	SnapshotEvent expandable `json:"snapshot_event"`
}

// relatedObject is what a thin event (or a health event's impact) names.
type relatedObject struct {
	ID   text `json:"id"`
	Type text `json:"type"`
	URL  text `json:"url"`
}

// healthData is the data of a v2.core.health.event_generation_failure.resolved
// v2 Event.
type healthData struct {
	AlertID     text              `json:"alert_id"`
	GroupingKey text              `json:"grouping_key"`
	Summary     text              `json:"summary"`
	Severity    text              `json:"severity"` // critical, non_critical (from 2026-11-18.preview)
	ResolvedAt  webhooks.TimeHint `json:"resolved_at"`
	Impact      *struct {
		Context       text           `json:"context"` // the connected account the event was for
		Account       text           `json:"account"` // its name in earlier previews
		EventType     text           `json:"event_type"`
		RelatedObject *relatedObject `json:"related_object"`
	} `json:"impact"`
}

// thinEvent is a thin event as Plan reads it: the notification, and when
// it was fetched, the v2 Event and what was read of its object.
type thinEvent struct {
	note    notification
	fetched bool
	event   notification // the v2 Event's own members
	health  *healthData  // its data, for the health event
	related *fetchedObject
}

// fetchedObject is what was read of the object a thin event names.
type fetchedObject struct {
	Type      string         `json:"type"`
	ID        string         `json:"id"`
	Path      string         `json:"path"`
	Account   string         `json:"account,omitempty"`
	FetchedAt time.Time      `json:"fetched_at"`
	State     jsontext.Value `json:"state,omitempty"`  // GET <path>, as Stripe returned it
	Charge    jsontext.Value `json:"charge,omitempty"` // a refund's charge, GET /v1/charges/<id>
	Error     string         `json:"error,omitempty"`  // why it could not be read (Stripe has no such object)
}

// fetchedName is the "object" of a stored body the receiver composed from
// what it fetched for a thin event.
const fetchedName = "paywebhooks.fetched_thin_event"

// Verify implements webhooks.Provider: Stripe-Signature as for snapshot
// events (verifySigned), and a body that is a thin event. An event the
// receiver acts on, in the mode and of an account it acts on, is to be
// fetched (Event.Fetch); the others are planned as they came.
func (p *ThinProvider) Verify(h http.Header, body []byte, now time.Time) (webhooks.Event, error) {
	matched, _, err := verifySigned(h, body, p.secrets, now)
	if err != nil {
		return webhooks.Event{}, err
	}
	n := new(notification)
	if err := webhooks.UnmarshalSigned(body, n); err != nil {
		return webhooks.Event{}, webhooks.Reject("malformed_json", err)
	}
	switch {
	case n.Object == "event":
		return webhooks.Event{}, webhooks.Reject("not_a_thin_event",
			errors.New("a snapshot event (object \"event\"): its route is /webhooks/stripe, with STRIPE_WEBHOOK_SECRET"))
	case n.Object != "v2.core.event":
		return webhooks.Event{}, webhooks.Reject("not_an_event", fmt.Errorf("object %s", quote(n.Object)))
	case n.ID == "" || n.Type == "":
		return webhooks.Event{}, webhooks.Reject("not_an_event", errors.New("no id or type"))
	case !stripeID(n.ID):
		return webhooks.Event{}, webhooks.Reject("not_an_event", fmt.Errorf("id %s", quote(n.ID)))
	}
	ev := webhooks.Event{Source: ThinSource, Key: n.ID, ID: n.ID, Type: n.Type, Body: body,
		Payload: &thinEvent{note: *n}, SecretIndex: matched}
	if p.fetches(n) {
		named := ev
		ev.Fetch = func(ctx context.Context) (webhooks.Event, error) { return p.fetch(ctx, named, n) }
	}
	return ev, nil
}

// fetches reports whether a thin event is to be fetched before it is
// planned: a type the receiver acts on (not the ping), of the mode and
// account it acts on.
func (p *ThinProvider) fetches(n *notification) bool {
	return (n.Type == TypeGenerationFailure || v1Handled(n.Type)) && p.ignores(n) == ""
}

// ignores says why the provider's Filter leaves a thin event alone, or "".
func (p *ThinProvider) ignores(n *notification) string {
	return p.snap.filter.ignores(&envelope{eventHead: eventHead{Livemode: n.Livemode, Account: n.Context}})
}

// v1Handled reports whether t is the v1 thin version of a type the Stripe
// provider handles.
func v1Handled(t string) bool {
	s, ok := strings.CutPrefix(t, "v1.")
	return ok && slices.Contains(handledTypes, s)
}

// fetch makes a thin event whole: its v2 Event, and the current state of
// the object it acts on, bounded (FetchTimeout, MaxFetches, the requests
// and each response's size), within one run of the API client's bounds.
// Copies of the event that arrive while it is fetched wait for this fetch
// (one call for them all, one fetch slot), then race for its claim.
func (p *ThinProvider) fetch(ctx context.Context, named webhooks.Event, n *notification) (webhooks.Event, error) {
	if p.api == nil {
		return webhooks.Event{}, fmt.Errorf("%s is unset: a thin event is read from Stripe's API before it is acted on", apiKey.Name)
	}
	p.mu.Lock()
	f, joined := p.flights[n.ID]
	if !joined {
		f = &flight{done: make(chan struct{})}
		p.flights[n.ID] = f
	}
	p.mu.Unlock()
	if !joined {
		f.t, f.body, f.err = p.fly(ctx, named.Body, n)
		p.mu.Lock()
		delete(p.flights, n.ID)
		p.mu.Unlock()
		close(f.done)
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return webhooks.Event{}, ctx.Err()
	}
	if f.err != nil {
		return webhooks.Event{}, f.err
	}
	named.Body, named.Payload = f.body, f.t
	return named, nil
}

// fly is one fetch, within its bounds.
func (p *ThinProvider) fly(ctx context.Context, note []byte, n *notification) (*thinEvent, []byte, error) {
	select {
	case p.fetching <- struct{}{}:
		defer func() { <-p.fetching }()
	default:
		return nil, nil, fmt.Errorf("%d thin events are being fetched already: refused at once, Stripe retries", MaxFetches)
	}
	ctx, done := reconcile.Bound(ctx, reconcile.Limits{Timeout: p.timeout, MaxRequests: maxFetchRequests, MaxBody: maxFetchBody})
	defer done()
	t, body, err := p.read(ctx, note, n)
	return t, body, reconcile.Cause(ctx, err)
}

// read fetches what fetch stores: the v2 Event, and the object it acts on.
func (p *ThinProvider) read(ctx context.Context, note []byte, n *notification) (*thinEvent, []byte, error) {
	raw, err := p.api.V2Event(ctx, n.ID, string(n.Context))
	if err != nil {
		return nil, nil, err
	}
	t, err := decodeFetched(note, raw, nil)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("v2 event %s: %w", n.ID, err)
	case t.event.ID != n.ID || t.event.Type != n.Type:
		return nil, nil, fmt.Errorf("stripe's API returned event %s of type %s for the thin event %s of type %s",
			quote(t.event.ID), quote(t.event.Type), n.ID, quote(n.Type))
	}
	rel, account := t.target()
	if rel == nil || ObjectPath(string(rel.Type), string(rel.ID), string(rel.URL)) == "" {
		return t, fetchedBody(note, raw, nil), nil // nothing the receiver reads: the plan says so
	}
	if n.Type == TypeGenerationFailure && p.snap.filter.ignores(&envelope{eventHead: eventHead{Livemode: n.Livemode,
		Account: text(account)}}) != "" {
		return t, fetchedBody(note, raw, nil), nil // an account the receiver does not act on: nothing to read
	}
	obj := &fetchedObject{Type: string(rel.Type), ID: string(rel.ID), Account: account,
		Path: ObjectPath(string(rel.Type), string(rel.ID), string(rel.URL)), FetchedAt: p.now().UTC().Truncate(time.Second)}
	if obj.State, err = p.state(ctx, obj, obj.Path); err != nil {
		return nil, nil, err
	}
	if obj.State != nil && obj.Type == "refund" {
		// What the receiver applies of a refund is its charge's total refunded.
		var r objectState
		if err := webhooks.UnmarshalSigned(obj.State, &r); err != nil || !stripeID(string(r.Charge)) {
			obj.Error = fmt.Sprintf("refund %s names no charge", obj.ID)
		} else if obj.Charge, err = p.state(ctx, obj, "/v1/charges/"+string(r.Charge)); err != nil {
			return nil, nil, err
		}
	}
	t.related = obj
	return t, fetchedBody(note, raw, obj), nil
}

// state reads an object of obj's account and checks that it is a JSON
// object; one Stripe does not have (404) is none, and obj says why.
func (p *ThinProvider) state(ctx context.Context, obj *fetchedObject, path string) (jsontext.Value, error) {
	b, err := p.api.Object(ctx, path, obj.Account)
	if notFound(err) {
		obj.Error = err.Error()
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := jsontext.Value(bytes.TrimSpace(b))
	if v.Kind() != '{' || !webhooks.ValidSigned(v) {
		return nil, fmt.Errorf("GET %s: the answer is not a JSON object", path)
	}
	return v, nil
}

// target is the object a fetched thin event acts on, and the connected
// account it belongs to ("" for the platform's own): a v1 event's related
// object, or what a health event's impact names.
func (t *thinEvent) target() (*relatedObject, string) {
	if t.health != nil {
		if t.health.Impact == nil {
			return nil, ""
		}
		acct := cmpText(t.health.Impact.Context, t.health.Impact.Account)
		return t.health.Impact.RelatedObject, acct
	}
	rel := t.event.RelatedObject
	if rel == nil {
		rel = t.note.RelatedObject
	}
	return rel, string(t.note.Context)
}

func cmpText(a, b text) string {
	if a != "" {
		return string(a)
	}
	return string(b)
}

// fetchedBody is the body stored for a fetched thin event: the notification
// as Stripe signed it, the v2 Event and the object's state as the API
// returned them (byte for byte), and where and when the state was read:
//
//	{"object": "paywebhooks.fetched_thin_event", "notification": {…}, "event": {…},
//	 "related_object": {"type", "id", "path", "account", "fetched_at", "state": {…}, "charge": {…}, "error"}}
func fetchedBody(note, event []byte, r *fetchedObject) []byte {
	var b bytes.Buffer
	str := func(s string) { out, _ := jsontext.AppendQuote(nil, s); b.Write(out) }
	b.WriteString(`{"object":"` + fetchedName + `","notification":`)
	b.Write(bytes.TrimSpace(note))
	b.WriteString(`,"event":`)
	b.Write(bytes.TrimSpace(event))
	if r != nil {
		b.WriteString(`,"related_object":{"type":`)
		str(r.Type)
		b.WriteString(`,"id":`)
		str(r.ID)
		b.WriteString(`,"path":`)
		str(r.Path)
		if r.Account != "" {
			b.WriteString(`,"account":`)
			str(r.Account)
		}
		b.WriteString(`,"fetched_at":`)
		str(r.FetchedAt.UTC().Format(time.RFC3339))
		for _, v := range []struct {
			name string
			raw  jsontext.Value
		}{{"state", r.State}, {"charge", r.Charge}} {
			if len(v.raw) > 0 {
				b.WriteString(`,"` + v.name + `":`)
				b.Write(v.raw)
			}
		}
		if r.Error != "" {
			b.WriteString(`,"error":`)
			str(r.Error)
		}
		b.WriteString("}")
	}
	b.WriteString("}")
	return b.Bytes()
}

// decodeFetched reads a fetched thin event from its notification and v2
// Event (and what was read of its object).
func decodeFetched(note, event []byte, r *fetchedObject) (*thinEvent, error) {
	t := &thinEvent{fetched: true, related: r}
	if err := webhooks.UnmarshalSigned(note, &t.note); err != nil {
		return nil, fmt.Errorf("notification: %w", err)
	}
	if err := webhooks.UnmarshalSigned(event, &t.event); err != nil {
		return nil, err
	}
	if t.event.Type == TypeGenerationFailure {
		var d struct {
			Data *healthData `json:"data"`
		}
		if err := webhooks.UnmarshalSigned(event, &d); err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		if d.Data == nil {
			d.Data = &healthData{}
		}
		t.health = d.Data
	}
	return t, nil
}

// thinOf returns the thin event as Verify or fetch decoded it, or decodes
// a stored body: a notification as it came, or what fetch composed.
func thinOf(ev *webhooks.Event) (*thinEvent, error) {
	if t, ok := ev.Payload.(*thinEvent); ok {
		return t, nil
	}
	var head struct {
		Object       string         `json:"object"`
		Notification jsontext.Value `json:"notification"`
		Event        jsontext.Value `json:"event"`
		Related      *fetchedObject `json:"related_object"`
	}
	if err := webhooks.UnmarshalSigned(ev.Body, &head); err != nil {
		return nil, webhooks.Unprocessable("thin event %s: %v", ev.ID, err)
	}
	var t *thinEvent
	switch head.Object {
	case "v2.core.event":
		t = &thinEvent{}
		if err := webhooks.UnmarshalSigned(ev.Body, &t.note); err != nil {
			return nil, webhooks.Unprocessable("thin event %s: %v", ev.ID, err)
		}
	case fetchedName:
		var err error
		if t, err = decodeFetched(head.Notification, head.Event, head.Related); err != nil {
			return nil, webhooks.Unprocessable("thin event %s: %v", ev.ID, err)
		}
	default:
		return nil, webhooks.Unprocessable("thin event %s: a stored body of object %s", ev.ID, quote(head.Object))
	}
	ev.Payload = t
	return t, nil
}

// Plan implements webhooks.Provider: a ping is processed with nothing to
// do; another mode's or an unlisted account's event is ignored; a fetched
// v1 thin event is applied by the Stripe provider's plan, a health event
// is recovered; any other type is acknowledged.
func (p *ThinProvider) Plan(ev *webhooks.Event, plan *webhooks.Plan) error {
	t, err := thinOf(ev)
	if err != nil {
		return err
	}
	if why := p.ignores(&t.note); why != "" {
		return ignored(why)
	}
	acts := ev.Type == TypeGenerationFailure || v1Handled(ev.Type)
	switch {
	case ev.Type == TypeDestinationPing:
		return nil
	case acts && !t.fetched:
		// Stored as it came (ignored then, by the mode or the accounts of
		// that time): a replay cannot fetch it.
		return ignored("stored as Stripe notified it, without what a fetch would have read: a replay does not fetch; " +
			"see the object in the Dashboard")
	case ev.Type == TypeGenerationFailure:
		return p.recover(ev, t, plan)
	case acts:
		return p.apply(ev, t, plan)
	}
	return webhooks.ErrUnhandled
}

// families are the object types each handled event type is about, by a
// prefix of the type (the refund object's events too, for a provider that
// handles them).
var families = map[string]string{
	"checkout.session.":      "checkout.session",
	"invoice.":               "invoice",
	"charge.refunded":        "charge",
	"charge.refund.":         "refund",
	"refund.":                "refund",
	"customer.subscription.": "subscription",
	"charge.dispute.":        "dispute",
	"customer.created":       "customer",
	"customer.updated":       "customer",
}

// family is the object type an event type is about.
func family(eventType string) string {
	for prefix, f := range families {
		if strings.HasPrefix(eventType, prefix) {
			return f
		}
	}
	return ""
}

// apply plans a v1 thin event: its object's fetched state, as the
// snapshot event of its type does.
func (p *ThinProvider) apply(ev *webhooks.Event, t *thinEvent, plan *webhooks.Plan) error {
	typ := strings.TrimPrefix(ev.Type, "v1.")
	r := t.related
	switch {
	case r == nil:
		return webhooks.Unprocessable("%s %s: it names no object the receiver reads", ev.Type, ev.ID)
	case r.Error != "":
		return webhooks.Unprocessable("%s %s: %s %s could not be read: %s", ev.Type, ev.ID, r.Type, r.ID, r.Error)
	case r.Type != family(typ):
		return webhooks.Unprocessable("%s %s: it names %s %s, not a %s", ev.Type, ev.ID, quote(r.Type), r.ID, family(typ))
	}
	id := ev.ID
	if s := string(t.event.SnapshotEvent); stripeID(s) {
		id = s
	}
	synth, err := synthetic(id, typ, t.note.Livemode, r.Account, r.FetchedAt, r.State)
	if err != nil {
		return webhooks.Unprocessable("%s %s: %v", ev.Type, ev.ID, err)
	}
	return p.snap.Plan(&synth, plan)
}

// synthetic is the snapshot event a fetched state is applied as: of type
// typ, under id, created at (the second the state was fetched), in the
// mode and account of the thin event, with the state as data.object. It
// is planned by the Stripe provider as a delivered one is; it is never
// stored (the thin event's body is).
func synthetic(id, typ string, live flag, account string, at time.Time, state jsontext.Value) (webhooks.Event, error) {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	q, _ := jsontext.AppendQuote(nil, id)
	b.Write(q)
	b.WriteString(`,"object":"event","type":`)
	q, _ = jsontext.AppendQuote(nil, typ)
	b.Write(q)
	fmt.Fprintf(&b, `,"created":%d,"livemode":%t`, at.Unix(), live.live())
	if account != "" {
		b.WriteString(`,"account":`)
		q, _ = jsontext.AppendQuote(nil, account)
		b.Write(q)
	}
	b.WriteString(`,"data":{"object":`)
	b.Write(state)
	b.WriteString(`}}`)
	return Decode(b.Bytes())
}

// objectState is what recover reads of an object to tell which event its
// state is applied as, and to say so.
type objectState struct {
	Status         text        `json:"status"`
	PaymentStatus  text        `json:"payment_status"`
	AmountTotal    optionalInt `json:"amount_total"`
	AmountPaid     optionalInt `json:"amount_paid"`
	Amount         optionalInt `json:"amount"`
	AmountRefunded optionalInt `json:"amount_refunded"`
	Currency       text        `json:"currency"`
	Charge         expandable  `json:"charge"`
}

// recoveryType is the handled event type a recovered object's state is
// applied as, and what that does, in words; "" when the state asks nothing
// of the receiver. The missing event's type (eventType) decides where the
// state allows it; otherwise the state does: a paid Checkout Session is
// applied as async_payment_succeeded, which creates its order paid, or
// moves a pending one to paid.
func recoveryType(objType, eventType string, s objectState) (string, string) {
	missing := func(types ...string) bool { return slices.Contains(types, eventType) }
	amount := func(n optionalInt) string {
		if !n.Set {
			return ""
		}
		return fmt.Sprintf(", %d %s", n.N, s.Currency)
	}
	switch objType {
	case "checkout.session":
		if s.Status != "complete" {
			return "", fmt.Sprintf("the session is %s: no purchase to record", quote(string(s.Status)))
		}
		state := fmt.Sprintf("complete and %s%s", s.PaymentStatus, amount(s.AmountTotal))
		switch s.PaymentStatus {
		case "paid", "no_payment_required":
			typ := "checkout.session.async_payment_succeeded"
			if missing("checkout.session.completed") {
				typ = "checkout.session.completed"
			}
			return typ, "the session is " + state + ": its order is created paid (or moved to paid) unless it already is, " +
				"with the confirmation email and the fulfillment call, each once"
		case "unpaid":
			if missing("checkout.session.async_payment_failed") {
				return "checkout.session.async_payment_failed", "the session is " + state +
					": its pending order is marked payment_failed, with the payment-failed email, once"
			}
			return "checkout.session.completed", "the session is " + state + ": its order is recorded pending payment"
		}
		return "", "the session is " + state + ": nothing to record"
	case "invoice":
		state := fmt.Sprintf("the invoice is %s%s", s.Status, amount(s.AmountPaid))
		switch {
		case s.Status == "paid":
			return "invoice.paid", state + ": it is recorded paid, with the receipt email, once"
		case s.Status == "open" && missing("invoice.payment_failed"):
			return "invoice.payment_failed", state + ": the failed attempt is recorded, with the dunning email, once"
		case s.Status == "open" && missing("invoice.payment_action_required"):
			return "invoice.payment_action_required", state + ": the attempt is recorded as waiting for the customer, " +
				"with the email asking them to confirm the payment, once"
		case s.Status == "open":
			return "invoice.finalized", state + ": it is recorded pending"
		case s.Status == "draft":
			return "invoice.created", state + ": it is recorded pending"
		}
		return "", state + ": nothing to record"
	case "subscription":
		state := fmt.Sprintf("the subscription is %s", s.Status)
		switch {
		case s.Status == "canceled" || s.Status == "incomplete_expired":
			return "customer.subscription.deleted", state + ": it is recorded ended, with the subscription-ended email, once"
		case missing("customer.subscription.trial_will_end") && s.Status == "trialing":
			return "customer.subscription.trial_will_end", state + ": the trial-ending email goes, once"
		case s.Status != "":
			return "customer.subscription.updated", state + ": its row takes this state"
		}
		return "", "the subscription has no status: nothing to record"
	case "charge", "refund":
		if s.AmountRefunded.N <= 0 {
			return "", "the charge has nothing refunded: nothing to record"
		}
		return "charge.refunded", fmt.Sprintf("the charge has %d %s refunded: the order's refund is recorded, with the "+
			"refund email, once", s.AmountRefunded.N, s.Currency)
	case "dispute":
		state := fmt.Sprintf("the dispute is %s%s", s.Status, amount(s.Amount))
		if missing("charge.dispute.created") {
			return "charge.dispute.created", state + ": it is recorded, with the notice to NOTIFY_EMAIL, once"
		}
		return "charge.dispute.updated", state + ": its row takes this state"
	case "customer":
		return "customer.updated", "the customer's address is remembered"
	}
	return "", ""
}

// Queries of stripe_health_alerts (migration 19): one row per alert Stripe
// names, written with the health event's claim; the operator alert is
// planned only when this transaction wrote it.
const (
	healthAlertSQL = `
INSERT INTO stripe_health_alerts (alert_id, provider_event_id, event_type, object_type, object_id, account_id,
                                  severity, applied_as, resolved_at)
SELECT $1, $2, NULLIF($3, ''), NULLIF($4, ''), NULLIF($5, ''), NULLIF($6, ''), NULLIF($7, ''), NULLIF($8, ''),
       $9::timestamptz
WHERE receiver_claimed()
ON CONFLICT (alert_id) DO NOTHING`
	healthAlertNewSQL = `SELECT NULL::jsonb FROM stripe_health_alerts WHERE alert_id = $1 AND xmin = pg_current_xact_id()::xid`
)
