package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// checkout is a paid Checkout Session event of the test's own.
func checkout(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":"evt_%[1]s","object":"event","api_version":"2023-10-16","type":"checkout.session.completed",
"data":{"object":{"id":"cs_%[1]s","object":"checkout.session","payment_status":"paid","amount_total":2500,"currency":"usd",
"payment_intent":"pi_%[1]s","customer_details":{"email":"%[1]s@example.com"}}}}`, id))
}

func invoiceCreated(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":"evt_%[1]s","object":"event","type":"invoice.created",
"data":{"object":{"id":"in_%[1]s","object":"invoice","amount_due":900,"currency":"usd"}}}`, id))
}

// operator runs `server events …` against the receiver's database, as an
// operator would.
func operator(t *testing.T, r *rt.Receiver) func(args ...string) (string, string, error) {
	env := map[string]string{
		"DATABASE_URL":    r.Config.DatabaseURL,
		"SMTP_ADDR":       r.Config.SMTPAddr,
		"FULFILLMENT_URL": r.Config.FulfillmentURL,
		"NOTIFY_EMAIL":    r.Config.NotifyEmail,
		"MAIL_FROM":       r.Config.MailFrom,
	}
	env["FULFILLMENT_SECRET"] = rt.FulfillmentSecret // the receiver's: replays sign their calls as it does
	return func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"events"}, args...), getenv(env), &out, &errOut)
		return out.String(), errOut.String(), err
	}
}

func mustOK(t *testing.T, res rt.Response) {
	t.Helper()
	if res.Status != 200 {
		t.Fatalf("delivery answered %d: %s", res.Status, res.Body)
	}
}

// setup delivers four events: two done, one with no steps, and one whose
// fulfillment call the API refuses with 422, which parks that step.
func setup(t *testing.T) (*rt.Receiver, func(args ...string) (string, string, error)) {
	r := rt.New(t)
	mustOK(t, r.Deliver(t, stripe.Spec, checkout("done1"), nil))
	mustOK(t, r.Deliver(t, stripe.Spec, checkout("done2"), nil))
	mustOK(t, r.Deliver(t, stripe.Spec, invoiceCreated("inv1"), nil))
	r.API.SetStatus(422)
	mustOK(t, r.Deliver(t, stripe.Spec, checkout("bad"), nil))
	r.API.SetStatus(0)
	return r, operator(t, r)
}

func TestEventsList(t *testing.T) {
	_, events := setup(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"list"}, []string{"evt_bad", "evt_done1", "evt_done2", "evt_inv1"}},
		{[]string{"list", "--status", "parked"}, []string{"evt_bad"}},
		{[]string{"list", "--status", "done"}, []string{"evt_done1", "evt_done2", "evt_inv1"}},
		{[]string{"list", "--type", "invoice.created"}, []string{"evt_inv1"}},
		{[]string{"list", "--source", "github"}, nil},
		{[]string{"list", "--older-than", "1h"}, nil},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, _, err := events(append(c.args, "--json")...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if line == "" {
					continue
				}
				var s struct{ Key, State string }
				if err := json.Unmarshal([]byte(line), &s); err != nil {
					t.Fatalf("not JSON: %q", line)
				}
				got = append(got, s.Key)
			}
			slices.Sort(got)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("Table", func(t *testing.T) {
		out, _, err := events("list", "--status", "parked")
		if err != nil || !strings.Contains(out, "KEY") || !strings.Contains(out, "evt_bad") || !strings.Contains(out, "1/2") {
			t.Fatalf("table output %q, %v", out, err)
		}
	})
	t.Run("Limit", func(t *testing.T) {
		out, _, err := events("list", "--limit", "1", "--json")
		if err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("--limit 1 printed %q, %v", out, err)
		}
	})
	t.Run("ErrBadStatus", func(t *testing.T) {
		if _, _, err := events("list", "--status", "stuck"); err == nil {
			t.Fatal("accepted an unknown status")
		}
	})
}

