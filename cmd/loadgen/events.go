package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	stripespec "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// delivery is one event as the sender keeps it: the same id, body and
// headers (GitHub's delivery GUID) on every attempt and every replay. The
// signature is made for each attempt by the provider's Spec.Sign, because
// senders that sign a time (Stripe, Paddle, Standard Webhooks) sign each
// attempt with the time it is sent.
type delivery struct {
	id     string      // the sender's id of it: Stripe's evt_…, GitHub's GUID (webhooks.SignInput.ID)
	body   []byte      // the raw body
	header http.Header // sent beside Sign's headers (webhooks.Example.Header); nil for none
	replay bool
}

// Events loadgen builds itself, beside each provider's Spec.Example.
const (
	// exampleEvent is the delivery the provider's Spec.Example makes.
	exampleEvent = "example"
	// githubPurchase is GitHub's Example (a Marketplace purchase), under
	// the name loadgen has always given it.
	githubPurchase = "github-purchase"
)

// events lists the events -provider p can send: for Stripe, loadgen's own
// realistic ones (stripeTemplates); for GitHub, github-purchase; and for
// every provider whose Spec has an Example, "example".
func events(p webhooks.Spec) []string {
	var out []string
	switch p.Source {
	case "stripe":
		out = append(out, stripeEvents...)
		out = append(out, burstEvent)
	case stripespec.ThinSource:
		out = append(out, thinEvents...)
	case "github":
		if p.Example != nil {
			out = append(out, githubPurchase)
		}
	}
	if p.Example != nil {
		out = append(out, exampleEvent)
	}
	return out
}

// defaultEvent is what -provider p sends without -event: Stripe's
// invoice.created, GitHub's purchase, any other provider's Example.
func defaultEvent(p webhooks.Spec) string {
	switch e := events(p); {
	case p.Source == "stripe":
		return "invoice"
	case slices.Contains(e, githubPurchase):
		return githubPurchase
	case len(e) > 0:
		return exampleEvent
	}
	return ""
}

// apiVersion is the Stripe API version of the events loadgen sends: the one
// stripe-go v76 (the receiver's) is pinned to.
const apiVersion = "2023-10-16"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// rng is where the parts of an event that make it unique come from: the
// process-wide generator for fresh events, or one seeded per event for the
// fixed pool of -pool (the same event, byte for byte, in every run). It is
// a math/rand/v2 Source, which a Spec's Example draws from.
type rng interface{ Uint64() uint64 }

type globalRand struct{}

func (globalRand) Uint64() uint64 { return mrand.Uint64() }

// seeded is the generator of event i of the pool of seed.
func seeded(seed uint64, i int) rng {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[0:], seed)
	binary.LittleEndian.PutUint64(s[8:], uint64(i))
	copy(s[16:], "loadgen pool v1")
	return mrand.NewChaCha8(s)
}

// randID returns n random base62 characters, like the tail of a Stripe id.
func randID(r rng, n int) string {
	b := make([]byte, n)
	var x uint64
	for i := range b {
		if i%10 == 0 {
			x = r.Uint64()
		}
		b[i] = base62[x%62]
		x /= 62
	}
	return string(b)
}

func randHex(r rng, n int) string {
	b := make([]byte, (n+1)/2)
	for i := range b {
		b[i] = byte(r.Uint64())
	}
	return hex.EncodeToString(b)[:n]
}

// --- Stripe event bodies ---
//
// The bodies have the fields, nesting and size of real Stripe events of API
// version 2023-10-16 as Stripe sends them (pretty-printed, two-space
// indent): an invoice.created or invoice.paid of a subscription renewal
// with one line item (about 5.5 KB) and a checkout.session.completed of a
// paid one-off payment (about 3.3 KB). They are built here field by field;
// main_test.go compares their shape with captured samples when
// ../shared/samples is present. Every id that names one event or one object
// of it is new per event ({{name}} slots below, filled per event); the
// account, product and price stay the same, as they would for one shop.
// They are test-mode events ("livemode": false, cs_test_… sessions, test_
// invoice links), as a test checkout is: a receiver run with
// STRIPE_LIVEMODE=true acknowledges them as ignored and acts on none.

// ordered is a JSON object whose keys keep their order.
type ordered []field

type field struct {
	k string
	v any // string, int, bool, nil, ordered, []any, slot
}

// slot is a string filled per event: "{{name}}" in the body's text; num is
// a number filled per event. Inside a longer string, write the {{name}}
// marker in the string itself.
type (
	slot string
	num  string
)

