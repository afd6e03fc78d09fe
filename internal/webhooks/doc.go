// Package webhooks turns a verified delivery into work done exactly once in
// effect, whatever the sender, the network or the process does meanwhile.
//
// # One event, from request to done
//
// A delivery reaches Handler.Route. The raw body is read once (at most
// MAX_BODY_BYTES, else 413) and given to the Provider, which verifies the
// signature and returns an Event keyed on the event's identity: the Stripe
// event id, or GitHub's hook id with the delivery GUID. A request that fails
// verification is answered 400 and nothing is written.
//
// The Processor then runs the single-transaction pattern, on a context the
// sender cannot cancel by hanging up. In one transaction it claims the event
// (INSERT INTO processed_events … ON CONFLICT (event_key) DO NOTHING
// RETURNING) and stores the raw body in webhook_events with the same
// statement, lets the provider write its orders and invoices, and inserts a
// claim row for every step that leaves the database, already leased to
// itself. All of it commits, or none of it: a crash before the commit leaves
// no key, and the next retry claims cleanly. BEGIN travels to the server
// with the claim and a read of the event's claims, and COMMIT with the
// steps' leases, so the transaction costs no round trip of its own; a copy
// of an event already claimed learns what became of it from that read.
//
// After the commit, with no transaction open and no connection held, the
// processor runs each step (an email, the fulfillment call) and records the
// result with a compare-and-set on the claim it holds. The delivery answers
// 200 only when every step is done (or parked for an operator).
//
// # The states of a step's claim
//
// A step's row in processed_events (key "<event key>/<step name>") is in one
// of three states, plus one for operators:
//
//   - in_progress with a fresh claimed_at: a worker holds the lease. Only
//     the holder, identified by claim_token, may move it on. Anybody else
//     who asks is answered 503 with Retry-After (never 200: if the holder
//     dies, a 200 would have cost the event).
//   - in_progress with a claimed_at older than LEASE_DURATION, or given back
//     (claimed_at = -infinity after a failed attempt): nobody holds it. Any
//     worker may take it with the lease upsert, which bumps claim_token and
//     attempts; the sender's next retry takes it at once, the redriver once
//     next_attempt_at has passed.
//   - done, with completed_at: the holder finished the step and marked it
//     with UPDATE … WHERE claim_token = $mine AND status = 'in_progress'.
//     Nothing moves it again; a reclaim never matches a done row.
//   - parked: the holder's attempt failed permanently (the fulfillment API
//     answered 4xx) or the attempts ran out (MAX_STEP_ATTEMPTS). An operator
//     replays it; nothing else moves it.
//
// Transitions and who may make them: the event's transaction creates the
// step in_progress, held by itself. The holder moves it to done (success),
// gives it back (transient failure: SMTP refused, 5xx, timeout) or parks it.
// Any worker (a delivery, the redriver of any replica, an operator's replay)
// takes an expired or given-back lease. Because every write after the take
// is compare-and-set on claim_token, a slow worker whose lease was taken
// cannot mark the new holder's work done, and a take cannot overwrite a
// completion.
//
// Every call that leaves the database is bounded by StepTimeout, a quarter
// of the lease, so a live worker always finishes or gives back its lease
// before the lease could run out under it. The Message-ID of an email and
// the Idempotency-Key of a fulfillment call derive from the step's key, so
// the rare double attempt (a worker that died after the call and before its
// completion) is recognisable downstream.
//
// # Finishing without the sender
//
// GitHub never retries a failed delivery and Stripe stops after three days,
// so Processor.Redrive runs in every replica: it finds steps whose lease ran
// out or was given back and runs them from the stored step, with back-off,
// parking a step after MAX_STEP_ATTEMPTS.
package webhooks
