// Package alerts tells operators what needs them, at most once per cause
// and hour: an event or a step was parked; signatures keep failing with
// fresh timestamps (a sender signs with a secret this receiver does not
// hold); a provider has sent nothing verified for longer than its usual
// silence; a reconciliation found events the deliveries had missed; the
// receiver refused deliveries for load; the database's primary changed (a
// fail-over, which may have lost acknowledged deliveries); the periodic
// endpoint check found a provider's endpoint wrong (once per finding).
//
// A Monitor runs in every replica and evaluates the causes every minute:
// the parked claims, the deliveries and the reconciliation runs from the
// database, which every replica sees alike; the signature failures and the
// refusals from this replica's own counters (nothing is written for a
// request that fails verification or is refused). When a cause holds, the
// alert is a standalone step of the processor (webhooks.RunStandalone) per
// channel, keyed "alert:<cause>[:<source>]:<hour>/alert.<channel>": the
// replica whose insert makes the claim sends it, under its lease; any
// other replica's, in the same hour, does nothing; a failed attempt is
// given back and the redriver of any replica sends it, as it finishes any
// step, and parks it once its attempts are spent. Every attempt is recorded
// as any step's.
//
// The channels are step kinds: KindWebhook POSTs {"text": …} (which Slack,
// Mattermost and most chat tools accept) to ALERT_WEBHOOK_URL, KindEmail
// sends to ALERT_EMAIL through the mail step kind's sender. A text names
// what it is about (event keys, providers, counts, reasons) with email
// addresses redacted, and never a secret.
package alerts

import (
	"fmt"
	"strings"
	"time"
)

// Cause is what an alert is about: the label of its metrics, the middle of
// its key.
type Cause string

const (
	// CauseParked: an event or a step was parked for an operator.
	CauseParked Cause = "parked"
	// CauseSignature: deliveries of a provider keep failing verification
	// with fresh timestamps (or, for a sender that signs none, at all).
	CauseSignature Cause = "signature"
	// CauseSilence: a provider has sent nothing verified for longer than
	// its usual silence.
	CauseSilence Cause = "silence"
	// CauseReconcile: a reconciliation found events never delivered.
	CauseReconcile Cause = "reconcile"
	// CauseLoad: the receiver refused deliveries for load.
	CauseLoad Cause = "load"
	// CauseFailover: the database's primary changed under the receiver.
	CauseFailover Cause = "failover"
	// CauseGenerationFailure: a sender reported an event it failed to
	// generate and will never deliver (Stripe's
	// v2.core.health.event_generation_failure.resolved), and what the
	// receiver recovered of it. Raised by the event that reports it, as
	// its own steps (EventSteps), not by the Monitor: once per failure the
	// sender names (its alert id), whatever the hour, since each names
	// another object to check.
	CauseGenerationFailure Cause = "event_generation_failure"
	// CauseEndpoint: the periodic endpoint check found a provider set up
	// to send this receiver less than it acts on (endpoint.go).
	CauseEndpoint Cause = "endpoint"
)

// Causes lists every Cause the Monitor evaluates (CauseGenerationFailure
// is raised by the events that report it).
var Causes = []Cause{CauseParked, CauseSignature, CauseSilence, CauseReconcile, CauseLoad, CauseFailover, CauseEndpoint}

// KeyPrefix starts the claim key of every alert: alerts are one range of
// the claims' primary key.
const KeyPrefix = "alert:"

// Source is the source of an alert's claim rows.
const Source = "alert"

// Alert is one alert: the payload of each of its channels' steps.
type Alert struct {
	Cause Cause `json:"cause"`
	// Subject is the provider it is about ("" for parked).
	Subject string `json:"subject,omitempty"`
	// Hour is the hour it is sent in, UTC ("2026-12-01T10Z"): one alert
	// per cause, subject and hour.
	Hour string `json:"hour"`
	// Title is one line (an email's subject); Text says the rest.
	Title string `json:"title"`
	Text  string `json:"text"`
	// Episode identifies what the alert is about when the condition
	// lasts (a silence's last delivery, a reconciliation run): an alert
	// of the same episode is not sent again within RepeatAfter.
	Episode string `json:"episode,omitempty"`
	// Until is, for CauseParked, when the newest claim it names was
	// parked: the next alert names those parked after it.
	Until time.Time `json:"until,omitzero"`
	// What the email channel stamps when the step is planned, so that
	// every attempt sends the same message.
	MailFrom        string `json:"mail_from,omitempty"`
	MailTo          string `json:"mail_to,omitempty"`
	MessageIDDomain string `json:"message_id_domain,omitempty"`
}

// hourLayout is the hour of an alert in its key: sortable, UTC.
const hourLayout = "2006-01-02T15Z"

// Hour is the hour bucket of t, as an alert's key has it.
func Hour(t time.Time) string { return t.UTC().Format(hourLayout) }

// group is the alert's key without its channel: "alert:<cause>[:<subject>]".
func group(c Cause, subject string) string {
	if subject == "" {
		return KeyPrefix + string(c)
	}
	return KeyPrefix + string(c) + ":" + subject
}

// Key is the claim key of an alert's step on a channel (the step's name).
func (a Alert) Key(step string) string { return group(a.Cause, a.Subject) + ":" + a.Hour + "/" + step }

// Message is the alert as a chat message or an email's body: its title,
// then its text.
func (a Alert) Message() string {
	return "[paywebhooks] " + a.Title + "\n" + strings.TrimRight(a.Text, "\n")
}

// plural is "1 event", "2 events".
func plural(n int64, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// dur is a duration for a text: 2h05m, 3d04h, 45s.
func dur(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
