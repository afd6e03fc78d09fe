package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paywebhooks/receiver/internal/fulfillment"
)

// Event is one verified delivery, reduced to what the processor needs. It is
// rebuilt from the webhook_events row for replays and for the redriver, so
// every field here is stored.
type Event struct {
	Source     string // "stripe", "github"
	Key        string // dedupe key: the Stripe event id, or GitHub "<hook id>:<delivery GUID>"
	ID         string // the provider's event id: Stripe evt_…, GitHub delivery GUID
	Type       string // "checkout.session.completed", "marketplace_purchase", …
	APIVersion string // Stripe's api_version; empty for GitHub
	Body       []byte // the event's JSON as sent (GitHub form bodies: the payload field)

	// SecretIndex is the position, in the configured list, of the secret
	// that verified the delivery. It is never stored.
	SecretIndex int
}

// Step is one piece of an event's work that leaves the database, planned by
// a provider inside the event's transaction and stored with its claim, so
// that whoever takes the lease later (a retry, the redriver, an operator's
// replay) can run it without the provider.
type Step struct {
	Name        string               `json:"name"` // "email.confirmation", "fulfillment"
	Email       *EmailStep           `json:"email,omitempty"`
	Fulfillment *fulfillment.Request `json:"fulfillment,omitempty"`
}

// EmailStep is an email rendered from a template of internal/mail.
type EmailStep struct {
	Template string         `json:"template"`
	To       string         `json:"to"`
	Data     map[string]any `json:"data"`
}

// Tx is the event's transaction as a provider sees it: the event's claim
// is already in it, and everything written through it commits, or rolls
// back, with that claim. The queriers of internal/orders and
// internal/invoices accept it.
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Provider is one webhook sender: Stripe, GitHub. Adding a provider means
// implementing this interface in a package of its own and registering it in
// internal/server (see docs/adding-an-integration.md).
type Provider interface {
	// Source names the provider in keys, rows, logs and metrics.
	Source() string

	// Verify authenticates the request from its headers and raw body, and
	// returns the event it carries. It returns a *RejectError for anything
	// that is not a genuine delivery; nothing is written for those.
	Verify(h http.Header, body []byte, now time.Time) (Event, error)

	// Apply makes the event's database writes inside tx, the transaction
	// that holds the event's claim, and returns the steps that must leave
	// the database afterwards. It returns an error wrapping ErrUnhandled for
	// an event type the provider ignores, and one wrapping ErrUnprocessable
	// for an event whose fields cannot be read; any other error rolls the
	// transaction back and fails the delivery.
	Apply(ctx context.Context, tx Tx, ev Event) ([]Step, error)
}

var (
	// ErrUnhandled marks an event type this receiver acknowledges and ignores.
	ErrUnhandled = errors.New("event type not handled")
	// ErrUnprocessable marks a verified event whose fields a handler needs
	// cannot be read. The event is parked with its body and the error.
	ErrUnprocessable = errors.New("event cannot be processed")
)

// Unprocessable wraps err so that it matches ErrUnprocessable.
func Unprocessable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnprocessable, fmt.Sprintf(format, args...))
}

// RejectError is a delivery refused before anything is written. Reason is
// a short, fixed label for logs and metrics ("no_valid_signature").
type RejectError struct {
	Reason string
	Err    error
}

func (e *RejectError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *RejectError) Unwrap() error { return e.Err }

// Reject builds a *RejectError.
func Reject(reason string, err error) error { return &RejectError{Reason: reason, Err: err} }
