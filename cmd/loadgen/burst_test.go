package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
)

// TestBurst: -event burst sends the seven events of each checkout in turn,
// every one naming the checkout's customer and its own objects, each a
// Stripe event as stripe-go reads it; -customers N makes the checkouts N
// customers', with the same ids and address in every run.
func TestBurst(t *testing.T) {
	for _, customers := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("customers=%d", customers), func(t *testing.T) {
			custs, emails := map[string]bool{}, map[string]bool{}
			ids := map[string]bool{}
			const checkouts = 6
			for c := range checkouts {
				var session, sub, inv, pi, cus string
				for i, kind := range burstKinds {
					d := burstDelivery(42, c*len(burstKinds)+i, customers, time.Now())
					var ev stripe.Event
					if err := json.Unmarshal(d.body, &ev); err != nil {
						t.Fatalf("%s: %v", kind, err)
					}
					if ev.ID != d.id || ids[ev.ID] || ev.APIVersion != stripe.APIVersion {
						t.Fatalf("%s: id %q (delivery %q, seen %v), api_version %q", kind, ev.ID, d.id, ids[ev.ID], ev.APIVersion)
					}
					ids[ev.ID] = true
					want := kind
					if kind == "customer" {
						want = map[bool]string{true: "customer.created", false: "customer.updated"}[customers == 0]
					}
					if string(ev.Type) != want {
						t.Fatalf("event %d of a checkout is %s, want %s", i, ev.Type, want)
					}
					var email string
					switch kind {
					case "checkout.session.completed":
						var o stripe.CheckoutSession
						mustDecode(t, ev, &o)
						session, sub, inv, cus, email = o.ID, o.Subscription.ID, o.Invoice.ID, o.Customer.ID, o.CustomerDetails.Email
						if o.Mode != "subscription" || o.PaymentStatus != "paid" {
							t.Errorf("session %+v", o)
						}
					case "customer":
						var o stripe.Customer
						mustDecode(t, ev, &o)
						if o.ID != cus {
							t.Errorf("customer %s, the session's %s", o.ID, cus)
						}
						email = o.Email
					case "customer.subscription.created":
						var o stripe.Subscription
						mustDecode(t, ev, &o)
						if o.ID != sub || o.Customer.ID != cus || o.Status != "active" || o.LatestInvoice.ID != inv {
							t.Errorf("subscription %s of %s (%s), the session's %s of %s", o.ID, o.Customer.ID, o.Status, sub, cus)
						}
					case "invoice.created", "invoice.finalized", "invoice.paid":
						var o stripe.Invoice
						mustDecode(t, ev, &o)
						if o.ID != inv || o.Customer.ID != cus || o.Subscription.ID != sub || o.Paid != (kind == "invoice.paid") {
							t.Errorf("%s: invoice %s of %s, the session's %s of %s", kind, o.ID, o.Customer.ID, inv, cus)
						}
						if want := map[string]stripe.InvoiceStatus{"invoice.created": "draft", "invoice.finalized": "open", "invoice.paid": "paid"}[kind]; o.Status != want {
							t.Errorf("%s: status %s", kind, o.Status)
						}
						if kind == "invoice.paid" {
							pi = o.PaymentIntent.ID
						}
						email = o.CustomerEmail
					case "payment_intent.succeeded":
						var o stripe.PaymentIntent
						mustDecode(t, ev, &o)
						if o.ID != pi || o.Customer.ID != cus || o.Invoice.ID != inv || o.Status != "succeeded" {
							t.Errorf("payment intent %s of %s, the invoice's %s of %s", o.ID, o.Customer.ID, pi, cus)
						}
					}
					if email != "" {
						emails[email] = true
					}
				}
				custs[cus] = true
				if session == "" || ids[session] {
					t.Fatalf("checkout %d: session %q", c, session)
				}
				ids[session] = true
			}
			wantCustomers := map[bool]int{true: checkouts, false: customers}[customers == 0]
			if len(custs) != wantCustomers || len(emails) != wantCustomers {
				t.Errorf("%d checkouts named %d customers and %d addresses, want %d", checkouts, len(custs), len(emails), wantCustomers)
			}
		})
	}
	// The same customers in every run; another run's checkouts are new.
	a, b := burstDelivery(1, 0, 2, time.Now()), burstDelivery(2, 0, 2, time.Now())
	var ea, eb struct {
		ID   string
		Data struct{ Object struct{ ID, Customer string } }
	}
	if json.Unmarshal(a.body, &ea) != nil || json.Unmarshal(b.body, &eb) != nil ||
		ea.Data.Object.Customer != eb.Data.Object.Customer || ea.Data.Object.ID == eb.Data.Object.ID || ea.ID == eb.ID {
		t.Errorf("two runs: %+v and %+v", ea, eb)
	}

	f, url := newFake(t)
	rep := runJSON(t, "-url", url, "-secret", testSecret, "-event", "burst", "-customers", "1", "-count", "70", "-concurrency", "4")
	if rep.OK != 70 || len(f.seen) != 70 || f.bad != 0 {
		t.Fatalf("report %+v; the receiver saw %d events, %d bad", rep, len(f.seen), f.bad)
	}
}

func mustDecode(t *testing.T, ev stripe.Event, v any) {
	t.Helper()
	if err := json.Unmarshal(ev.Data.Raw, v); err != nil {
		t.Fatalf("%s: %v", ev.Type, err)
	}
}
