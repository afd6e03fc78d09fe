package stripe

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// recover plans a v2.core.health.event_generation_failure.resolved event:
// Stripe failed to generate an event for the object its data.impact names
// (impact.event_type, impact.related_object), and will never deliver it
// nor list it. The object's current state, fetched with the event, is
// applied as that event would have applied it, through the Stripe
// provider's own plan, as a synthetic snapshot event under the health
// event's id (a paid Checkout Session becomes its order, confirmation
// email and fulfillment call, unless it already has them: a copy of the
// missing event, or of this one, changes nothing more). The alert Stripe
// names (data.alert_id) is recorded in stripe_health_alerts with the
// event's claim, and the operator alert (CauseGenerationFailure: its
// summary, severity and what was recovered, or what to check by hand) is
// planned only when that row is new: once per Stripe alert, whatever
// delivers, replays or reports it again.
func (p *ThinProvider) recover(ev *webhooks.Event, t *thinEvent, plan *webhooks.Plan) error {
	d := t.health
	if d == nil {
		d = &healthData{}
	}
	var f failure
	if d.Impact != nil {
		f.eventType = string(d.Impact.EventType)
		if d.Impact.RelatedObject != nil {
			f.object = *d.Impact.RelatedObject
		}
		f.account = cmpText(d.Impact.Context, d.Impact.Account)
	}
	f.alertID = string(d.AlertID)
	if !stripeID(f.alertID) {
		f.alertID = ev.ID
	}
	f.appliedAs, f.what, f.byHand = p.recovered(ev, t, f, plan)
	var resolved any
	if at := d.ResolvedAt.Time(); !at.IsZero() {
		resolved = at
	}
	plan.Exec(healthAlertSQL, f.alertID, ev.ID, f.eventType, string(f.object.Type), string(f.object.ID), f.account,
		string(d.Severity), f.appliedAs, resolved)
	steps, err := alerts.EventSteps(healthAlert(ev, t, d, f))
	if err != nil {
		return err
	}
	for _, s := range steps {
		plan.StepIf(s, healthAlertNewSQL, f.alertID)
	}
	return nil
}

// failure is what a health event reports, and what became of it.
type failure struct {
	alertID   string
	eventType string // the event Stripe failed to generate
	object    relatedObject
	account   string
	appliedAs string // the event type its state was applied as; "": none
	what      string // what was recovered, or why nothing was, in words
	byHand    bool   // an operator must look at the object
}

// recovered plans what can be applied of the object's fetched state, and
// says what it did.
func (p *ThinProvider) recovered(ev *webhooks.Event, t *thinEvent, f failure, plan *webhooks.Plan) (appliedAs, what string, byHand bool) {
	r := t.related
	obj := fmt.Sprintf("%s %s", clip(string(f.object.Type)), clip(string(f.object.ID)))
	switch {
	case f.object.ID == "":
		return "", "Stripe names no object: see the alert in Workbench (Health)", true
	case r == nil:
		if why := p.snap.filter.ignores(&envelope{eventHead: eventHead{Livemode: t.note.Livemode, Account: text(f.account)}}); why != "" {
			return "", "nothing, by this receiver's configuration: " + why, false
		}
		return "", fmt.Sprintf("nothing: the receiver does not act on %s objects; check %s by hand", clip(string(f.object.Type)), obj), true
	case r.Error != "":
		return "", fmt.Sprintf("nothing: its current state could not be read (%s); check %s by hand", clip(r.Error), obj), true
	}
	state := r.State
	if r.Type == "refund" {
		state = r.Charge
	}
	var s objectState
	if err := webhooks.UnmarshalSigned(state, &s); err != nil {
		return "", fmt.Sprintf("nothing: its state could not be read (%v); check %s by hand", err, obj), true
	}
	typ, how := recoveryType(r.Type, f.eventType, s)
	if typ == "" {
		return "", "nothing to apply: " + how, false
	}
	synth, err := synthetic(ev.ID, typ, t.note.Livemode, f.account, r.FetchedAt, state)
	if err == nil {
		// Planned aside first: a state the Stripe plan cannot apply (or
		// ignores) is reported, and the alert still raised.
		err = p.snap.Plan(&synth, new(webhooks.Plan))
	}
	switch {
	case errors.Is(err, webhooks.ErrUnhandled):
		return "", "nothing, by this receiver's configuration: " + webhooks.Redact(err.Error(), 300), false
	case err != nil:
		return "", fmt.Sprintf("nothing: its state cannot be applied as %s (%s); check %s by hand", typ,
			webhooks.Redact(err.Error(), 300), obj), true
	}
	if err := p.snap.Plan(&synth, plan); err != nil {
		return "", fmt.Sprintf("nothing: %s; check %s by hand", webhooks.Redact(err.Error(), 300), obj), true
	}
	return typ, "applied as " + typ + ": " + how, false
}

