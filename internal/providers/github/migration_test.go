package github_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"testing"

	"github.com/paywebhooks/receiver/internal/db"
	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// oldBodyHash is the body hash of the receiver before migration 10: SHA-256
// of the hook id and the raw body.
func oldBodyHash(hookID string, body []byte) []byte {
	sum := sha256.Sum256(append(append([]byte(hookID), 0), body...))
	return sum[:]
}

// TestMigration10KeepsOldKeysCopies: deliveries stored before migration 10
// (keys "<hook id>:<GUID>", a hash of the hook id and the raw body, orders
// whose provider_event_id is the GUID) are still known after it: GitHub's
// redelivery of one (same hook id, GUID and body, a new-style key now) is
// a copy of it, answered as its copies are, storing and sending nothing
// new, and a step it left open is finished by that copy as it was before.
// One payload stored under two hook ids keeps its hash on the first.
// Down, the old hashes come back.
func TestMigration10KeepsOldKeysCopies(t *testing.T) {
	ctx := context.Background()
	r := rt.New(t, providers.List())
	url := r.Config.DatabaseURL
	latest, err := db.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	toVersion9 := int(latest) - 9 // the steps down to the schema before migration 10
	if err := db.MigrateDown(url, toVersion9); err != nil {
		t.Fatal(err)
	}
	body, done := fixture(purchased), fixture(sponsored)
	gBody, gDone := guid(purchased), guid(sponsored)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := r.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	const insertEvent = `
INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type, body, body_hash,
                              outcome, via, claimed_at)
VALUES ($1, 'github', 'done', 'event', now(), $2, $3, $4, $5, 'processed', 'delivery', now() - $6 * interval '1 minute')`
	// A purchase whose welcome email was given back (SMTP refused it),
	// and the same body from a second hook, later.
	exec(insertEvent, hookID+":"+gBody, gBody, "marketplace_purchase", body, oldBodyHash(hookID, body), 10)
	exec(insertEvent, "111:"+gBody, gBody, "marketplace_purchase", body, oldBodyHash("111", body), 5)
	exec(`
INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, step_kind, payload, claim_token, attempts, claimed_at)
VALUES ($1 || '/email.welcome', 'github', 'in_progress', 'step', $1, 'email.welcome', 'email',
        '{"template": "marketplace_welcome", "to": "billing@acme.example", "data": {"Account": "acme", "Plan": "Pro", "AmountCents": 1500, "Currency": "usd", "BillingCycle": "monthly"}}',
        1, 1, '-infinity')`, hookID+":"+gBody)
	exec(`
INSERT INTO orders (source, provider_event_id, external_id, status, amount_cents, currency, customer_email, plan)
VALUES ('github_marketplace', $1, 'account:1001', 'paid', 1500, 'usd', 'billing@acme.example', '7:Pro')`, gBody)
	// A sponsorship, finished.
	exec(insertEvent, hookID+":"+gDone, gDone, "sponsorship", done, oldBodyHash(hookID, done), 1)
	exec(`
INSERT INTO orders (source, provider_event_id, external_id, status, amount_cents, currency, plan)
VALUES ('github_sponsors', $1, 'S_test_sponsorship_1', 'paid', 1000, 'usd', '$10 a month')`, gDone)
	// A synthetic event of the reconciliation: nothing signed, no hash.
	exec(`
INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type, body, outcome, via)
VALUES ('reconcile:marketplace:3003:purchased:7:x', 'github', 'done', 'event', now(), 'reconcile:marketplace:3003:purchased:7:x',
        'marketplace_purchase', '{}', 'processed', 'reconcile')`)

	hashes := func() map[string][]byte {
		t.Helper()
		rows, err := r.Pool.Query(ctx, `SELECT event_key, body_hash FROM processed_events WHERE kind = 'event'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string][]byte{}
		for rows.Next() {
			var k string
			var h []byte
			if err := rows.Scan(&k, &h); err != nil {
				t.Fatal(err)
			}
			m[k] = h
		}
		return m
	}
	check := func(when string, want map[string][]byte) {
		t.Helper()
		got := hashes()
		for k, h := range want {
			if !bytes.Equal(got[k], h) {
				t.Errorf("%s: body hash of %s = %x, want %x", when, k, got[k], h)
			}
		}
	}

	if err := db.Migrate(url); err != nil {
		t.Fatal(err)
	}
	check("up", map[string][]byte{
		hookID + ":" + gBody:                       github.BodyHash(body),
		"111:" + gBody:                             nil, // the same payload: the first answers for it
		hookID + ":" + gDone:                       github.BodyHash(done),
		"reconcile:marketplace:3003:purchased:7:x": nil,
	})
	t.Run("Down", func(t *testing.T) {
		if err := db.MigrateDown(url, toVersion9); err != nil {
			t.Fatal(err)
		}
		check("down", map[string][]byte{
			hookID + ":" + gBody:                       oldBodyHash(hookID, body),
			"111:" + gBody:                             oldBodyHash("111", body),
			hookID + ":" + gDone:                       oldBodyHash(hookID, done),
			"reconcile:marketplace:3003:purchased:7:x": nil,
		})
		if err := db.Migrate(url); err != nil {
			t.Fatal(err)
		}
		check("up again", map[string][]byte{hookID + ":" + gBody: github.BodyHash(body), hookID + ":" + gDone: github.BodyHash(done)})
	})

	before := r.Count(t, `SELECT count(*) FROM processed_events`)
	redeliver := func(name string, body []byte) string {
		t.Helper()
		res := r.Post(t, "/webhooks/github", rt.Signed(github.Spec, body, header(name, body)), body)
		if res.Status != http.StatusOK {
			t.Fatalf("redelivery of %s: status %d %s", name, res.Status, res.Body)
		}
		return string(cf.Outcome(res))
	}
	// The redelivery finishes the open step (the email goes out), as a
	// redelivery did before the migration.
	if got := redeliver(purchased, body); got != "processed" {
		t.Errorf("redelivery of the purchase with an open step: %s, want processed (its step finished)", got)
	}
	if got := redeliver(purchased, body); got != "duplicate" {
		t.Errorf("second redelivery of the purchase: %s, want duplicate", got)
	}
	if got := redeliver(sponsored, done); got != "duplicate" {
		t.Errorf("redelivery of the sponsorship: %s, want duplicate", got)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events`); n != before {
		t.Errorf("claims %d after the redeliveries, want the %d there were", n, before)
	}
	if n := r.Count(t, `SELECT count(*) FROM orders`); n != 2 {
		t.Errorf("%d orders, want the 2 there were", n)
	}
	if msgs := r.SMTP.Messages(); len(msgs) != 1 || msgs[0].To[0] != "billing@acme.example" {
		t.Errorf("emails %v, want the one welcome email the old event owed", msgs)
	}
	if len(r.API.Requests()) != 0 {
		t.Errorf("%d fulfillment calls, want none", len(r.API.Requests()))
	}
}
