package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
)

// Deliveries built at test time, in the shapes of the fixtures under
// internal/providers/stripe/testdata and github/testdata, signed as
// the senders sign them.

func signStripe(body []byte, secret string, at time.Time) string {
	return stripe.SignatureHeader(body, secret, at)
}

func signGitHub(body []byte, secret string) string {
	return "sha256=" + hex.EncodeToString(github.Sign(body, secret))
}

// hmacHex is HMAC-SHA256(secret, msg) in hex.
func hmacHex(secret string, msg []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(msg)
	return hex.EncodeToString(mac.Sum(nil))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// stripeEvent is a Stripe Event envelope around object.
func stripeEvent(id, typ string, object map[string]any) []byte {
	return stripeEventAt(id, typ, time.Unix(1764460800, 0), object)
}

// stripeEventAt is a Stripe Event envelope around object, created at
// created (which a catch-up's --since window selects on).
func stripeEventAt(id, typ string, created time.Time, object map[string]any) []byte {
	return mustJSON(map[string]any{
		"id":               id,
		"object":           "event",
		"api_version":      "2023-10-16",
		"created":          created.Unix(),
		"data":             map[string]any{"object": object},
		"livemode":         false,
		"pending_webhooks": 1,
		"request":          map[string]any{"id": "req_e2e", "idempotency_key": nil},
		"type":             typ,
	})
}

// checkout is a paid checkout.session.completed: an order, a confirmation
// email and a fulfillment call.
func checkout(n int, prefix string) delivery {
	return checkoutAt(n, prefix, time.Unix(1764460800, 0))
}

// checkoutAt is checkout's event, created at created.
func checkoutAt(n int, prefix string, created time.Time) delivery {
	id := fmt.Sprintf("evt_%s_checkout_%04d", prefix, n)
	d := stripeDelivery(id, stripeEventAt(id, "checkout.session.completed", created, map[string]any{
		"id":               checkoutSession(n, prefix),
		"object":           "checkout.session",
		"mode":             "payment",
		"payment_status":   "paid",
		"status":           "complete",
		"amount_total":     1000 + n,
		"currency":         "usd",
		"payment_intent":   fmt.Sprintf("pi_%s_%04d", prefix, n),
		"customer_details": map[string]any{"email": fmt.Sprintf("buyer%d@example.com", n), "name": "Buyer"},
		"customer_email":   nil,
	}))
	d.Object = "order:stripe:" + checkoutSession(n, prefix)
	return d
}

func checkoutSession(n int, prefix string) string { return fmt.Sprintf("cs_%s_%04d", prefix, n) }

// invoiceEvent is invoice.created or invoice.paid for invoice n. Only
// invoice.paid has a step (the receipt email).
func invoiceEvent(n int, prefix, typ string) delivery {
	short := map[string]string{"invoice.created": "created", "invoice.paid": "paid"}[typ]
	id := fmt.Sprintf("evt_%s_invoice_%04d_%s", prefix, n, short)
	status, paid := "draft", 0
	if typ == "invoice.paid" {
		status, paid = "paid", 2000+n
	}
	d := stripeDelivery(id, stripeEvent(id, typ, map[string]any{
		"id":             invoiceID(n, prefix),
		"object":         "invoice",
		"status":         status,
		"amount_due":     2000 + n,
		"amount_paid":    paid,
		"currency":       "usd",
		"customer_email": fmt.Sprintf("payer%d@example.com", n),
		"attempt_count":  1,
		"billing_reason": "subscription_cycle",
	}))
	if typ == "invoice.paid" {
		d.Object = "invoice:" + invoiceID(n, prefix) // its receipt is the invoice's
	}
	return d
}

func invoiceID(n int, prefix string) string { return fmt.Sprintf("in_%s_%04d", prefix, n) }

// unknownStripeEvent is an event type the receiver does not handle.
func unknownStripeEvent(id string) delivery {
	return stripeDelivery(id, stripeEvent(id, "product.created", map[string]any{
		"id": "prod_e2e", "object": "product", "name": "T-shirt",
	}))
}

// purchase is a GitHub marketplace_purchase purchased for account
// 100000+n: an order (external_id "account:<id>"), a welcome email and a
// fulfillment call, steps of the order's sale of 2026-01-05.
func purchase(n int, prefix string) delivery {
	guid := fmt.Sprintf("%s-%08x-0000-4000-8000-%012x", prefix, n, n)
	d := githubDelivery("marketplace_purchase", guid, mustJSON(map[string]any{
		"action":         "purchased",
		"effective_date": "2026-01-05T00:00:00+00:00",
		"sender":         map[string]any{"login": "admin", "id": 501, "type": "User"},
		"marketplace_purchase": map[string]any{
			"account": map[string]any{
				"type": "Organization", "id": accountID(n), "login": fmt.Sprintf("org%d", n),
				"organization_billing_email": fmt.Sprintf("billing%d@org.example", n),
			},
			"billing_cycle": "monthly",
			"unit_count":    1,
			"on_free_trial": false,
			"plan": map[string]any{
				"id": 7, "name": "Pro", "monthly_price_in_cents": 1500, "yearly_price_in_cents": 15000,
				"price_model": "FLAT_RATE", "has_free_trial": false, "unit_name": nil,
			},
		},
	}))
	// Each purchase of an account is a sale of its own, told by its
	// effective date (in UTC, RFC 3339).
	d.Object = fmt.Sprintf("order:github_marketplace:account:%d:2026-01-05T00:00:00Z", accountID(n))
	return d
}

func accountID(n int) int { return 100000 + n }

// Step names, as the providers plan them.
const (
	stepConfirmation = "email.confirmation"
	stepFulfillment  = "fulfillment"
	stepReceipt      = "email.receipt"
	stepWelcome      = "email.welcome"
)