// healthAlert is the operator alert of a health event: what Stripe said
// (its summary, severity, alert, the event and object), and what was
// recovered. It names no customer address (Redact) and no secret.
func healthAlert(ev *webhooks.Event, t *thinEvent, d *healthData, f failure) alerts.Alert {
	at := t.note.Created.Time()
	if at.IsZero() {
		at = time.Now()
	}
	sev := clip(string(d.Severity))
	if sev == "" {
		sev = "not given"
	}
	missing := clip(f.eventType)
	if missing == "" {
		missing = "an event"
	}
	obj := strings.TrimSpace(clip(string(f.object.Type)) + " " + clip(string(f.object.ID)))
	if obj == "" {
		obj = "an object it does not name"
	}
	outcome := "nothing to recover"
	switch {
	case f.appliedAs != "":
		outcome = "recovered"
	case f.byHand:
		outcome = "check it by hand"
	}
	owner := "the platform's own"
	if f.account != "" {
		owner = "connected account " + clip(f.account)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Stripe reports that it failed to generate an event, which it will never deliver nor list:\n")
	fmt.Fprintf(&b, "  missing event: %s\n  object: %s (%s)\n", missing, obj, owner)
	fmt.Fprintf(&b, "  severity: %s; Stripe alert %s", sev, clip(f.alertID))
	if r := d.ResolvedAt.Time(); !r.IsZero() {
		fmt.Fprintf(&b, ", resolved %s", r.UTC().Format(time.RFC3339))
	}
	if s := webhooks.Redact(string(d.Summary), 300); s != "" {
		fmt.Fprintf(&b, "\n  Stripe's summary: %q", s)
	}
	fmt.Fprintf(&b, "\nRecovered: %s.\n", f.what)
	if r := t.related; r != nil && r.Error == "" {
		fmt.Fprintf(&b, "The receiver read the object's current state (GET %s at %s) and applied it through the Stripe "+
			"provider's own plan, as its missing event would have: a copy of that event, or of this report, changes "+
			"nothing more.\n", r.Path, r.FetchedAt.UTC().Format("15:04:05Z"))
	}
	fmt.Fprintf(&b, "Reported by %s %s (server events show %s).", ev.Type, ev.ID, ev.ID)
	return alerts.Alert{Cause: alerts.CauseGenerationFailure, Subject: Source, Hour: alerts.Hour(at), Episode: f.alertID,
		Title: fmt.Sprintf("stripe: Stripe never generated %s for %s (severity %s); %s", missing, obj, sev, outcome),
		Text:  b.String()}
}

// clip is a value from Stripe's API as an alert quotes it: bounded, and
// without an address.
func clip(s string) string { return webhooks.Redact(s, 120) }

// thinExample is ThinSpec.Example: a v2.core.event_destination.ping of a
// new id, which the receiver answers 200 processed without fetching (a
// thin event it acts on names an event only Stripe's API can give; see
// cmd/loadgen for thin events served by a fake API of its own).
func thinExample(r *rand.Rand, at time.Time) webhooks.Example {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	id := func(prefix string, n int) string {
		b := []byte(prefix)
		for range n {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		return string(b)
	}
	evt, ed := id("evt_test_65", 40), id("ed_test_61", 40)
	body := fmt.Appendf(nil, `{
  "id": %q,
  "object": "v2.core.event",
  "type": %q,
  "livemode": false,
  "created": %q,
  "context": null,
  "related_object": {
    "id": %q,
    "type": "v2.core.event_destination",
    "url": "/v2/core/event_destinations/%s"
  }
}`, evt, TypeDestinationPing, at.UTC().Format("2006-01-02T15:04:05.000Z"), ed, ed)
	return webhooks.Example{ID: evt, Body: body, Header: http.Header{}}
}
