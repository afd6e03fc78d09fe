package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
)

// Thin events, for -provider stripe_thin (POST /webhooks/stripe/thin):
//
//   - example: a v2.core.event_destination.ping (the Spec's Example),
//     which the receiver processes without fetching anything;
//   - thin-checkout: v1.checkout.session.completed of a new paid Checkout
//     Session, and thin-health: v2.core.health.event_generation_failure.resolved
//     naming one whose checkout.session.completed Stripe never generated.
//     The receiver fetches both from Stripe's API before it acts: point its
//     STRIPE_API_BASE at the API loadgen serves with -stripe-api (and give
//     it any test key, STRIPE_API_KEY=sk_test_…), which answers the event
//     and the session of every id loadgen makes, from the id alone, so a
//     replay or a -pool run of another loadgen is answered too.
const (
	thinCheckout = "thin-checkout"
	thinHealth   = "thin-health"
)

// thinEvents are the thin events loadgen makes beside the Spec's Example.
var thinEvents = []string{thinCheckout, thinHealth}

// Prefixes of the ids of loadgen's thin events: the kind, then the tail
// the event's Checkout Session shares.
const (
	thinCheckoutPrefix = "evt_test_65lgc"
	thinHealthPrefix   = "evt_test_65lgh"
	thinSessionPrefix  = "cs_test_lg"
)

// thinDelivery makes a thin event of the given kind: its notification, as
// Stripe posts it to an event destination.
func thinDelivery(event string, r rng, now time.Time) delivery {
	tail := randID(r, 24)
	prefix, typ := thinCheckoutPrefix, "v1.checkout.session.completed"
	if event == thinHealth {
		prefix, typ = thinHealthPrefix, stripe.TypeGenerationFailure
	}
	id := prefix + tail
	note := map[string]any{"id": id, "object": "v2.core.event", "type": typ, "livemode": false,
		"created": now.UTC().Format("2006-01-02T15:04:05.000Z"), "context": nil}
	if event == thinCheckout {
		note["related_object"] = sessionRef(tail)
	}
	body, err := json.MarshalIndent(note, "", "  ")
	if err != nil {
		panic(err)
	}
	return delivery{id: id, body: body}
}

func sessionRef(tail string) map[string]any {
	cs := thinSessionPrefix + tail
	return map[string]any{"id": cs, "type": "checkout.session", "url": "/v1/checkout/sessions/" + cs}
}

// thinAPI is the part of Stripe's API the receiver reads for loadgen's
// thin events: GET /v2/core/events/<id> and GET /v1/checkout/sessions/<id>,
// answered from the id (any key; a request without one is refused 401, as
// Stripe refuses it).
func thinAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/core/events/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		var ev map[string]any
		switch {
		case strings.HasPrefix(id, thinCheckoutPrefix):
			ev = map[string]any{"type": "v1.checkout.session.completed",
				"related_object": sessionRef(strings.TrimPrefix(id, thinCheckoutPrefix))}
		case strings.HasPrefix(id, thinHealthPrefix):
			ev = map[string]any{"type": stripe.TypeGenerationFailure, "data": map[string]any{
				"alert_id": "halert_test_lg" + strings.TrimPrefix(id, thinHealthPrefix), "severity": "non_critical",
				"summary":     "loadgen: a checkout.session.completed Stripe never generated",
				"resolved_at": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
				"impact": map[string]any{"event_type": "checkout.session.completed",
					"related_object": sessionRef(strings.TrimPrefix(id, thinHealthPrefix))},
			}}
		default:
			thinAPIError(w, http.StatusNotFound, "No such event: '"+id+"'")
			return
		}
		ev["id"], ev["object"], ev["livemode"], ev["context"] = id, "v2.core.event", false, nil
		ev["created"] = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
		thinAPIAnswer(w, r, ev)
	})
	mux.HandleFunc("GET /v1/checkout/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		cs := r.PathValue("id")
		tail, ok := strings.CutPrefix(cs, thinSessionPrefix)
		if !ok {
			thinAPIError(w, http.StatusNotFound, "No such checkout.session: '"+cs+"'")
			return
		}
		thinAPIAnswer(w, r, map[string]any{"id": cs, "object": "checkout.session", "mode": "payment", "status": "complete",
			"payment_status": "paid", "amount_total": 3000, "currency": "usd", "payment_intent": "pi_test_lg" + tail,
			"customer_details": map[string]any{"email": fmt.Sprintf("buyer+%s@example.com", strings.ToLower(tail[:8]))},
			"customer_email":   nil})
	})
	return mux
}

func thinAPIAnswer(w http.ResponseWriter, r *http.Request, v any) {
	if r.Header.Get("Authorization") == "" {
		thinAPIError(w, http.StatusUnauthorized, "You did not provide an API key.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func thinAPIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": "invalid_request_error",
		"code": "resource_missing", "message": msg}})
}
