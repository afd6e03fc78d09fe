package mail

import (
	"context"
	"encoding/json"
	jsonv2 "encoding/json/v2"
	"errors"
	"fmt"
	"maps"
	"net/textproto"

	"github.com/paywebhooks/receiver/internal/orders"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// KindEmail is the step kind of an email.
const KindEmail = "email"

// Email is the payload of an email step, as stored with its claim.
type Email struct {
	Template string         `json:"template"`         // a template of this package: "order_confirmation", …
	To       string         `json:"to,omitempty"`     // the recipient the event names
	Notify   string         `json:"notify,omitempty"` // the recipient when neither To nor the order has one (NOTIFY_EMAIL)
	Data     map[string]any `json:"data,omitempty"`   // the template's data
	// Order is the order as the event's transaction wrote it, when the
	// step was planned on a condition that puts it there (orders.Changed).
	// Its email address is used when To is empty, and its fields are the
	// template's OrderID, ExternalID, AmountCents and Currency unless Data
	// sets them.
	Order *orders.Order `json:"order,omitempty"`
	// Facts are what the step's condition found in the event's
	// transaction (a receipt's AfterFailure), put in the payload by the
	// condition: template data over Data.
	Facts map[string]any `json:"facts,omitempty"`
	// Customer is the provider's customer the email is to, where the
	// provider has a billing portal: the email then carries a link to it
	// (Kind.Portal, PortalURL), never the customer's id.
	Customer *Customer `json:"customer,omitempty"`
	// From and MessageIDDomain are stamped when the step is planned, so
	// that every attempt, wherever it runs, sends the same message.
	From            string `json:"from,omitempty"`
	MessageIDDomain string `json:"message_id_domain,omitempty"`
}

// Step is an email step named name.
func Step(name string, e Email) webhooks.Step {
	b, err := json.Marshal(e)
	if err != nil {
		panic("mail: encode step: " + err.Error()) // a map of plain values always encodes
	}
	return webhooks.Step{Name: name, Kind: KindEmail, Payload: b}
}

func (e Email) recipient() string {
	switch {
	case e.To != "":
		return e.To
	case e.Order != nil && e.Order.CustomerEmail != "":
		return e.Order.CustomerEmail
	}
	return e.Notify
}

func (e Email) data() map[string]any {
	if e.Order == nil && len(e.Facts) == 0 {
		return e.Data
	}
	d := make(map[string]any, len(e.Data)+len(e.Facts)+4)
	if e.Order != nil {
		d["OrderID"], d["ExternalID"], d["AmountCents"], d["Currency"] = e.Order.ID, e.Order.ExternalID,
			e.Order.AmountCents, e.Order.Currency
	}
	for k, v := range e.Data {
		d[k] = v
	}
	for k, v := range e.Facts {
		d[k] = v
	}
	return d
}

// Customer names a provider's customer: whose billing portal a link in an
// email opens.
type Customer struct {
	Source  string `json:"source"`            // the provider: stripe, paddle, polar
	ID      string `json:"id"`                // cus_…, ctm_…, Polar's customer id
	Account string `json:"account,omitempty"` // a Stripe connected account (acct_…)
}

// CustomerOf is the customer id of source (and account), or nil when id
// is "" (an event that names no customer).
func CustomerOf(source, id, account string) *Customer {
	if id == "" {
		return nil
	}
	return &Customer{Source: source, ID: id, Account: account}
}

// Kind runs email steps: it renders the step's template and hands the
// message to Sender, with a Message-ID derived from the step's key.
type Kind struct {
	Sender Sender // nil: no way to send mail in this process
	From   string // MAIL_FROM, stamped on steps when they are planned
	Domain string // the right-hand side of Message-IDs, stamped likewise
	// Templates are those the emails are rendered with (MAIL_TEMPLATES_DIR);
	// nil: the built-in ones.
	Templates *Templates
	// Portal, when set, makes the link to a customer's billing portal
	// (internal/portal), the template's PortalURL for an email with a
	// Customer; "" for none. Made when the email is sent, so that it is
	// valid for as long from then.
	Portal func(Customer) string
}

// Prepare implements webhooks.StepKind: the sender and the Message-ID's
// domain are this process's, fixed when the step is planned.
func (k Kind) Prepare(payload json.RawMessage) (json.RawMessage, error) {
	var e Email
	if err := jsonv2.Unmarshal(payload, &e); err != nil {
		return nil, fmt.Errorf("email step: %w", err)
	}
	if e.From != "" && e.MessageIDDomain != "" {
		return payload, nil
	}
	if e.From == "" {
		e.From = k.From
	}
	if e.MessageIDDomain == "" {
		e.MessageIDDomain = k.Domain
	}
	return json.Marshal(e)
}

// Unconfigured implements webhooks.StepKind.
func (k Kind) Unconfigured() string {
	if k.Sender == nil {
		return "no mail sender configured"
	}
	return ""
}

// Refs implements webhooks.Referrer: the Message-ID every attempt of the
// step sends, with the domain stamped on the step when it was planned (this
// process's for a step planned before steps carried one).
func (k Kind) Refs(key string, payload json.RawMessage) []webhooks.Ref {
	var e Email
	_ = jsonv2.Unmarshal(payload, &e)
	if e.MessageIDDomain == "" {
		e.MessageIDDomain = k.Domain
	}
	if e.MessageIDDomain == "" {
		return nil
	}
	return []webhooks.Ref{{Name: "Message-ID", Value: MessageID(key, e.MessageIDDomain)}}
}

// Unavailable implements webhooks.StepKind.
func (k Kind) Unavailable(payload json.RawMessage) string {
	var e Email
	if err := jsonv2.Unmarshal(payload, &e); err != nil {
		return "email step payload unreadable: " + Redact(err.Error())
	}
	if e.recipient() == "" {
		return "no recipient address"
	}
	return ""
}

// Run implements webhooks.StepKind: one attempt to send the email. The
// text of its error, which the processor logs and stores as the step's
// last_error, has every email address redacted (Redact).
func (k Kind) Run(ctx context.Context, key string, payload json.RawMessage) error {
	var e Email
	if err := jsonv2.Unmarshal(payload, &e); err != nil {
		return redactErr(&invalidError{msg: "email step payload: " + err.Error()}, "")
	}
	return redactErr(k.run(ctx, key, e), e.recipient())
}

func (k Kind) run(ctx context.Context, key string, e Email) error {
	data := e.data()
	if e.Customer != nil && k.Portal != nil {
		if link := k.Portal(*e.Customer); link != "" {
			data = maps.Clone(data)
			if data == nil {
				data = map[string]any{}
			}
			data["PortalURL"] = link
		}
	}
	subject, text, html, err := k.Templates.Render(e.Template, data)
	if err != nil {
		return &invalidError{msg: fmt.Sprintf("render %s: %v", e.Template, err)}
	}
	from, domain := e.From, e.MessageIDDomain
	if from == "" { // planned before steps carried them
		from = k.From
	}
	if domain == "" {
		domain = k.Domain
	}
	return WithReplyCode(k.Sender.Send(ctx, Message{
		MessageID: MessageID(key, domain),
		From:      from,
		To:        e.recipient(),
		Subject:   subject,
		Text:      text,
		HTML:      html,
	}))
}

// WithReplyCode gives an error that carries the SMTP server's reply a
// StatusCode method (its reply code, such as 451), which the step's
// attempt records (webhooks.StatusCode).
func WithReplyCode(err error) error {
	var reply *textproto.Error
	if errors.As(err, &reply) {
		return &replyError{err: err, code: reply.Code}
	}
	return err
}

// replyError is an error the SMTP server answered, with its reply code.
type replyError struct {
	err  error
	code int
}

func (e *replyError) Error() string   { return e.err.Error() }
func (e *replyError) Unwrap() error   { return e.err }
func (e *replyError) StatusCode() int { return e.code }
