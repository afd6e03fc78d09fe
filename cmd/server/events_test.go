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
	"github.com/paywebhooks/receiver/internal/providers"
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
	r := rt.New(t, providers.List())
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
		{[]string{"list", "--state", "parked"}, []string{"evt_bad"}},
		{[]string{"list", "--state", "done"}, []string{"evt_done1", "evt_done2", "evt_inv1"}},
		// --status is the former name of --state.
		{[]string{"list", "--status", "parked"}, []string{"evt_bad"}},
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
		// The column --state filters is the table's STATE; one event is
		// "1 event".
		out, stderr, err := events("list", "--state", "parked")
		if err != nil || !strings.Contains(out, "KEY") || !strings.Contains(out, "evt_bad") || !strings.Contains(out, "1/2") ||
			!strings.Contains(out, "STATE") || stderr != "1 event\n" {
			t.Fatalf("table output %q, stderr %q, %v", out, stderr, err)
		}
		if _, stderr, err := events("list"); err != nil || stderr != "4 events\n" {
			t.Fatalf("stderr %q, %v; want 4 events", stderr, err)
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
		if err != nil || !strings.Contains(out, "evt_bad: processed") || !strings.Contains(stderr, "1 parked event received") {
			t.Fatalf("replay --parked: %q %q %v", out, stderr, err)
		}
		if n := r.API.CountByKey(fulfillmentKey("order:stripe:cs_bad/fulfillment")); n != 2 {
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
	if !strings.Contains(out, "github: deleted 1 event (1 claim row)") {
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

func fulfillmentKey(stepKey string) string { return fulfillment.IdempotencyKey(stepKey) }

// TestEventsReplayExitCodes: a replay's exit status and summary say what
// it left. An event the fulfillment API refuses again is left parked: exit
// 3, "1 parked"; once the API accepts, the same replay is done: exit 0; a
// key with no event is a failure: exit 1. --json is one report a script
// reads.
func TestEventsReplayExitCodes(t *testing.T) {
	r, events := setup(t)
	r.API.SetStatus(422)
	out, stderr, err := events("replay", "evt_done1", "evt_bad")
	if exitCode(err) != exitUnresolved || !strings.Contains(out, "evt_done1: duplicate\n") || !strings.Contains(out, "evt_bad: ") ||
		!strings.Contains(stderr, "replayed 2 events: 1 duplicate, 1 parked\n") || !strings.Contains(stderr, "1 of 2 events left parked") {
		t.Fatalf("replay with the API refusing again: exit %d (%v)\nstdout %q\nstderr %q; want exit 3 and 1 duplicate, 1 parked",
			exitCode(err), err, out, stderr)
	}
	t.Logf("replay with the API refusing again: exit %d\n%s%s", exitCode(err), out, stderr)

	type report struct {
		Events []struct {
			Key, Outcome, State, Result, Error string
		}
		Counts     map[string]int
		LeftParked int `json:"left_parked"`
		NotDone    int `json:"not_done"`
	}
	readReport := func(out string) report {
		t.Helper()
		var rep report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("replay --json printed %q: %v", out, err)
		}
		return rep
	}
	out, _, err = events("replay", "--json", "evt_done1", "evt_bad")
	rep := readReport(out)
	if exitCode(err) != exitUnresolved || rep.LeftParked != 1 || rep.NotDone != 0 ||
		!cmp.Equal(rep.Counts, map[string]int{"duplicate": 1, "parked": 1}) || len(rep.Events) != 2 ||
		rep.Events[1].Key != "evt_bad" || rep.Events[1].State != "parked" || rep.Events[1].Result != "parked" {
		t.Fatalf("replay --json: exit %d, %+v", exitCode(err), rep)
	}
	if _, stderr, err := events("replay", "--parked", "--since", "1h"); exitCode(err) != exitUnresolved || !strings.Contains(stderr, "1 parked") {
		t.Fatalf("replay --parked with the API refusing again: exit %d (%v) %q", exitCode(err), err, stderr)
	}

	r.API.SetStatus(0)
	out, stderr, err = events("replay", "--json", "evt_bad")
	rep = readReport(out)
	if err != nil || rep.LeftParked != 0 || len(rep.Events) != 1 || rep.Events[0].State != "done" ||
		!strings.Contains(stderr, "replayed 1 event: 1 processed\n") {
		t.Fatalf("replay once the API accepts: %v, %+v, %q; want exit 0 and the event done", err, rep, stderr)
	}

	out, stderr, err = events("replay", "evt_missing", "evt_done1")
	if exitCode(err) != exitFailure || !strings.Contains(out, "evt_missing: error: ") || !strings.Contains(out, "not found") ||
		!strings.Contains(stderr, "1 duplicate, 1 failed") || !strings.Contains(stderr, "1 of 2 events not done") {
		t.Fatalf("replay of a missing key: exit %d (%v)\n%q\n%q; want exit 1", exitCode(err), err, out, stderr)
	}
}

// TestEventsJSON: show and prune print JSON a script can read.
func TestEventsJSON(t *testing.T) {
	r, events := setup(t)
	out, _, err := events("show", "evt_bad", "--json")
	var d struct {
		Key, State string
		Claims     []struct{ Key, Status string }
		Body       map[string]any
	}
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.Key != "evt_bad" || d.State != "parked" || len(d.Claims) != 3 ||
		d.Body["id"] != "evt_bad" {
		t.Fatalf("show --json: %v, %q", err, out)
	}

	if _, err := r.Pool.Exec(context.Background(), `UPDATE processed_events SET claimed_at = now() - interval '40 days'`); err != nil {
		t.Fatal(err)
	}
	out, _, err = events("prune", "--older-than", "720h", "--dry-run", "--json")
	var p struct {
		DryRun  bool `json:"dry_run"`
		Sources []struct {
			Source        string
			Window        string
			WindowSeconds float64 `json:"window_seconds"`
			AtFloor       bool    `json:"at_floor"`
			Events        int64
			Claims        int64
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &p) != nil || !p.DryRun || len(p.Sources) == 0 {
		t.Fatalf("prune --json: %v, %q", err, out)
	}
	got := map[string]string{}
	for _, s := range p.Sources {
		got[s.Source] = fmt.Sprintf("%s %v %d %d", s.Window, s.AtFloor, s.Events, s.Claims)
	}
	if got["stripe"] != "720h0m0s false 3 7" || got["github"] != "2160h0m0s true 0 0" {
		t.Errorf("prune --json: %v; want stripe's 3 events (7 claim rows) at 720h, github at its floor", got)
	}
}

// TestEventsResolve: `events resolve` closes the parked event with a
// reason (the parked count and listing lose it, `--status resolved` lists
// it, show says who and why); a usage error exits 2, an event with nothing
// parked is refused (exit 1) saying what it is; prune treats it as finished.
func TestEventsResolve(t *testing.T) {
	r, events := setup(t)
	parked := func() int {
		return r.Count(t, `SELECT count(*) FROM processed_events WHERE status = 'parked'`)
	}
	listed := func(state string) string {
		out, _, err := events("list", "--status", state)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if parked() != 1 || !strings.Contains(listed("parked"), "evt_bad") {
		t.Fatalf("before: %d parked claims, listing %q", parked(), listed("parked"))
	}
	t.Logf("before: %d parked claims; events list --status parked:\n%s", parked(), listed("parked"))

	for _, args := range [][]string{{"resolve", "evt_bad"}, {"resolve", "--reason", "x"}, {"resolve", "evt_bad", "--reason", "  "},
		{"resolve", "evt_bad", "evt_done1", "--reason", "x"}} {
		_, stderr, err := events(args...)
		if exitCode(err) != 2 || !strings.Contains(stderr, "usage:") {
			t.Errorf("events %v: exit %d, stderr %q; want a usage error", args, exitCode(err), stderr)
		}
	}
	_, stderr, err := events("resolve", "evt_done1", "--reason", "nothing to close")
	if exitCode(err) != 1 || !strings.Contains(stderr, "evt_done1 is done; only a parked event") {
		t.Errorf("resolving a done event: exit %d, stderr %q", exitCode(err), stderr)
	}

	env := operatorEnvWith(r, map[string]string{"USER": "ana"})
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"events", "resolve", "evt_bad", "--reason", "refunded by hand; never to ship", "--json"},
		env, &out, &errOut)
	if err != nil {
		t.Fatalf("resolve: %v %s", err, errOut.String())
	}
	var res struct {
		Key        string
		State      string
		Closed     []string
		Resolution struct{ Reason, By string }
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json printed %q: %v", out.String(), err)
	}
	if res.State != "resolved" || len(res.Closed) != 2 || res.Resolution.By != "cli ana" ||
		res.Resolution.Reason != "refunded by hand; never to ship" {
		t.Errorf("resolved %+v", res)
	}
	if parked() != 0 || strings.Contains(listed("parked"), "evt_bad") || !strings.Contains(listed("resolved"), "evt_bad") {
		t.Errorf("after: %d parked claims; parked listing %q; resolved listing %q", parked(), listed("parked"), listed("resolved"))
	}
	t.Logf("after: %d parked claims; events list --status resolved:\n%s", parked(), listed("resolved"))
	show, _, err := events("show", "evt_bad")
	if err != nil || !strings.Contains(show, "state     resolved") || !strings.Contains(show, "resolved  by cli ana at ") ||
		!strings.Contains(show, "refunded by hand; never to ship") {
		t.Errorf("show after resolve: %v\n%s", err, show)
	}
	_, stderr, err = events("resolve", "evt_bad", "--reason", "again")
	if exitCode(err) != 1 || !strings.Contains(stderr, "resolved already, by cli ana") {
		t.Errorf("resolving twice: exit %d, stderr %q", exitCode(err), stderr)
	}
	if _, err := r.Pool.Exec(context.Background(), `UPDATE processed_events SET claimed_at = now() - interval '40 days'`); err != nil {
		t.Fatal(err)
	}
	out2, _, err := events("prune", "--older-than", "720h")
	if err != nil || !strings.Contains(out2, "stripe: deleted 4 events") {
		t.Errorf("prune after resolve: %v %q; want the resolved event pruned with the done ones", err, out2)
	}
}

// TestEventsShowAttempts: show lists every attempt of every step, with its
// outcome and the API's status, in text and JSON.
func TestEventsShowAttempts(t *testing.T) {
	r := rt.New(t, providers.List())
	events := operator(t, r)
	r.API.SetStatus(503)
	if res := r.Deliver(t, stripe.Spec, checkout("flaky"), nil); res.Status != 502 {
		t.Fatalf("delivery: %d", res.Status)
	}
	r.API.SetStatus(0)
	mustOK(t, r.Deliver(t, stripe.Spec, checkout("flaky"), nil))
	out, _, err := events("show", "evt_flaky")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"attempts:", "STATUS", "fulfillment         1", "failed", "503", "*fulfillment.StatusError",
		"fulfillment         2", "email.confirmation  1"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, _, err = events("show", "evt_flaky", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Claims []struct {
			Step    string
			History []struct {
				Attempt int
				Outcome string
				Status  int
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Claims {
		for _, a := range c.History {
			got = append(got, fmt.Sprintf("%s %d %s %d", c.Step, a.Attempt, a.Outcome, a.Status))
		}
	}
	want := []string{"email.confirmation 1 done 250", "fulfillment 1 failed 503", "fulfillment 2 done 201"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("--json attempts (-want +got):\n%s", diff)
	}
}

// operatorEnvWith is the operator's environment with more variables.
func operatorEnvWith(r *rt.Receiver, more map[string]string) func(string) string {
	env := map[string]string{"DATABASE_URL": r.Config.DatabaseURL}
	for k, v := range more {
		env[k] = v
	}
	return getenv(env)
}
