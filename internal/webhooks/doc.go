// Package webhooks turns a verified delivery into work done exactly once in
// effect, whatever the sender, the network or the process does meanwhile.
//
// # One event, from request to done
//
// A delivery reaches Handler.Route, the handler of one provider's route
// (POST /webhooks/<source>, one per Spec of internal/providers). Before
// reading anything it refuses what cannot be a delivery: without any of the
// provider's signature headers, 400 (the body is never read); a declared
// length over MAX_BODY_BYTES, 413. Until its signature is verified, a
// request is an anonymous stranger's, and costs what Admission lets it:
// its body must arrive within BODY_TIMEOUT of its headers (else 408), and
// is read once, into buffers paid for from a budget that unverified bodies
// share fairly by client address and block of addresses (Blocks), as its
// bytes arrive (an address beyond its share of a full budget is answered
// 503 without the rest being read).
// The raw body is then given to the Provider's Verify, which checks the
// signature (and, where the sender signs one, the timestamp) and returns
// an Event keyed on the event's identity: the Stripe event id, GitHub's
// hook id and delivery GUID followed by a hash of the body, Paddle's event
// id. Only a verified
// delivery takes one of the MAX_INFLIGHT slots (beyond them, 503 with
// Retry-After), so that no stranger can keep a sender out. What no sender
// signed is read, never trusted: a GitHub delivery is known by the hash of
// its signed payload (Event.BodyHash), unique among stored events, so that
// no header makes a body new and no body takes the key of another; the
// event type must agree with the body; and metrics label only values from
// closed sets. A request
// that fails any of this is answered 400 and nothing is written.
//
// The Processor then runs the single-transaction pattern, on a context the
// sender cannot cancel by hanging up. The provider's Plan queues the
// event's database writes and its steps on a Plan, doing no I/O (a body
// whose JSON repeats a member name is not planned at all: it is parked
// with its claim, see RepeatedName), and the processor sends all of it to
// PostgreSQL in one round trip, as one implicit transaction:
//
//   - the claim, INSERT INTO processed_events … ON CONFLICT DO NOTHING
//     RETURNING, whose row carries the event's raw body and metadata; when
//     it inserts, it marks the transaction as the claim's holder (a
//     transaction-local setting the SQL function receiver_claimed() reads);
//   - the provider's writes (orders, invoices), each safe to run twice and
//     each conditional on receiver_claimed(), so a copy's are skipped;
//   - a claim row for every step, already leased to this worker, each
//     inserted only if its condition holds: SQL that asks whether this
//     transaction changed the order or invoice (xmin is its own), so that
//     "email only if the order became paid" needs no round trip of its own.
//
// All of it commits, or none of it: a crash before the commit leaves no
// key, and the next retry claims cleanly. A copy is known from its claim's
// answer; nothing in its transaction fails or writes, and it then reads
// every claim of its event, as committed (the event's own key and its
// steps' keys "<key>/<step>" are one range of the primary key), in a second
// round trip: what became of the event. A copy under another
// key (a GitHub body sent again with another GUID or hook id) finds no
// claim of its own and is answered as a copy of the event that holds its
// body hash.
//
// After the commit, with no transaction open and no connection held, the
// processor runs each step (an email, the fulfillment call: a StepKind
// registered by name) and records the result with a compare-and-set on the
// claim it holds. The delivery answers 200 only when every step is done,
// skipped or parked for an operator.
//
// # What a delivery's transaction may lock
//
// Every row an event's transaction writes stays locked until its commit,
// and a commit waits for the disk (commits of concurrent transactions share
// a flush, but each waits for one). A row that events of other objects
// also write is therefore a queue: were every event of one customer to
// lock the customer's row, a customer's burst (a Checkout with a
// subscription sends half a dozen events within a second, a Connect
// platform's renewal run many more) would commit one event at a time.
// Hence the rule:
//
//   - An event's transaction may lock the rows of its own event (its claim,
//     its steps) and of the object it is about (the order, the invoice,
//     the subscription, the dispute): events of one object are ordered
//     anyway, and there are few of them.
//   - A row that events of different objects write (a customer's address,
//     a subject's entitlements, anything keyed by the customer or the
//     account) is locked only by an event that changes it. Such a write is
//     two statements: an INSERT that writes only where the row is absent
//     (INSERT … ON CONFLICT DO NOTHING), then an UPDATE whose WHERE holds
//     only for a real change (PostgreSQL locks only the rows an UPDATE
//     changes; its snapshot, taken after the INSERT, sees a row another
//     event inserted meanwhile). Either two statements of the same batch or,
//     where they run for many events, a VOLATILE plpgsql function holding
//     both (each of its statements takes its own snapshot;
//     customers_remember), which a pooler that prepares nothing parses and
//     plans as one small call. Never
//     INSERT … ON CONFLICT DO UPDATE, which locks the row it meets even
//     when its WHERE is false, nor an UPDATE that always writes
//     (updated_at = now(), a counter). What is counted is counted when
//     read, or in memory (metrics).
//   - A real change to such a row is rare by construction (internal/customers:
//     a new address, the first event of a later second, the row's
//     insert), so that two events of one customer wait for each other for
//     one commit at most. Queue such writes after the event's own where
//     the plan allows: the lock is held from its statement to the commit.
//
// TestCustomerBurstWaitsOnNothing holds it: it runs every pair of the events
// of two checkouts of one customer, the first held open before its commit,
// and fails if the second waits for a lock.
// # A delivery that only names its event
//
// Some deliveries carry no event, only its name (Stripe's thin events, on
// a route of their own: a Spec's Path). Their Verify checks the signature
// and the name and sets Event.Fetch; the delivery is admitted as any other
// (no body read without a signature header, no slot before it is
// verified) and then holds its slot while the processor reads the event's
// claims: a copy is answered from them, with no call to the sender's API.
// Only an event never claimed is fetched, before its transaction, by the
// provider's bounded client (its time, retries and response size, and a
// limit on the fetches under way, past which it refuses at once rather
// than hold a slot waiting); what the API returns becomes the event's
// Body, stored with its claim and planned as any other, so that a replay
// plans it again without fetching. A fetch that fails is answered 503
// (fetch_failed) with nothing written: the sender retries.
//
// # The states of a step's claim
//
// A step's row in processed_events (key "<event key>/<step name>") is in one
// of these states:
//
//   - in_progress with a fresh claimed_at: a worker holds the lease. Only
//     the holder, identified by claim_token, may move it on. Anybody else
//     who asks is answered 503 with Retry-After (never 200: if the holder
//     dies, a 200 would have cost the event).
//   - in_progress with a claimed_at older than LEASE_DURATION, or given back
//     (claimed_at = -infinity after a failed attempt): nobody holds it. Any
//     worker may take it (UPDATE … WHERE the lease has run out), which bumps
//     claim_token and attempts; the sender's next retry takes it at once,
//     the redriver once next_attempt_at has passed.
//   - done, with completed_at: the holder finished the step and marked it
//     with UPDATE … WHERE claim_token = $mine AND status = 'in_progress'.
//     Nothing moves it again; a take never matches a done row.
//   - skipped: the step cannot run as planned (no recipient address, or its
//     kind is not configured where it was planned, such as the fulfillment
//     call without FULFILLMENT_URL). Recorded with the reason and counted,
//     never silently dropped; an operator's replay runs it once it can.
//   - parked: the holder's attempt failed permanently (the fulfillment API
//     answered 4xx, the mail server refused the recipient with a 5xx) or
//     the attempts ran out (MAX_STEP_ATTEMPTS). An operator replays it;
//     nothing else moves it.
//   - resolved: an operator closed a parked step (and its event's own claim)
//     that no replay can fix, with a reason kept on the event's row
//     (internal/ops). Final like done; only a replay asked for by the
//     event's key parks it again, to run it.
//
// Transitions and who may make them: the event's transaction creates the
// step in_progress, held by itself (or skipped). The holder moves it to
// done (success), skipped, gives it back (transient failure: the SMTP relay
// down or answering 4xx, an API's 5xx, a timeout, or a kind this process is
// not configured for) or parks it.
// Any worker (a delivery, the redriver of any replica, an operator's
// replay) takes an expired or given-back lease. Because every write after
// the take is compare-and-set on claim_token, a slow worker whose lease was
// taken cannot mark the new holder's work done, and a take cannot overwrite
// a completion.
//
// Every attempt is recorded in step_attempts by the same statement that
// moves the claim (a data-modifying CTE): its start, duration, outcome (done,
// failed, parked, skipped, or lease_lost when the compare-and-set found the
// claim taken), the error's class and redacted text, and the status the
// other side answered (an error's StatusCode method). It is numbered by the
// lease token it held, which every take bumps and nothing resets.
//
// A step may also belong to no event (RunStandalone: an operator alert): a
// claim row of kind 'step' with no parent, keyed by what makes its work one,
// claimed by whoever inserts it first, and finished by the redriver like
// any other.
//
// Every call that leaves the database is bounded by the step timeout
// (STEP_TIMEOUT, by default a quarter of the lease) and its result by
// RecordTimeout; start-up refuses a lease that a live worker could outlive.
// The Message-ID of an email and the Idempotency-Key of a fulfillment call
// derive from the step's key (and the email's domain is stamped on the step
// when it is planned), so the rare double attempt (a worker that died after
// the call and before its completion) is recognisable downstream.
//
// # Finishing without the sender
//
// GitHub never retries a failed delivery and Stripe stops after three days,
// so Processor.Redrive runs in every replica: it finds steps whose lease ran
// out or was given back (through a partial index of open steps) and runs up
// to REDRIVE_PARALLELISM of them at once, each under its own lease, with
// back-off, parking a step after MAX_STEP_ATTEMPTS.
package webhooks
