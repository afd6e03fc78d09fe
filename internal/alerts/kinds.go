package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The step kinds of the alert channels, and the names of their steps.
const (
	KindWebhook = "alert_webhook"
	KindEmail   = "alert_email"
	StepWebhook = "alert.webhook"
	StepEmail   = "alert.email"
)

// Channel is a way alerts are sent: a step kind and the name of its step.
type Channel struct {
	Step string
	Kind string
}

// Channels are the channels the configuration turns on: the webhook when
// ALERT_WEBHOOK_URL is set, email when ALERT_EMAIL is.
func Channels(webhookURL, email string) []Channel {
	var out []Channel
	if webhookURL != "" {
		out = append(out, Channel{Step: StepWebhook, Kind: KindWebhook})
	}
	if email != "" {
		out = append(out, Channel{Step: StepEmail, Kind: KindEmail})
	}
	return out
}

// CheckWebhookURL says what is wrong with ALERT_WEBHOOK_URL's form, or
// nil: it must be an absolute https (or http) URL without a user or
// password. Whether http may go off this machine is the configuration's
// rule (ALLOW_INSECURE_HTTP): alerts name events and reasons, and the URL
// itself is a secret.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("must be an absolute URL (https://hooks.slack.com/services/…)")
	case u.User != nil:
		return errors.New("must not carry a user or password")
	case u.Scheme == "https", u.Scheme == "http":
		return nil
	}
	return fmt.Errorf("must be an https URL, not %s", u.Scheme)
}

// MaskURL is what may be logged of the webhook URL: its scheme and host.
// The rest (a Slack webhook's path) is a secret.
func MaskURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "****"
	}
	if u.Path == "" || u.Path == "/" {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + "://" + u.Host + "/****"
}

// EventSteps are an alert raised by an event rather than by the Monitor
// (CauseGenerationFailure): a step of that event on each channel, planned
// with it, run under a lease and finished by the redriver as its other
// steps are, keyed "<event key>/alert.webhook" (and "/alert.email"). A
// channel this process has not configured is recorded skipped, with the
// reason, as any step of an unconfigured kind.
func EventSteps(a Alert) ([]webhooks.Step, error) {
	payload, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return []webhooks.Step{
		{Name: StepWebhook, Kind: KindWebhook, Payload: payload},
		{Name: StepEmail, Kind: KindEmail, Payload: payload},
	}, nil
}

// WebhookKind sends alerts to the webhook: POST {"text": …} with the
// alert's cause, subject, hour and key beside it. It never follows a
// redirect: the URL is a secret, and the alert would go, in clear
// perhaps, wherever the answer points.
type WebhookKind struct {
	URL    string       // ALERT_WEBHOOK_URL; "" when unset
	Client *http.Client // nil: http.DefaultClient's transport; a 10 s backstop; redirects refused in any case
}

// refuseRedirect is the webhook client's redirect policy (http.Client's
// CheckRedirect): the redirect itself is the answer, a failure.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Prepare implements webhooks.StepKind.
func (WebhookKind) Prepare(payload json.RawMessage) (json.RawMessage, error) { return payload, nil }

// Unconfigured implements webhooks.StepKind.
func (k WebhookKind) Unconfigured() string {
	if k.URL == "" {
		return "ALERT_WEBHOOK_URL is unset"
	}
	return ""
}

// Unavailable implements webhooks.StepKind.
func (WebhookKind) Unavailable(payload json.RawMessage) string { return unreadable(payload) }

func unreadable(payload json.RawMessage) string {
	var a Alert
	if err := json.Unmarshal(payload, &a); err != nil {
		return "alert payload unreadable: " + err.Error()
	}
	return ""
}

// webhookBody is what the webhook receives.
type webhookBody struct {
	Text    string `json:"text"`
	Cause   Cause  `json:"cause"`
	Subject string `json:"subject,omitempty"`
	Hour    string `json:"hour"`
	Key     string `json:"key"`
}