// writeJSON renders v as Stripe does: two-space indent, "key": value.
func writeJSON(b *strings.Builder, v any, indent string) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case string:
		b.WriteString(strconv.Quote(x))
	case slot:
		b.WriteString(`"{{` + string(x) + `}}"`)
	case num:
		b.WriteString("{{" + string(x) + "}}")
	case ordered:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, f := range x {
			b.WriteString(indent + "  " + strconv.Quote(f.k) + ": ")
			writeJSON(b, f.v, indent+"  ")
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range x {
			b.WriteString(indent + "  ")
			writeJSON(b, e, indent+"  ")
			if i < len(x)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	default:
		panic(fmt.Sprintf("writeJSON: %T", v))
	}
}

// template is a body with slots, split once so that each event costs one
// append per part.
type template struct {
	parts []string // literal text before slot i; the last part follows the last slot
	slots []string // slot names, in order of appearance
	size  int      // literal bytes
}

func compile(v any) *template {
	var b strings.Builder
	writeJSON(&b, v, "")
	text := b.String()
	t := &template{}
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(text[i:], "}}")
		t.parts = append(t.parts, text[:i])
		t.slots = append(t.slots, text[i+2:i+j])
		text = text[i+j+2:]
	}
	t.parts = append(t.parts, text)
	for _, p := range t.parts {
		t.size += len(p)
	}
	return t
}

// render fills the slots from vals; every value is JSON-safe as it is
// (digits, base62, hex, an e-mail address without quotes).
func (t *template) render(vals map[string]string) []byte {
	out := make([]byte, 0, t.size+len(t.slots)*32)
	for i, s := range t.slots {
		out = append(out, t.parts[i]...)
		v, ok := vals[s]
		if !ok {
			panic("loadgen: no value for {{" + s + "}}")
		}
		out = append(out, v...)
	}
	return append(out, t.parts[len(t.parts)-1]...)
}

// shop is what stays the same from one event to the next: one Stripe
// account selling one subscription plan and one one-off product.
var shop = struct {
	account, accountName, product, price, oneOffPrice, pmc string
	plan                                                   int
}{
	account:     "acct_1PLoadgenShop0001",
	accountName: "Loadgen Shop Ltd",
	product:     "prod_QLoadgenPlan01",
	price:       "price_1PLoadgenPlanPrice0001",
	oneOffPrice: "price_1PLoadgenOneOffPrc0001",
	pmc:         "pmc_1PLoadgenPMConfig00001",
	plan:        2000,
}

// eventEnvelope is the Event around object. Some events carry
// data.previous_attributes even when null.
func eventEnvelope(typ string, object ordered, previousAttributes bool) ordered {
	data := ordered{{"object", object}}
	if previousAttributes {
		data = append(data, field{"previous_attributes", nil})
	}
	return ordered{
		{"id", slot("evt")},
		{"object", "event"},
		{"api_version", apiVersion},
		{"created", num("created")},
		{"data", data},
		{"livemode", false},
		{"pending_webhooks", 1},
		{"request", ordered{{"id", nil}, {"idempotency_key", nil}}},
		{"type", typ},
	}
}

// priceObject is the shop's monthly price, as an invoice line and a
// subscription item carry it.
func priceObject() ordered {
	return ordered{
		{"id", shop.price},
		{"object", "price"},
		{"active", true},
		{"billing_scheme", "per_unit"},
		{"created", 1704067200},
		{"currency", "usd"},
		{"livemode", false},
		{"lookup_key", nil},
		{"metadata", ordered{}},
		{"nickname", nil},
		{"product", shop.product},
		{"recurring", ordered{
			{"aggregate_usage", nil},
			{"interval", "month"},
			{"interval_count", 1},
			{"trial_period_days", nil},
			{"usage_type", "licensed"},
		}},
		{"tax_behavior", "unspecified"},
		{"tiers_mode", nil},
		{"transform_quantity", nil},
		{"type", "recurring"},
		{"unit_amount", shop.plan},
		{"unit_amount_decimal", strconv.Itoa(shop.plan)},
	}
}

