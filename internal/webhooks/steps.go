package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// StepKind runs the steps of one kind (an email, a call to the fulfillment
// API, whatever a fork adds). The core knows kinds only through this
// interface: internal/mail and internal/fulfillment implement it, and the
// server registers them by name in StepKinds.
type StepKind interface {
	// Prepare completes a step's payload when the step is planned, with
	// what must stay the same on every attempt wherever it runs (an
	// email's sender and Message-ID domain). It does no I/O.
	Prepare(payload json.RawMessage) (json.RawMessage, error)

	// Unconfigured says why this process cannot run any step of the kind
	// (no fulfillment API configured), or "" when it can. A step planned
	// where its kind is unconfigured is recorded as skipped, with the
	// reason, and counted; one taken over by such a process (a replica
	// configured otherwise) is given back for a process that can run it.
	Unconfigured() string

	// Unavailable says why this step can never run as planned (it has no
	// recipient), or "" when it can. Such a step is recorded as skipped.
	Unavailable(payload json.RawMessage) string

	// Run makes one attempt, bounded by ctx. key is the step's RefKey (its
	// claim key, or "<object>/<name>" for a step of an object): whatever
	// must be the same on every attempt of this step and differ for every
	// other (a Message-ID, an Idempotency-Key) derives from it.
	// An error whose chain has a Permanent() bool method returning true
	// parks the step at once; any other error is retried.
	Run(ctx context.Context, key string, payload json.RawMessage) error
}

// StepKinds are the kinds a processor can run, by Step.Kind.
type StepKinds map[string]StepKind

// Ref is a value a step sends outside that is the same on every attempt of
// it and different for every other step (an email's Message-ID, a call's
// Idempotency-Key), so that an operator can find downstream what the step
// did, and tell a repeated attempt from a second one.
type Ref struct {
	Name  string `json:"name"`  // what it is called where it travels: "Message-ID", "Idempotency-Key"
	Value string `json:"value"` // its value for this step
}

// Referrer is an optional method of a StepKind: the Refs of one of its
// steps, from its RefKey and payload. A kind that sends nothing an
// operator could look for need not implement it.
type Referrer interface {
	Refs(key string, payload json.RawMessage) []Ref
}

// Refs returns the Refs of a step of the given kind, from its claim key
// ("<event key>/<name>") and payload, or none when this process does not
// know the kind or the kind says nothing: how operators' tools
// (internal/ops, the console) show them without knowing any kind.
func (ks StepKinds) Refs(kind, key string, payload json.RawMessage) []Ref {
	if r, ok := ks[kind].(Referrer); ok {
		return r.Refs(RefKey(key, key[strings.LastIndexByte(key, '/')+1:], payload), payload)
	}
	return nil
}

// permanent reports whether err says that retrying cannot help (the
// fulfillment API answered 4xx, an address is malformed).
func permanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// StepTimeout bounds every call that leaves the database when
// STEP_TIMEOUT is unset: a quarter of the lease window, capped at 30 s.
func StepTimeout(lease time.Duration) time.Duration {
	return min(lease/4, 30*time.Second)
}

// RecordTimeout bounds the statement that records a step's result: a
// quarter of the lease, capped at 10 s.
func RecordTimeout(lease time.Duration) time.Duration {
	return min(lease/4, 10*time.Second)
}

// CheckLease says what is wrong with a lease that a live worker could
// outlive: a step may take stepTimeout and its result RecordTimeout(lease)
// more to record, and the lease must outlast both, or another worker would
// take a step that is still running. It returns "" when the lease is long
// enough.
func CheckLease(lease, stepTimeout time.Duration) string {
	need := stepTimeout + RecordTimeout(lease)
	if lease <= need {
		return "LEASE_DURATION " + lease.String() + " is not longer than the step timeout (" + stepTimeout.String() +
			") plus the time allowed to record a completion (" + RecordTimeout(lease).String() +
			"): a live worker's lease could run out under it; raise LEASE_DURATION above " + need.String() +
			" or lower STEP_TIMEOUT"
	}
	return ""
}
