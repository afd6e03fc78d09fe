package main

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// burstEvent is -event burst: the events of customers' Checkouts of a
// subscription, as Stripe sends them within a second of each other, each
// naming the customer: checkout.session.completed, customer.created (or,
// of a customer seen before, customer.updated),
// customer.subscription.created, invoice.created, invoice.finalized,
// invoice.paid and payment_intent.succeeded. Deliveries go out in that
// order, checkout after checkout, so that with -concurrency 16 the events
// of two or three checkouts are in flight at once; every checkout has
// objects of its own (session, subscription, invoice, payment intent).
// With -customers N every checkout is one of N customers' (each with its
// one address); without, each is a new customer's.
const burstEvent = "burst"

// burstKinds are the events of one checkout, in the order they are sent;
// "customer" is customer.created or customer.updated.
var burstKinds = []string{
	"checkout.session.completed", "customer", "customer.subscription.created", "invoice.created",
	"invoice.finalized", "invoice.paid", "payment_intent.succeeded",
}

// burstTemplates are the bodies of burstKinds, in that order.
var burstTemplates = func() []*template {
	session := checkoutObject()
	for k, v := range map[string]any{
		"mode": "subscription", "subscription": slot("sub"), "invoice": slot("in"), "payment_intent": nil,
		"submit_type": nil, "customer_creation": "always", "amount_subtotal": shop.plan, "amount_total": shop.plan,
		"total_details": ordered{{"amount_discount", 0}, {"amount_shipping", 0}, {"amount_tax", 0}},
	} {
		session = session.with(k, v)
	}
	created := invoiceObject(false).with("billing_reason", "subscription_create")
	paid := invoiceObject(true).with("billing_reason", "subscription_create")
	// Finalized: numbered, with its links, not paid yet.
	finalized := created
	for _, k := range []string{"number", "hosted_invoice_url", "invoice_pdf"} {
		finalized = finalized.with(k, paid.get(k))
	}
	finalized = finalized.with("status", "open").with("status_transitions", ordered{
		{"finalized_at", num("created")},
		{"marked_uncollectible_at", nil},
		{"paid_at", nil},
		{"voided_at", nil},
	})
	return []*template{
		compile(eventEnvelope("checkout.session.completed", session, true)),
		compile(eventEnvelope("{{customer_event}}", customerObject(), true)),
		compile(eventEnvelope("customer.subscription.created", subscriptionObject(), true)),
		compile(eventEnvelope("invoice.created", created, false)),
		compile(eventEnvelope("invoice.finalized", finalized, false)),
		compile(eventEnvelope("invoice.paid", paid, false)),
		compile(eventEnvelope("payment_intent.succeeded", paymentIntentObject(), true)),
	}
}()

// with returns a copy of o with key k's value v (appended when o has no k).
func (o ordered) with(k string, v any) ordered {
	out := append(ordered(nil), o...)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
			return out
		}
	}
	return append(out, field{k, v})
}

// get is key k's value in o (nil when o has no k).
func (o ordered) get(k string) any {
	for _, f := range o {
		if f.k == k {
			return f.v
		}
	}
	return nil
}

// newCustomerDelivery is a fresh Stripe event of the given kind that names
// customer i of -customers.
func newCustomerDelivery(event string, i int, now time.Time) delivery {
	vals := stripeValues(globalRand{}, now)
	customerValues(vals, i)
	return delivery{id: vals["evt"], body: stripeTemplates[event].render(vals)}
}

// burster makes the deliveries of -event burst: delivery k is event
// k mod 7 of checkout k / 7, whose ids come from seed and the checkout's
// number (every event of a checkout names the same objects); the event's
// own id from seed and k.
type burster struct {
	seed      uint64
	customers int
	n         atomic.Int64
}

func (b *burster) next(now time.Time) delivery {
	return burstDelivery(b.seed, int(b.n.Add(1)-1), b.customers, now)
}

// burstDelivery is delivery k of the bursts of seed; customers as -customers.
func burstDelivery(seed uint64, k, customers int, now time.Time) delivery {
	checkout, kind := k/len(burstKinds), k%len(burstKinds)
	vals := stripeValues(seeded(seed, -1-checkout), now)
	vals["evt"] = "evt_1" + randID(seeded(seed, k), 23)
	vals["customer_event"] = "customer.created"
	if customers > 0 {
		customerValues(vals, checkout%customers)
		vals["customer_event"] = "customer.updated"
	}
	return delivery{id: vals["evt"], body: burstTemplates[kind].render(vals)}
}

// customerValues makes vals name customer i of -customers: the same id,
// name and address in every run.
func customerValues(vals map[string]string, i int) {
	r := seeded(0x637573746f6d6572, i)
	first, last := firstNames[r.Uint64()%10], lastNames[r.Uint64()%10]
	vals["cus"] = "cus_Q" + randID(r, 13)
	vals["name"] = first + " " + last
	vals["email"] = strings.ToLower(first+"."+last) + "+" + strings.ToLower(randID(r, 8)) + "@example.com"
	vals["street"] = strconv.FormatUint(1+r.Uint64()%400, 10)
}

