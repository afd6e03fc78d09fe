package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRecipientRefused: the mail server refuses the customer's address
// for good (550 at RCPT TO, quoting it, as Postfix does). The email step
// is parked at its first attempt and the delivery answered 200 "parked",
// not 502: a 5xx would have the sender retry for days a message that can
// never be delivered. Neither the step's last_error nor any line the
// receiver logged names the address.
func TestRecipientRefused(t *testing.T) {
	w := newWorld(t)
	w.SMTP.RefuseRecipients(550, "Recipient address rejected: User unknown in virtual mailbox table")
	p := startReceiver(t, "receiver", w.env())
	d := checkout(7, "refused")
	const address = "buyer7@example.com" // checkout's customer_details.email
	step := d.StepKey(stepConfirmation)

	res := mustPost(t, p.URL, d, 200)
	status, attempts := w.stepState(t, step)
	var lastError string
	if err := w.DB.QueryRow(context.Background(),
		`SELECT coalesce(last_error, '') FROM processed_events WHERE event_key = $1`, step).Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	w.waitSettled(t, 30*time.Second)
	evidence(t, "the mail server answers RCPT TO with 550 quoting the customer's address", res.String(),
		fmt.Sprintf("email step %s after %d attempt(s), last_error %s", status, attempts, lastError))

	if !strings.Contains(res.Body, `"parked"`) {
		t.Errorf("answer %s, want 200 parked", res)
	}
	if status != "parked" || attempts != 1 {
		t.Errorf("email step %s after %d attempts, want parked after 1", status, attempts)
	}
	if !strings.Contains(lastError, "550") || !strings.Contains(lastError, "***@example.com") {
		t.Errorf("last_error %q, want the 550 reply with the address redacted", lastError)
	}
	if s, _ := w.stepState(t, d.StepKey(stepFulfillment)); s != "done" {
		t.Errorf("fulfillment step %s, want done", s)
	}
	if n := len(w.SMTP.Messages()); n != 0 {
		t.Errorf("the server accepted %d messages", n)
	}

	p.Term(t, 30*time.Second)
	lines, _ := p.out.snapshot()
	logged := false
	for _, l := range lines {
		if strings.Contains(strings.ToLower(l), strings.ToLower(address)) {
			t.Errorf("a log line names the customer's address: %s", l)
		}
		logged = logged || (strings.Contains(l, "step parked") && strings.Contains(l, "***@example.com"))
	}
	if strings.Contains(strings.ToLower(lastError), strings.ToLower(address)) {
		t.Errorf("last_error names the customer's address: %s", lastError)
	}
	if !logged {
		t.Errorf("no \"step parked\" line with the redacted reply among %d lines", len(lines))
	}
}
