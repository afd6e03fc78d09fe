package webhooks

// The four vocabularies of the package, each a type of its own so that a
// value of one is never mistaken for another: the status of a claim row,
// the outcome of a delivery, the state of an event as operators see it, and
// the outcome of one attempt of a step.

// ClaimStatus is processed_events.status.
type ClaimStatus string

const (
	// ClaimInProgress: a step whose lease is held, ran out or was given back.
	ClaimInProgress ClaimStatus = "in_progress"
	// ClaimDone: the event's transaction committed, or the step finished.
	ClaimDone ClaimStatus = "done"
	// ClaimParked: waits for an operator (a step failed for good or ran out
	// of attempts; an event's fields could not be read).
	ClaimParked ClaimStatus = "parked"
	// ClaimSkipped: a step that could not run where it was taken (no
	// recipient, no fulfillment API configured). Final, visible, counted;
	// an operator's replay runs it once the configuration allows.
	ClaimSkipped ClaimStatus = "skipped"
	// ClaimResolved: a parked event (its own claim, or the claims of its
	// parked steps) that an operator closed with a reason, because no
	// replay can fix it. Final: nothing takes, counts or alerts on it; a
	// replay reopens it only when an operator asks for one by its key.
	ClaimResolved ClaimStatus = "resolved"
)

// Outcome is what became of one delivery (or replay, or reconciled event).
// The stored outcome of an event (processed_events.outcome) is one of
// OutcomeProcessed, OutcomeIgnored and OutcomeParked.
type Outcome string

const (
	OutcomeProcessed     Outcome = "processed"      // this delivery did the work; 200
	OutcomeDuplicate     Outcome = "duplicate"      // the work was already done; 200
	OutcomeIgnored       Outcome = "ignored"        // an event type this receiver does not handle; 200
	OutcomeParked        Outcome = "parked"         // kept for an operator; 200
	OutcomeLeaseConflict Outcome = "lease_conflict" // another worker holds a fresh lease; 503
	OutcomeStepFailed    Outcome = "step_failed"    // a step failed and gave its lease back; 502
	OutcomeError         Outcome = "error"          // the database failed; 503
	// OutcomeFetchFailed: a delivery that only names its event (Event.Fetch)
	// could not fetch it from the sender's API; nothing was written; 503.
	OutcomeFetchFailed Outcome = "fetch_failed"
)

// Acknowledged reports whether the sender may stop sending: the delivery
// is answered 2xx.
func (o Outcome) Acknowledged() bool {
	switch o {
	case OutcomeProcessed, OutcomeDuplicate, OutcomeIgnored, OutcomeParked:
		return true
	}
	return false
}

// State is an event's state as operators see it, derived from its claims.
type State string

const (
	StateDone       State = "done"        // the event and every step are done (or skipped)
	StateResolved   State = "resolved"    // an operator closed what was parked; the rest is done
	StateInProgress State = "in_progress" // a step is leased or waits for its lease to run out
	StateFailed     State = "failed"      // a step failed and waits for a retry or the redriver
	StateParked     State = "parked"      // the event or a step waits for an operator
)

// States lists every State, worst last.
var States = []State{StateDone, StateResolved, StateInProgress, StateFailed, StateParked}

// AttemptOutcome is what became of one attempt of a step.
type AttemptOutcome string

const (
	AttemptDone      AttemptOutcome = "done"       // it ran and was recorded done
	AttemptFailed    AttemptOutcome = "failed"     // it failed; its lease was given back for a retry
	AttemptParked    AttemptOutcome = "parked"     // it failed for good or ran out of attempts
	AttemptSkipped   AttemptOutcome = "skipped"    // it cannot run with this configuration or payload
	AttemptLeaseLost AttemptOutcome = "lease_lost" // it ran, but its lease had been taken meanwhile
)

// Via says how an event reached the receiver.
type Via string

const (
	ViaDelivery  Via = "delivery"  // the sender posted it to its route
	ViaReconcile Via = "reconcile" // it was fetched from the provider's API
	// ViaCheckoutReturn: the buyer came back from the provider's checkout
	// (GET /checkout/return) and the object was read from its API then.
	ViaCheckoutReturn Via = "checkout_return"
)
