package webhooks

import (
	"context"
	"time"
)

// Test hooks into the claim machinery, for the tests of package webhooks_test.

// SetAfterEventCommit installs a hook that runs after an event's
// transaction commits and before its steps run.
func SetAfterEventCommit(p *Processor, f func(Event)) { p.afterEventCommit = f }

// SetAfterReopen installs a hook that runs when a replay has given back
// an event's parked or skipped steps and before it takes them.
func SetAfterReopen(p *Processor, f func(Event)) { p.afterReopen = f }

// Lease is a step claim held in a test.
type Lease = leasedStep

// ErrLeaseLost is errLeaseLost.
var ErrLeaseLost = errLeaseLost

// TakeStep is takeStep.
func TakeStep(ctx context.Context, q Querier, key string, lease time.Duration) (Lease, bool, ClaimStatus, error) {
	ls, ok, st, err := takeStep(ctx, q, key, lease)
	return ls, ok, st.Status, err
}

// CompleteStep is completeStep.
func CompleteStep(ctx context.Context, q Querier, ls Lease) error {
	return completeStep(ctx, q, ls, attempt{start: time.Now()})
}

// ReleaseStep is releaseStep.
func ReleaseStep(ctx context.Context, q Querier, ls Lease, cause error) (ClaimStatus, error) {
	return releaseStep(ctx, q, ls, cause, time.Second, 10, false, attempt{start: time.Now()})
}

// ScanNames is scanNames, RepeatedName's fast path.
var ScanNames = scanNames

// Queries of the attention index (migration 12), for the plan test.
var DueStepsSQL, OldestLeaseSQL, WaitingStepsSQL = dueStepsSQL, oldestLeaseSQL, waitingStepsSQL
