package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/mail"
)

// MailSender sends one email; internal/mail's SMTP and file senders satisfy it.
type MailSender interface {
	Send(ctx context.Context, m mail.Message) error
}

// Fulfiller calls the fulfillment API; *fulfillment.Client satisfies it.
type Fulfiller interface {
	Fulfill(ctx context.Context, idempotencyKey string, r fulfillment.Request) error
}

// StepRunner performs steps that leave the database. It holds no database
// connection: the processor calls it between two short statements.
type StepRunner struct {
	Mail       MailSender
	MailFrom   string
	MailDomain string    // right-hand side of every Message-ID
	Fulfiller  Fulfiller // nil when FULFILLMENT_URL is unset
}

// Unavailable says why a planned step cannot run with this configuration
// (no recipient, no fulfillment API), or "" when it can. Such a step is not
// planned at all, and the processor logs and counts it as skipped.
func (r *StepRunner) Unavailable(s Step) string {
	switch {
	case s.Email != nil && s.Email.To == "":
		return "no recipient address"
	case s.Email != nil && r.Mail == nil:
		return "no mail sender configured"
	case s.Fulfillment != nil && r.Fulfiller == nil:
		return "FULFILLMENT_URL is unset"
	case s.Email == nil && s.Fulfillment == nil:
		return "step has no action"
	}
	return ""
}

// permanent reports whether err says that retrying cannot help (the
// fulfillment API answered 4xx, an address is malformed).
func permanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// Run performs the step whose claim key is key. The Message-ID and the
// Idempotency-Key derive from key alone, so every attempt of the step sends
// the same ones and every other step or event different ones.
func (r *StepRunner) Run(ctx context.Context, key string, s Step) error {
	if why := r.Unavailable(s); why != "" {
		return fmt.Errorf("step %s cannot run in this process: %s", key, why)
	}
	switch {
	case s.Email != nil:
		subject, text, html, err := mail.Render(s.Email.Template, s.Email.Data)
		if err != nil {
			return fmt.Errorf("render %s: %w", s.Email.Template, err)
		}
		return r.Mail.Send(ctx, mail.Message{
			MessageID: mail.MessageID(key, r.MailDomain),
			From:      r.MailFrom,
			To:        s.Email.To,
			Subject:   subject,
			Text:      text,
			HTML:      html,
		})
	case s.Fulfillment != nil:
		return r.Fulfiller.Fulfill(ctx, fulfillment.IdempotencyKey(key), *s.Fulfillment)
	}
	return fmt.Errorf("step %s has no action", key)
}

// StepTimeout bounds every call that leaves the database. It is a quarter of
// the lease window, capped at 30 s: a step that times out has given its
// lease back long before the lease could run out under it, so a live worker
// is never mistaken for a dead one.
func StepTimeout(lease time.Duration) time.Duration {
	return min(lease/4, 30*time.Second)
}

// DeliveryTimeout bounds the processing of one delivery once verified: the
// event's transaction and its steps, which run side by side, each within
// StepTimeout.
func (p *Processor) DeliveryTimeout() time.Duration {
	return StepTimeout(p.opts.Lease) + 30*time.Second
}
