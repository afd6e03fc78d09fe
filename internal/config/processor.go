package config

import (
	"errors"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// loadProcessor reads how events and their steps are run: LEASE_DURATION
// and STEP_TIMEOUT (checked together: a lease a live worker could outlive
// is refused), REDRIVE_INTERVAL, REDRIVE_PARALLELISM, MAX_STEP_ATTEMPTS
// and RECONCILE_INTERVAL.
func (c *Config) loadProcessor(l *loader) {
	d := webhooks.Defaults
	c.LeaseDuration = l.duration("LEASE_DURATION", d.Lease)
	c.StepTimeout = l.duration("STEP_TIMEOUT", webhooks.StepTimeout(c.LeaseDuration))
	c.RedriveInterval = l.duration("REDRIVE_INTERVAL", d.Backoff)
	c.RedriveParallelism = l.integer("REDRIVE_PARALLELISM", d.RedriveParallelism)
	c.MaxStepAttempts = l.integer("MAX_STEP_ATTEMPTS", d.MaxAttempts)
	c.ReconcileInterval = l.duration("RECONCILE_INTERVAL", 0)
	if c.LeaseDuration < time.Second {
		l.fail("LEASE_DURATION", "must be at least 1s")
	} else if c.StepTimeout <= 0 {
		l.fail("STEP_TIMEOUT", "must be positive")
	} else if msg := webhooks.CheckLease(c.LeaseDuration, c.StepTimeout); msg != "" {
		l.problems.AddError(errors.New(msg))
	}
	if c.RedriveInterval < 100*time.Millisecond {
		l.fail("REDRIVE_INTERVAL", "must be at least 100ms")
	}
	if c.RedriveParallelism < 1 || c.RedriveParallelism > 256 {
		l.fail("REDRIVE_PARALLELISM", "must be between 1 and 256")
	}
	if c.MaxStepAttempts < 1 {
		l.fail("MAX_STEP_ATTEMPTS", "must be at least 1")
	}
	if c.ReconcileInterval < 0 || (c.ReconcileInterval > 0 && c.ReconcileInterval < time.Second) {
		l.fail("RECONCILE_INTERVAL", "must be at least 1s (or unset: no periodic reconciliation)")
	}
}

// Processor is the processor's share of the configuration.
func (c Config) Processor() webhooks.Options {
	return webhooks.Options{
		Lease:              c.LeaseDuration,
		StepTimeout:        c.StepTimeout,
		MaxAttempts:        c.MaxStepAttempts,
		Backoff:            c.RedriveInterval,
		RedriveParallelism: c.RedriveParallelism,
	}
}