// Run implements webhooks.StepKind: one POST. A 2xx is done; a 4xx other
// than 408 and 429 is permanent (the URL is wrong or revoked: retrying
// cannot help); anything else is retried. No error names the URL.
func (k WebhookKind) Run(ctx context.Context, key string, payload json.RawMessage) error {
	var a Alert
	if err := json.Unmarshal(payload, &a); err != nil {
		return &StatusError{Code: 0, msg: "alert payload: " + err.Error(), permanent: true}
	}
	body, err := json.Marshal(webhookBody{Text: a.Message(), Cause: a.Cause, Subject: a.Subject, Hour: a.Hour, Key: key})
	if err != nil {
		return &StatusError{msg: err.Error(), permanent: true}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.URL, bytes.NewReader(body))
	if err != nil {
		return &StatusError{msg: "alert webhook: the URL cannot be requested", permanent: true}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "paywebhooks-alerts")
	hc := http.Client{CheckRedirect: refuseRedirect}
	if k.Client != nil {
		hc = *k.Client
		hc.CheckRedirect = refuseRedirect
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error quotes the URL, whose path is a secret: keep its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("alert webhook: POST %s: %w", MaskURL(k.URL), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode/100 == 2 {
		webhooks.Answered(ctx, resp.StatusCode)
		return nil
	}
	perm := resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout &&
		resp.StatusCode != http.StatusTooManyRequests
	what := webhooks.Redact(strings.ToValidUTF8(string(snippet), "?"), 200)
	if resp.StatusCode/100 == 3 {
		what = "a redirect, never followed: set ALERT_WEBHOOK_URL to the URL the hook is at"
	}
	return &StatusError{Code: resp.StatusCode, permanent: perm,
		msg: fmt.Sprintf("alert webhook: POST %s: status %d: %s", MaskURL(k.URL), resp.StatusCode, what)}
}

// StatusError is an attempt of an alert that failed: the webhook's answer
// (Code 0 when there was none).
type StatusError struct {
	Code      int
	msg       string
	permanent bool
}

func (e *StatusError) Error() string { return e.msg }

// Permanent reports whether retrying cannot help (webhooks.StepKind).
func (e *StatusError) Permanent() bool { return e.permanent }

// StatusCode is the webhook's HTTP status, recorded with the attempt.
func (e *StatusError) StatusCode() int { return e.Code }

// EmailKind sends alerts by email to ALERT_EMAIL, through the mail step
// kind's sender (SMTP_ADDR, or .eml files in MAIL_DIR), with a Message-ID
// derived from the step's key like every email's.
type EmailKind struct {
	Sender mail.Sender
	From   string // MAIL_FROM
	To     string // ALERT_EMAIL; "" when unset
	Domain string // the right-hand side of Message-IDs
}

// Prepare implements webhooks.StepKind: the sender, recipient and
// Message-ID domain are this process's, fixed when the step is planned.
func (k EmailKind) Prepare(payload json.RawMessage) (json.RawMessage, error) {
	var a Alert
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, fmt.Errorf("alert email step: %w", err)
	}
	a.MailFrom, a.MailTo, a.MessageIDDomain = k.From, k.To, k.Domain
	return json.Marshal(a)
}

// Unconfigured implements webhooks.StepKind.
func (k EmailKind) Unconfigured() string {
	switch {
	case k.To == "":
		return "ALERT_EMAIL is unset"
	case k.Sender == nil:
		return "no mail sender configured"
	}
	return ""
}

// Unavailable implements webhooks.StepKind.
func (EmailKind) Unavailable(payload json.RawMessage) string { return unreadable(payload) }

// Refs implements webhooks.Referrer: the alert email's Message-ID.
func (k EmailKind) Refs(key string, payload json.RawMessage) []webhooks.Ref {
	var a Alert
	_ = json.Unmarshal(payload, &a)
	domain := a.MessageIDDomain
	if domain == "" {
		domain = k.Domain
	}
	if domain == "" {
		return nil
	}
	return []webhooks.Ref{{Name: "Message-ID", Value: mail.MessageID(key, domain)}}
}

// Run implements webhooks.StepKind: one attempt to send the alert.
func (k EmailKind) Run(ctx context.Context, key string, payload json.RawMessage) error {
	var a Alert
	if err := json.Unmarshal(payload, &a); err != nil {
		return &StatusError{msg: "alert payload: " + err.Error(), permanent: true}
	}
	from, to, domain := a.MailFrom, a.MailTo, a.MessageIDDomain
	if from == "" {
		from = k.From
	}
	if to == "" {
		to = k.To
	}
	if domain == "" {
		domain = k.Domain
	}
	once := "at most once an hour for each cause (" + string(a.Cause) + ")"
	if a.Cause == CauseGenerationFailure {
		once = "once for each failure the sender reports (" + string(a.Cause) + ")"
	}
	return mail.WithReplyCode(k.Sender.Send(ctx, mail.Message{
		MessageID: mail.MessageID(key, domain),
		From:      from,
		To:        to,
		Subject:   "[paywebhooks] " + a.Title,
		Text: a.Text + "\n\n-- \nSent " + once + ", by the receiver's alerts. The console's overview and " +
			"`server events list` say more.\n",
	}))
}
