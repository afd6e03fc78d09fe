// Package entitlements answers the app's one question, does this user
// have `pro` now, whatever provider the user paid through and in whatever
// order the events arrived, and tells the app when the answer changes.
//
// # What a row is for
//
// Every subscription and order keeps what it is for, written by the
// statements that write the row, in the event's transaction: its items
// (prices, products, quantities; a Marketplace order its plan), its
// customer's provider-keyed subject (customer_key: stripe:cus_…,
// paddle:ctm_…, polar:<customer id>, github:<account id>) and the app's
// user id its events carried (app_user_id: Stripe Checkout's
// client_reference_id or metadata.app_user_id, Paddle's
// custom_data.app_user_id, Polar's customer.external_id; a claim, checked
// by AppUser). A customer belongs to the newest app user any of its rows
// claims, else to its provider-keyed subject: so a later event of the
// customer (a subscription's, which carries no app user id) finds it, and
// a claim that arrives after the subscription's events moves its
// entitlements (the provider-keyed subject is then told an empty set).
//
// # Entitlements as a function of the rows
//
// A subject's set is computed from the current rows and the catalogue
// (migration 000024: entitlement_grants, entitlement_set), never
// accumulated: a subscription trialing or active (until its period end
// when it cancels then), past_due within the grace from when it first
// became past due, an order paid or partially refunded and not lost in a
// dispute, a Marketplace order paid, a Stripe customer's active features.
// So every arrival order, replay and catch-up ends with the same set.
//
// An event that may change entitlements adds one statement to its
// transaction (Follow): only when the transaction wrote one of the rows it
// names does the statement take the subject's lock (a transaction-level
// advisory lock, so the last writer of a subject computes with what the
// others committed), compute the set, and write the subject's row when the
// set changed: a new version, and the step that tells the app, planned in
// the same statement. An event that wrote none of them locks and writes
// nothing (see internal/webhooks, "What a delivery's transaction may
// lock").
//
// # Told, and asked
//
// A version is told by a step (Kind): POST {FULFILLMENT_URL}/entitlements
// with the subject's whole set, signed like the fulfillment calls. A step
// sends its own version only while it is the subject's newest (an older
// one waiting behind a newer change is done without a call: the newer is
// sent by its own step), never after a higher version was answered 2xx,
// and never while another version of the subject is being sent. Ends in
// time (a grace end, a period end) are taken by Job, which needs no event.
// The app may ask too (Store.Get): the API on ADMIN_ADDR, `server
// entitlements show`, the console.
package entitlements

import (
	"strings"
	"time"
	"unicode"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Step names and kinds.
const (
	// StepNotify is the name of an event's step that tells the app.
	StepNotify = "entitlements"
	// KindNotify is the kind of that step (Kind).
	KindNotify = "entitlements"
	// Source is the source of the standalone steps that tell the app of a
	// change no event made (Job, a Stripe Checkout's line items).
	Source = "entitlements"
)

// MaxSubject bounds an app user id: Stripe's client_reference_id is at
// most 200 characters.
const MaxSubject = 200

// providerPrefixes are the provider-keyed subjects' prefixes, which no app
// user id may take.
var providerPrefixes = []string{"stripe:", "paddle:", "polar:", "github:", "github_marketplace:"}

// AppUser returns the app user id a provider carried, when it can be a
// subject: 1 to MaxSubject characters, printable, not padded with
// spaces, and not a provider-keyed subject (a buyer's claim of
// "stripe:cus_…" would otherwise join another customer's subject); ""
// otherwise, as if none had been carried.
func AppUser(s string) string {
	if s == "" || len(s) > MaxSubject || strings.TrimSpace(s) != s {
		return ""
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return ""
		}
	}
	for _, p := range providerPrefixes {
		if strings.HasPrefix(strings.ToLower(s), p) {
			return ""
		}
	}
	return s
}

// CustomerKey is the provider-keyed subject of a provider's customer:
// "<prefix>:<id>", or "" when the event names no customer.
func CustomerKey(prefix, customerID string) string {
	if customerID == "" {
		return ""
	}
	return prefix + ":" + customerID
}

// Item is one line of what a subscription or order is for.
type Item struct {
	Price    string `json:"price,omitempty"`
	Product  string `json:"product,omitempty"`
	Quantity int64  `json:"quantity,omitempty"`
}

// Change names the rows an event may have written that entitlements
// follow: its subscription (with the event's time and the status it
// carries, which say when the subscription became past due), and its
// orders, by business key or by payment (a refund's, a dispute's).
type Change struct {
	SubscriptionSource, SubscriptionID string
	At                                 time.Time // when the event happened
	Status                             string    // the subscription's status as the event carries it

	OrderSource, OrderID, Payment string
}

// followSQL is the one statement Follow adds: entitlements_follow of
// migration 000024.
const followSQL = `SELECT p FROM entitlements_follow(NULLIF($1, ''), NULLIF($2, ''), $3::timestamptz, NULLIF($4, ''),
    NULLIF($5, ''), NULLIF($6, ''), NULLIF($7, '')) AS p WHERE p IS NOT NULL`

// Follow queues on plan, after the event's writes, the statement that
// computes again the entitlements of the rows c names, when this
// transaction wrote one of them, and plans the step that tells the app of
// the subjects whose set changed: one statement, whatever it finds. Queue
// it once per event, after every write it follows.
func Follow(plan *webhooks.Plan, c Change) {
	var at any
	if !c.At.IsZero() {
		at = c.At
	}
	plan.StepIf(Step(), followSQL, c.SubscriptionSource, c.SubscriptionID, at, c.Status, c.OrderSource, c.OrderID, c.Payment)
}

// Step is the step that tells the app of the subjects its condition puts
// in its payload ("subjects").
func Step() webhooks.Step {
	return webhooks.Step{Name: StepNotify, Kind: KindNotify, Payload: []byte(`{}`)}
}

// Told is one subject's version a step tells.
type Told struct {
	Subject string `json:"subject"`
	Version int64  `json:"version"`
}

// Payload is the payload of a step that tells the app.
type Payload struct {
	Subjects []Told `json:"subjects"`
}

// Entitlement is one key of a subject's set, as the app is told it.
type Entitlement struct {
	Key   string     `json:"key"`
	State string     `json:"state"` // active, grace
	Until *time.Time `json:"until"`
}

// Body is what the app is told and asked: the subject's whole set at a
// version.
type Body struct {
	Subject      string        `json:"subject"`
	Version      int64         `json:"version"`
	Entitlements []Entitlement `json:"entitlements"`
}