// invoiceObject is a subscription's renewal invoice: a draft just created
// (paid false) or paid.
func invoiceObject(paid bool) ordered {
	status, amountPaid, remaining, attempted, autoAdvance := "draft", 0, shop.plan, false, true
	var number, hosted, pdf, charge, pi, finalized, paidAt, nextAttempt any
	if paid {
		status, amountPaid, remaining, attempted, autoAdvance = "paid", shop.plan, 0, true, false
		number = "{{number}}"
		hosted = "https://invoice.stripe.com/i/" + shop.account + "/test_{{hosted}}?s=ap"
		pdf = "https://pay.stripe.com/invoice/" + shop.account + "/test_{{hosted}}/pdf?s=ap"
		charge, pi = slot("ch"), slot("pi")
		finalized, paidAt = num("created"), num("created")
	} else {
		nextAttempt = num("next_attempt")
	}
	line := ordered{
		{"id", slot("il")},
		{"object", "line_item"},
		{"amount", shop.plan},
		{"currency", "usd"},
		{"description", "1 × Pro (at $20.00 / month)"},
		{"discount_amounts", []any{}},
		{"discountable", true},
		{"discounts", []any{}},
		{"livemode", false},
		{"metadata", ordered{
			{"workspace_id", "{{workspace}}"},
			{"workspace_slug", "team-{{workspace}}"},
			{"plan", "pro"},
		}},
		{"period", ordered{{"end", num("period_end")}, {"start", num("created")}}},
		{"plan", ordered{
			{"id", shop.price},
			{"object", "plan"},
			{"active", true},
			{"aggregate_usage", nil},
			{"amount", shop.plan},
			{"amount_decimal", strconv.Itoa(shop.plan)},
			{"billing_scheme", "per_unit"},
			{"created", 1704067200},
			{"currency", "usd"},
			{"interval", "month"},
			{"interval_count", 1},
			{"livemode", false},
			{"metadata", ordered{}},
			{"nickname", nil},
			{"product", shop.product},
			{"tiers", nil},
			{"tiers_mode", nil},
			{"transform_usage", nil},
			{"trial_period_days", nil},
			{"usage_type", "licensed"},
		}},
		{"price", priceObject()},
		{"proration", false},
		{"proration_details", ordered{{"credited_items", nil}}},
		{"quantity", 1},
		{"subscription", slot("sub")},
		{"subscription_item", slot("si")},
		{"tax_amounts", []any{}},
		{"tax_rates", []any{}},
		{"type", "subscription"},
	}
	return ordered{
		{"id", slot("in")},
		{"object", "invoice"},
		{"account_country", "GB"},
		{"account_name", shop.accountName},
		{"account_tax_ids", nil},
		{"amount_due", shop.plan},
		{"amount_paid", amountPaid},
		{"amount_remaining", remaining},
		{"application_fee_amount", nil},
		{"attempt_count", map[bool]int{false: 0, true: 1}[paid]},
		{"attempted", attempted},
		{"auto_advance", autoAdvance},
		{"automatic_tax", ordered{{"enabled", false}, {"status", nil}}},
		{"billing_reason", "subscription_cycle"},
		{"charge", charge},
		{"collection_method", "charge_automatically"},
		{"created", num("created")},
		{"currency", "usd"},
		{"custom_fields", []any{ordered{{"name", "Workspace"}, {"value", "team-{{workspace}}"}}}},
		{"customer", slot("cus")},
		{"customer_address", nil},
		{"customer_email", "{{email}}"},
		{"customer_name", "{{name}}"},
		{"customer_phone", nil},
		{"customer_shipping", nil},
		{"customer_tax_exempt", "none"},
		{"customer_tax_ids", []any{}},
		{"default_payment_method", nil},
		{"default_source", nil},
		{"default_tax_rates", []any{}},
		{"description", nil},
		{"discount", nil},
		{"discounts", []any{}},
		{"due_date", nil},
		{"ending_balance", map[bool]any{false: nil, true: 0}[paid]},
		{"footer", nil},
		{"hosted_invoice_url", hosted},
		{"invoice_pdf", pdf},
		{"last_finalization_error", nil},
		{"lines", ordered{
			{"object", "list"},
			{"data", []any{line}},
			{"has_more", false},
			{"total_count", 1},
			{"url", "/v1/invoices/{{in}}/lines"},
		}},
		{"livemode", false},
		{"metadata", ordered{}},
		{"next_payment_attempt", nextAttempt},
		{"number", number},
		{"on_behalf_of", nil},
		{"paid", paid},
		{"paid_out_of_band", false},
		{"payment_intent", pi},
		{"payment_settings", ordered{
			{"payment_method_options", nil},
			{"payment_method_types", nil},
		}},
		{"period_end", num("created")},
		{"period_start", num("period_start")},
		{"post_payment_credit_notes_amount", 0},
		{"pre_payment_credit_notes_amount", 0},
		{"quote", nil},
		{"receipt_number", nil},
		{"starting_balance", 0},
		{"statement_descriptor", nil},
		{"status", status},
		{"status_transitions", ordered{
			{"finalized_at", finalized},
			{"marked_uncollectible_at", nil},
			{"paid_at", paidAt},
			{"voided_at", nil},
		}},
		{"subscription", slot("sub")},
		{"subtotal", shop.plan},
		{"tax", nil},
		{"tax_percent", nil},
		{"test_clock", nil},
		{"total", shop.plan},
		{"total_discount_amounts", []any{}},
		{"total_tax_amounts", []any{}},
		{"transfer_data", nil},
		{"webhooks_delivered_at", nil},
	}
}

