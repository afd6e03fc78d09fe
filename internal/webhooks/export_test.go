package webhooks

import (
	"context"
	"time"
)

// Test hooks into the claim machinery, for the tests of package webhooks_test.

// SetAfterEventCommit installs a hook that runs after an event's
// transaction commits and before its steps run.
func SetAfterEventCommit(p *Processor, f func(Event)) { p.afterEventCommit = f }

// Lease is a step claim held in a test.
type Lease = leasedStep

// ErrLeaseLost is errLeaseLost.
var ErrLeaseLost = errLeaseLost

// ClaimStep is claimStep.
func ClaimStep(ctx context.Context, q querier, source, eventKey string, s Step, lease time.Duration) (Lease, bool, string, error) {
	ls, ok, st, err := claimStep(ctx, q, source, eventKey, s, lease)
	return ls, ok, st.Status, err
}

// CompleteStep is completeStep.
func CompleteStep(ctx context.Context, q querier, ls Lease) error { return completeStep(ctx, q, ls) }

// ReleaseStep is releaseStep.
func ReleaseStep(ctx context.Context, q querier, ls Lease, cause error) (string, error) {
	return releaseStep(ctx, q, ls, cause, time.Second, 10, false)
}