func TestEventsShowParked(t *testing.T) {
	_, events := setup(t)
	out, _, err := events("show", "evt_bad")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"state     parked", "evt_bad/fulfillment", "parked", "422", "evt_bad/email.confirmation", "done", `"payment_status": "paid"`} {
		if !strings.Contains(out, want) {
			t.Errorf("show output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := events("show", "evt_missing"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("show of a missing event: %v", err)
	}
}

// TestEventsReplay: a parked step is replayed once its cause is fixed; a
// replay of finished work changes nothing.
func TestEventsReplay(t *testing.T) {
	r, events := setup(t)
	before := r.Snapshot(t)
	emails, calls := len(r.SMTP.Messages()), len(r.API.Requests())

	t.Run("DoneChangesNothing", func(t *testing.T) {
		out, _, err := events("replay", "evt_done1", "evt_inv1")
		if err != nil || !strings.Contains(out, "evt_done1: duplicate") || !strings.Contains(out, "evt_inv1: duplicate") {
			t.Fatalf("replay: %q, %v", out, err)
		}
		if diff := cmp.Diff(before, r.Snapshot(t)); diff != "" {
			t.Fatalf("replay of done events changed the state:\n%s", diff)
		}
		if len(r.SMTP.Messages()) != emails || len(r.API.Requests()) != calls {
			t.Fatal("replay of done events repeated a step")
		}
	})
	t.Run("ParkedAfterFix", func(t *testing.T) {
		out, stderr, err := events("replay", "--parked", "--since", "1h")
		if err != nil || !strings.Contains(out, "evt_bad: processed") || !strings.Contains(stderr, "1 parked events") {
			t.Fatalf("replay --parked: %q %q %v", out, stderr, err)
		}
		if n := r.API.CountByKey(fulfillmentKey("evt_bad/fulfillment")); n != 2 {
			t.Errorf("fulfillment calls for evt_bad = %d, want 2 (the refused one and the replay)", n)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'evt_bad%' AND status <> 'done'`); n != 0 {
			t.Errorf("%d claims of evt_bad not done after the replay", n)
		}
		if len(r.SMTP.Messages()) != emails {
			t.Error("the replay re-sent the confirmation email, which was done")
		}
		out, _, _ = events("list", "--status", "parked")
		if strings.Contains(out, "evt_bad") {
			t.Error("evt_bad still listed as parked")
		}
	})
	t.Run("ErrUsage", func(t *testing.T) {
		for _, args := range [][]string{{"replay"}, {"replay", "--parked"}, {"replay", "--parked", "--since", "1h", "evt_x"}} {
			if _, _, err := events(args...); err == nil {
				t.Errorf("events %v accepted", args)
			}
		}
	})
}

func TestEventsPrune(t *testing.T) {
	r, events := setup(t)
	ctx := context.Background()
	// A GitHub key, and a step left in progress, all made old.
	mustOK(t, r.Deliver(t, stripe.Spec, checkout("stuck"), nil))
	if _, err := r.Pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, completed_at) VALUES ('42:guid-1', 'github', 'done', now());
UPDATE processed_events SET status = 'in_progress', completed_at = NULL WHERE event_key = 'evt_stuck/fulfillment';
UPDATE processed_events SET claimed_at = now() - interval '40 days';`); err != nil {
		t.Fatal(err)
	}
	out, _, err := events("prune", "--older-than", "720h", "--batch", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "stripe: deleted 3 events") || !strings.Contains(out, "github: deleted 0 events") {
		t.Fatalf("prune output %q", out)
	}
	keys := map[string]bool{}
	rows, _ := r.Pool.Query(ctx, `SELECT event_key FROM processed_events WHERE kind = 'event'`)
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		keys[k] = true
	}
	rows.Close()
	for _, kept := range []string{"evt_bad", "evt_stuck", "42:guid-1"} {
		if !keys[kept] {
			t.Errorf("%s was pruned (parked, in progress, or a GitHub key within its retention)", kept)
		}
	}
	for _, gone := range []string{"evt_done1", "evt_done2", "evt_inv1"} {
		if keys[gone] {
			t.Errorf("%s was not pruned", gone)
		}
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'evt_done%' OR event_key LIKE 'evt_inv1%'`); n != 0 {
		t.Errorf("%d claims (and bodies) of pruned events remain", n)
	}
	if n := r.Count(t, `SELECT count(*) FROM orders`); n != 4 {
		t.Errorf("orders = %d: prune must never touch business rows", n)
	}
	if _, _, err := events("prune"); err == nil {
		t.Error("prune without --older-than was accepted")
	}
	out, _, _ = events("prune", "--older-than", "720h", "--github-older-than", "720h", "--force")
	if !strings.Contains(out, "github: deleted 1 events") {
		t.Errorf("GitHub key not pruned past its own retention with --force: %q", out)
	}
}

// TestEventsPruneRefuses: windows that would make a sender's retry look new
// are refused before anything is deleted, and --dry-run deletes nothing.
func TestEventsPruneRefuses(t *testing.T) {
	r, events := setup(t)
	if _, err := r.Pool.Exec(context.Background(), `UPDATE processed_events SET claimed_at = now() - interval '40 days'`); err != nil {
		t.Fatal(err)
	}
	before := r.Count(t, `SELECT count(*) FROM processed_events`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--github-older-than", "-1h", "--older-than", "720h"}, "--github-older-than -1h0m0s is negative"},
		{[]string{"--older-than", "-1h", "--force"}, "--older-than -1h0m0s is negative"},
		{[]string{"--older-than", "1s"}, "--older-than 1s is shorter than the floor 72h0m0s"},
		{[]string{"--older-than", "720h", "--github-older-than", "1h"}, "--github-older-than 1h0m0s is shorter than the floor 2160h0m0s"},
	} {
		_, stderr, err := events(append([]string{"prune"}, c.args...)...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("prune %v: %v, stderr %q; want refused with %q", c.args, err, stderr, c.want)
		}
	}
	out, _, err := events("prune", "--older-than", "720h", "--dry-run")
	if err != nil || !strings.Contains(out, "stripe: would delete 3 events (7 claim rows)") {
		t.Fatalf("dry run: %q, %v", out, err)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events`); n != before {
		t.Fatalf("claims %d after refusals and a dry run, want %d", n, before)
	}
}

// TestEventsReplayNeedsDeliveryConfig: a replay runs steps, so it refuses
// a shell without the server's SMTP relay and fulfillment API unless told.
func TestEventsReplayNeedsDeliveryConfig(t *testing.T) {
	r, _ := setup(t)
	bare := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"events", "replay"}, args...),
			getenv(map[string]string{"DATABASE_URL": r.Config.DatabaseURL, "MAIL_DIR": t.TempDir()}), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	calls := len(r.API.Requests())
	out, err := bare("evt_bad")
	if err == nil || !strings.Contains(err.Error(), "SMTP_ADDR is unset") || !strings.Contains(err.Error(), "FULFILLMENT_URL is unset") {
		t.Fatalf("replay without SMTP_ADDR and FULFILLMENT_URL: %q, %v; want a refusal naming both", out, err)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key = 'evt_bad/fulfillment' AND status = 'parked'`); n != 1 {
		t.Fatal("a refused replay changed the parked step")
	}
	out, err = bare("evt_bad", "--allow-unconfigured")
	if err != nil || !strings.Contains(out, "evt_bad: duplicate") {
		t.Fatalf("replay --allow-unconfigured: %q, %v", out, err)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key = 'evt_bad/fulfillment' AND status = 'parked'`); n != 1 ||
		len(r.API.Requests()) != calls {
		t.Fatal("without a fulfillment API the parked step must stay parked, and not be called")
	}
}

func fulfillmentKey(stepKey string) string { return fulfillment.IdempotencyKey(stepKey) }