// checkoutObject is a Checkout Session of a one-off card payment, paid.
func checkoutObject() ordered {
	return ordered{
		{"id", slot("cs")},
		{"object", "checkout.session"},
		{"adaptive_pricing", ordered{{"enabled", false}}},
		{"after_expiration", nil},
		{"allow_promotion_codes", true},
		{"amount_subtotal", 2800},
		{"amount_total", 3000},
		{"automatic_tax", ordered{
			{"enabled", true},
			{"liability", ordered{{"type", "self"}}},
			{"provider", "stripe"},
			{"status", "complete"},
		}},
		{"billing_address_collection", nil},
		{"cancel_url", "https://shop.example.com/cart"},
		{"client_reference_id", "{{cart}}"},
		{"client_secret", nil},
		{"collected_information", ordered{{"shipping_details", nil}}},
		{"consent", ordered{{"promotions", nil}, {"terms_of_service", "accepted"}}},
		{"consent_collection", ordered{
			{"payment_method_reuse_agreement", nil},
			{"promotions", "none"},
			{"terms_of_service", "required"},
		}},
		{"created", num("started")},
		{"currency", "usd"},
		{"currency_conversion", nil},
		{"custom_fields", []any{}},
		{"custom_text", ordered{
			{"after_submit", nil},
			{"shipping_address", nil},
			{"submit", nil},
			{"terms_of_service_acceptance", nil},
		}},
		{"customer", slot("cus")},
		{"customer_creation", "if_required"},
		{"customer_details", ordered{
			{"address", ordered{
				{"city", "London"},
				{"country", "GB"},
				{"line1", "{{street}} High Street"},
				{"line2", nil},
				{"postal_code", "N1 9GU"},
				{"state", nil},
			}},
			{"email", "{{email}}"},
			{"name", "{{name}}"},
			{"phone", nil},
			{"tax_exempt", "none"},
			{"tax_ids", []any{}},
		}},
		{"customer_email", nil},
		{"discounts", []any{}},
		{"expires_at", num("expires")},
		{"invoice", nil},
		{"invoice_creation", ordered{
			{"enabled", false},
			{"invoice_data", ordered{
				{"account_tax_ids", nil},
				{"custom_fields", nil},
				{"description", nil},
				{"footer", nil},
				{"issuer", ordered{{"type", "self"}}},
				{"metadata", ordered{}},
				{"rendering_options", nil},
			}},
		}},
		{"livemode", false},
		{"locale", nil},
		{"metadata", ordered{}},
		{"mode", "payment"},
		{"origin_context", nil},
		{"payment_intent", slot("pi")},
		{"payment_link", nil},
		{"payment_method_collection", "if_required"},
		{"payment_method_configuration_details", ordered{{"id", shop.pmc}, {"parent", nil}}},
		{"payment_method_options", ordered{}},
		{"payment_method_types", []any{"card", "link"}},
		{"payment_status", "paid"},
		{"permissions", nil},
		{"phone_number_collection", ordered{{"enabled", false}}},
		{"recovered_from", nil},
		{"saved_payment_method_options", ordered{
			{"allow_redisplay_filters", []any{"always"}},
			{"payment_method_remove", nil},
			{"payment_method_save", nil},
		}},
		{"setup_intent", nil},
		{"shipping_address_collection", nil},
		{"shipping_cost", nil},
		{"shipping_details", nil},
		{"shipping_options", []any{}},
		{"status", "complete"},
		{"submit_type", "pay"},
		{"subscription", nil},
		{"success_url", "https://shop.example.com/orders/thanks?session_id={CHECKOUT_SESSION_ID}"},
		{"total_details", ordered{{"amount_discount", 0}, {"amount_shipping", 0}, {"amount_tax", 200}}},
		{"ui_mode", "hosted"},
		{"url", nil},
		{"wallet_options", nil},
	}
}

