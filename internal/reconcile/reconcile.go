// Package reconcile is the framework of catching up: what every provider's
// catch-up shares, and nothing of any provider. A provider that can list
// what its deliveries missed (an events API, a listing of purchases)
// offers a Reconciler beside its Spec, in its own folder under
// internal/providers; this package runs it.
//
// A catch-up hands every event the receiver does not know to the same
// processor a delivery uses, through the same claim (Processor), marked
// Via "reconcile" (Reconciled): an event already processed is a duplicate
// and changes nothing. Every run that writes holds a PostgreSQL advisory
// lock per source, so that one replica at a time reconciles a source
// (Store.Lock), and is recorded in reconcile_runs (Store.StartRun,
// FinishRun), from which the metrics read the time of the last successful
// run; a listing that can resume keeps where it stopped in
// reconcile_cursors (Cursor). Runner runs the providers' periodic jobs
// (RECONCILE_INTERVAL), one replica at a time.
//
// Every run is bounded, whatever its provider's API answers (bounds.go): a
// run starts with Bound, which ends it after Limits.Timeout; its API
// client is NewClient's, which talks to the API's origin only (never
// following a redirect elsewhere with its credential), counts the run's
// requests and bounds each response; each listing follows its pages with
// Pages (a repeated cursor, or has_more after a page with nothing new,
// stops the run), and a listing held whole is bounded by Hold. A run a
// bound stops ends with an error wrapping ErrStopped that names the bound
// (Cause): recorded, printed and exiting non-zero like any failed run, its
// lock released. The base URL of every provider's API is checked at
// start-up by CheckAPIBase: https://, or http:// to a loopback host.
//
// The package consumes the core through two small interfaces, Processor
// and Claims, so that it does not depend on how the processor is built.
package reconcile

import (
	"context"
	"errors"

	"github.com/paywebhooks/receiver/internal/webhooks"
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

// Reconciled marks an event as fetched from the provider's API rather than
// posted to the receiver's route.
func Reconciled(ev webhooks.Event) webhooks.Event {
	ev.Via = webhooks.ViaReconcile
	return ev
}