// customerObject is the customer of a checkout, as customer.created shows
// it.
func customerObject() ordered {
	return ordered{
		{"id", slot("cus")},
		{"object", "customer"},
		{"address", ordered{
			{"city", "London"},
			{"country", "GB"},
			{"line1", "{{street}} High Street"},
			{"line2", nil},
			{"postal_code", "N1 9GU"},
			{"state", nil},
		}},
		{"balance", 0},
		{"created", num("started")},
		{"currency", nil},
		{"default_source", nil},
		{"delinquent", false},
		{"description", nil},
		{"discount", nil},
		{"email", "{{email}}"},
		{"invoice_prefix", "{{number}}"},
		{"invoice_settings", ordered{
			{"custom_fields", nil},
			{"default_payment_method", nil},
			{"footer", nil},
			{"rendering_options", nil},
		}},
		{"livemode", false},
		{"metadata", ordered{{"workspace_id", "{{workspace}}"}}},
		{"name", "{{name}}"},
		{"next_invoice_sequence", 1},
		{"phone", nil},
		{"preferred_locales", []any{"en-GB"}},
		{"shipping", nil},
		{"tax_exempt", "none"},
		{"test_clock", nil},
	}
}

// subscriptionObject is the subscription a checkout creates, active.
func subscriptionObject() ordered {
	item := ordered{
		{"id", slot("si")},
		{"object", "subscription_item"},
		{"billing_thresholds", nil},
		{"created", num("created")},
		{"metadata", ordered{}},
		{"price", priceObject()},
		{"quantity", 1},
		{"subscription", slot("sub")},
		{"tax_rates", []any{}},
	}
	return ordered{
		{"id", slot("sub")},
		{"object", "subscription"},
		{"application", nil},
		{"application_fee_percent", nil},
		{"automatic_tax", ordered{{"enabled", false}, {"liability", nil}}},
		{"billing_cycle_anchor", num("created")},
		{"billing_thresholds", nil},
		{"cancel_at", nil},
		{"cancel_at_period_end", false},
		{"canceled_at", nil},
		{"cancellation_details", ordered{{"comment", nil}, {"feedback", nil}, {"reason", nil}}},
		{"collection_method", "charge_automatically"},
		{"created", num("created")},
		{"currency", "usd"},
		{"current_period_end", num("period_end")},
		{"current_period_start", num("created")},
		{"customer", slot("cus")},
		{"days_until_due", nil},
		{"default_payment_method", "pm_1" + "{{si}}"},
		{"default_source", nil},
		{"default_tax_rates", []any{}},
		{"description", nil},
		{"discount", nil},
		{"ended_at", nil},
		{"items", ordered{
			{"object", "list"},
			{"data", []any{item}},
			{"has_more", false},
			{"total_count", 1},
			{"url", "/v1/subscription_items?subscription={{sub}}"},
		}},
		{"latest_invoice", slot("in")},
		{"livemode", false},
		{"metadata", ordered{{"workspace_id", "{{workspace}}"}, {"plan", "pro"}}},
		{"next_pending_invoice_item_invoice", nil},
		{"on_behalf_of", nil},
		{"pause_collection", nil},
		{"payment_settings", ordered{
			{"payment_method_options", nil},
			{"payment_method_types", nil},
			{"save_default_payment_method", "on_subscription"},
		}},
		{"pending_invoice_item_interval", nil},
		{"pending_setup_intent", nil},
		{"pending_update", nil},
		{"plan", ordered{
			{"id", shop.price},
			{"object", "plan"},
			{"active", true},
			{"amount", shop.plan},
			{"currency", "usd"},
			{"interval", "month"},
			{"interval_count", 1},
			{"product", shop.product},
		}},
		{"quantity", 1},
		{"schedule", nil},
		{"start_date", num("created")},
		{"status", "active"},
		{"test_clock", nil},
		{"transfer_data", nil},
		{"trial_end", nil},
		{"trial_settings", ordered{{"end_behavior", ordered{{"missing_payment_method", "create_invoice"}}}}},
		{"trial_start", nil},
	}
}

// paymentIntentObject is the payment of a checkout's first invoice,
// succeeded.
func paymentIntentObject() ordered {
	return ordered{
		{"id", slot("pi")},
		{"object", "payment_intent"},
		{"amount", shop.plan},
		{"amount_capturable", 0},
		{"amount_details", ordered{{"tip", ordered{}}}},
		{"amount_received", shop.plan},
		{"application", nil},
		{"application_fee_amount", nil},
		{"automatic_payment_methods", nil},
		{"canceled_at", nil},
		{"cancellation_reason", nil},
		{"capture_method", "automatic"},
		{"client_secret", "{{pi}}_secret_{{number}}"},
		{"confirmation_method", "automatic"},
		{"created", num("created")},
		{"currency", "usd"},
		{"customer", slot("cus")},
		{"description", "Subscription creation"},
		{"invoice", slot("in")},
		{"last_payment_error", nil},
		{"latest_charge", slot("ch")},
		{"livemode", false},
		{"metadata", ordered{}},
		{"next_action", nil},
		{"on_behalf_of", nil},
		{"payment_method", "pm_1" + "{{si}}"},
		{"payment_method_configuration_details", nil},
		{"payment_method_options", ordered{
			{"card", ordered{
				{"installments", nil},
				{"mandate_options", nil},
				{"network", nil},
				{"request_three_d_secure", "automatic"},
			}},
		}},
		{"payment_method_types", []any{"card"}},
		{"processing", nil},
		{"receipt_email", nil},
		{"review", nil},
		{"setup_future_usage", "off_session"},
		{"shipping", nil},
		{"source", nil},
		{"statement_descriptor", nil},
		{"statement_descriptor_suffix", nil},
		{"status", "succeeded"},
		{"transfer_data", nil},
		{"transfer_group", nil},
	}
}
