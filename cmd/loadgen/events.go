package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"time"
)

// delivery is one event as the sender keeps it: the same body (and, for
// GitHub, the same delivery GUID) on every attempt and every replay. Only
// the Stripe signature changes, because Stripe signs each attempt with the
// time it is sent.
type delivery struct {
	id     string // Stripe evt_… or GitHub delivery GUID
	kind   string // X-GitHub-Event; unused for Stripe
	body   []byte
	replay bool
}

// hookID is the X-GitHub-Hook-ID loadgen sends: one hook.
const hookID = "4242"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randID returns n random base62 characters, like the tail of a Stripe id.
func randID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = base62[int(b[i])%len(base62)]
	}
	return string(b)
}

func randInt(max int64) int64 {
	n, err := rand.Int(rand.Reader, big.NewInt(max))
	if err != nil {
		panic(err)
	}
	return n.Int64() + 1
}

func uuid() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newDelivery builds a fresh event of the given kind, with ids no receiver
// has seen.
func newDelivery(event string, now time.Time) delivery {
	switch event {
	case "invoice":
		id := "evt_lg" + randID(22)
		return delivery{id: id, body: fmt.Appendf(nil, `{
  "id": %q,
  "object": "event",
  "api_version": "2023-10-16",
  "created": %d,
  "data": {
    "object": {
      "id": "in_lg%s",
      "object": "invoice",
      "status": "draft",
      "amount_due": 2000,
      "amount_paid": 0,
      "currency": "usd",
      "customer_email": "payer@example.com",
      "attempt_count": 0,
      "billing_reason": "subscription_cycle"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": "req_lg%s", "idempotency_key": null},
  "type": "invoice.created"
}`, id, now.Unix(), randID(22), randID(14))}
	case "checkout":
		id := "evt_lg" + randID(22)
		return delivery{id: id, body: fmt.Appendf(nil, `{
  "id": %q,
  "object": "event",
  "api_version": "2023-10-16",
  "created": %d,
  "data": {
    "object": {
      "id": "cs_lg%s",
      "object": "checkout.session",
      "mode": "payment",
      "payment_status": "paid",
      "status": "complete",
      "amount_total": 3000,
      "currency": "usd",
      "payment_intent": "pi_lg%s",
      "customer_details": {"email": "buyer@example.com", "name": "Load Test"},
      "customer_email": null
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": "req_lg%s", "idempotency_key": null},
  "type": "checkout.session.completed"
}`, id, now.Unix(), randID(22), randID(22), randID(14))}
	case "github-purchase":
		account := randInt(1 << 52)
		return delivery{id: uuid(), kind: "marketplace_purchase", body: fmt.Appendf(nil, `{
  "action": "purchased",
  "effective_date": %q,
  "sender": {"login": "loadgen-admin", "id": 501, "type": "User"},
  "marketplace_purchase": {
    "account": {
      "type": "Organization",
      "id": %d,
      "node_id": "O_lg%s",
      "login": "loadgen-%d",
      "organization_billing_email": "billing@example.com"
    },
    "billing_cycle": "monthly",
    "unit_count": 1,
    "on_free_trial": false,
    "free_trial_ends_on": null,
    "next_billing_date": null,
    "plan": {
      "id": 7,
      "name": "Pro",
      "description": "Pro plan",
      "monthly_price_in_cents": 1500,
      "yearly_price_in_cents": 15000,
      "price_model": "FLAT_RATE",
      "has_free_trial": false,
      "unit_name": null,
      "bullets": ["Everything"]
    }
  }
}`, now.UTC().Format(time.RFC3339), account, randID(12), account)}
	}
	panic("unknown event " + event)
}

// signStripe is the Stripe-Signature header of body sent at t:
// t=<unix>,v1=hex(HMAC-SHA256(secret, "<unix>.<body>")).
func signStripe(body []byte, secret string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// signGitHub is the X-Hub-Signature-256 header of body.
func signGitHub(body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// headers are the headers of one attempt of d, signed at now.
func headers(provider, secret string, d delivery, now time.Time) http.Header {
	h := http.Header{}
	switch provider {
	case "stripe":
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks) loadgen")
		h.Set("Stripe-Signature", signStripe(d.body, secret, now))
	case "github":
		h.Set("Content-Type", "application/json")
		h.Set("User-Agent", "GitHub-Hookshot/loadgen")
		h.Set("X-GitHub-Event", d.kind)
		h.Set("X-GitHub-Delivery", d.id)
		h.Set("X-GitHub-Hook-ID", hookID)
		h.Set("X-Hub-Signature-256", signGitHub(d.body, secret))
	}
	return h
}
