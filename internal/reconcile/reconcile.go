// Package reconcile catches up with what the providers know and the
// receiver never heard of: deliveries that did not arrive, and GitHub
// Marketplace purchases whose events were lost.
//
// Stripe: the Events API (GET /v1/events) is listed oldest first from a
// --since window or from the cursor of the last run (StripeAPI, with
// stripe-go v76's event iterator), and every event the claims table does
// not know is handed to the same processor a delivery uses, through the
// same claim (Stripe.Run). An event fetched over TLS with the API key is
// authentic without a signature; its stored body is its JSON object byte
// for byte as the API returned it, and it is marked Via "reconcile". The
// last event reconciled is kept (reconcile_cursors) so that --resume
// continues where a run stopped.
//
// GitHub Marketplace has no delivery API: its listing (plans and the
// accounts on each, GitHubAPI with the app's JWT) is compared with the
// Marketplace orders (Marketplace.Run). An account on a plan with no paid
// order becomes a synthetic marketplace_purchase "purchased" event, a plan
// that differs a synthetic "changed", each with a deterministic key and
// processed through the GitHub provider like a delivery, so that a second
// run is a duplicate and no step is ever sent twice. What cannot be
// corrected safely (a paid order for an account GitHub no longer lists: the
// date of its cancellation is unknown) is reported, never guessed.
//
// Every run that writes holds a PostgreSQL advisory lock per source, so one
// replica at a time reconciles a source (Store.Lock), and is recorded in
// reconcile_runs, from which the metrics read the time of the last
// successful run. Runner runs the jobs periodically (RECONCILE_INTERVAL).
//
// The package consumes the core through two small interfaces, Processor
// and Claims, so that it does not depend on how the processor is built.
package reconcile

import (
	"context"
	"errors"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Sources reconciled, as they appear in reconcile_runs, reconcile_cursors,
// logs and metrics.
const (
	SourceStripe      = "stripe"
	SourceMarketplace = "github_marketplace"
)

// Triggers of a run, as recorded in reconcile_runs.triggered_by.
const (
	TriggerCLI      = "cli"
	TriggerPeriodic = "periodic"
)

// Processor runs one event exactly as a delivery of it would run: the
// claim, the stored body and the database writes in one transaction, then
// the steps under their leases. *webhooks.Processor satisfies it.
type Processor interface {
	Process(ctx context.Context, prov webhooks.Provider, ev webhooks.Event) webhooks.Result
}

// Claims says which event keys the receiver has already claimed: events it
// received (or reconciled) before. Store satisfies it from processed_events.
type Claims interface {
	Known(ctx context.Context, keys []string) (map[string]bool, error)
}

var (
	// ErrBusy is returned when another run of the same source holds the
	// lock (another replica's periodic run, or an operator's).
	ErrBusy = errors.New("another reconciliation of this source is running")
	// ErrNoCursor is returned by a --resume run when no run with the same
	// filters has left a cursor, and no --since says where to start.
	ErrNoCursor = errors.New("no cursor to resume from: run once with --since")
	// ErrIncomplete is returned when a run could not process everything it
	// found; what it did is in its summary, and the next run retries the
	// rest.
	ErrIncomplete = errors.New("reconciliation incomplete")
)

// reconciled marks an event as fetched from the provider's API rather than
// posted to the receiver's route.
func reconciled(ev webhooks.Event) webhooks.Event {
	ev.Via = webhooks.ViaReconcile
	return ev
}
