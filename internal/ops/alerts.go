package ops

import (
	"context"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Alert is an operator alert's step on one channel, as the console's
// overview lists it.
type Alert struct {
	Key     string    `json:"key"`
	Cause   string    `json:"cause"`
	Subject string    `json:"subject,omitempty"`
	Hour    string    `json:"hour"`
	Title   string    `json:"title"`
	Channel string    `json:"channel"` // the step's name: alert.webhook, alert.email
	Status  string    `json:"status"`  // the step's claim: done, in_progress (retried), parked, skipped
	At      time.Time `json:"at"`      // when it was raised
	// Attempts and LastError say how sending it went.
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
}

// AlertLog reads the operator alerts kept, newest first, at most limit:
// internal/alerts' Log, which owns their steps, handed down by the wiring.
type AlertLog interface {
	Recent(ctx context.Context, q webhooks.Querier, limit int) ([]Alert, error)
}