var stripeTemplates = map[string]*template{
	"invoice":      compile(eventEnvelope("invoice.created", invoiceObject(false), false)),
	"invoice-paid": compile(eventEnvelope("invoice.paid", invoiceObject(true), false)),
	"checkout":     compile(eventEnvelope("checkout.session.completed", checkoutObject(), true)),
}

var firstNames = []string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Niklaus"}
var lastNames = []string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Wirth"}

// stripeValues are the per-event values of every slot of the Stripe
// templates, created at now. Ids are random after their prefix, so new
// events land anywhere in the receiver's primary key (real Stripe ids are
// roughly time-ordered, which is the easier case for a large table).
func stripeValues(r rng, now time.Time) map[string]string {
	created := now.Unix()
	first, last := firstNames[r.Uint64()%10], lastNames[r.Uint64()%10]
	ws := randID(r, 12)
	return map[string]string{
		"evt":          "evt_1" + randID(r, 23),
		"created":      strconv.FormatInt(created, 10),
		"period_start": strconv.FormatInt(created-30*86400, 10),
		"period_end":   strconv.FormatInt(created+30*86400, 10),
		"next_attempt": strconv.FormatInt(created+3600, 10),
		"started":      strconv.FormatInt(created-95, 10),
		"expires":      strconv.FormatInt(created-95+86400, 10),
		"in":           "in_1" + randID(r, 23),
		"il":           "il_1" + randID(r, 23),
		"ch":           "ch_3" + randID(r, 23),
		"pi":           "pi_3" + randID(r, 23),
		"sub":          "sub_1" + randID(r, 23),
		"si":           "si_Q" + randID(r, 13),
		"cus":          "cus_Q" + randID(r, 13),
		"cs":           "cs_test_a1" + randID(r, 56),
		"hosted":       randID(r, 120),
		"number":       strings.ToUpper(randHex(r, 8)) + "-" + fmt.Sprintf("%04d", 1+r.Uint64()%40),
		"workspace":    ws,
		"cart":         "cart_" + randID(r, 16),
		"street":       strconv.FormatUint(1+r.Uint64()%400, 10),
		"email":        strings.ToLower(first+"."+last) + "+" + strings.ToLower(randID(r, 8)) + "@example.com",
		"name":         first + " " + last,
	}
}

// stripeEvents lists the Stripe events -event accepts.
var stripeEvents = func() []string {
	var names []string
	for k := range stripeTemplates {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}()

// newDelivery builds a fresh event of the given kind of p's, with ids no
// receiver has seen.
func newDelivery(p webhooks.Spec, event string, now time.Time) delivery {
	return buildDelivery(p, event, globalRand{}, now)
}

// poolDelivery is event i of the fixed pool of seed: the same bytes in
// every run, so that one run can replay what an earlier one sent.
func poolDelivery(p webhooks.Spec, event string, seed uint64, i int) delivery {
	if event == burstEvent && p.Source == "stripe" {
		return burstDelivery(seed, i, 0, time.Unix(1764460800+int64(i), 0)) // the pool is checkouts' events, in turn
	}
	return buildDelivery(p, event, seeded(seed, i), time.Unix(1764460800+int64(i), 0))
}

func buildDelivery(p webhooks.Spec, event string, r rng, now time.Time) delivery {
	if event == burstEvent && p.Source == "stripe" {
		return burstDelivery(r.Uint64(), 0, 0, now) // a new checkout's first event
	}
	if t, ok := stripeTemplates[event]; ok && p.Source == "stripe" {
		vals := stripeValues(r, now)
		return delivery{id: vals["evt"], body: t.render(vals)}
	}
	if p.Source == stripespec.ThinSource && slices.Contains(thinEvents, event) {
		return thinDelivery(event, r, now)
	}
	if (event == exampleEvent || event == githubPurchase) && p.Example != nil {
		ex := p.Example(mrand.New(r), now)
		return delivery{id: ex.ID, body: ex.Body, header: ex.Header}
	}
	panic("loadgen: " + p.Source + " has no event " + event)
}

// headers are the headers of one attempt of d to p's route, signed with
// secret at now by p's Spec.Sign, with d's own headers, and "loadgen" at
// the end of the User-Agent.
func headers(p webhooks.Spec, secret string, d delivery, now time.Time) http.Header {
	h := p.Sign(webhooks.SignInput{Body: d.body, Secret: secret, At: now, ID: d.id})
	for k, v := range d.header {
		h[http.CanonicalHeaderKey(k)] = v
	}
	h.Set("User-Agent", strings.TrimSpace(h.Get("User-Agent")+" loadgen"))
	return h
}
