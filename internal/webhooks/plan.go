package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
)

// Plan is the work of one event, queued by its provider's Plan and sent by
// the processor in the event's transaction, in the order queued, in the
// same round trip as the claim and the commit. A copy of an event (its
// claim was made before) travels the same way, so every write must do
// nothing unless this transaction made the claim: end its WHERE with the
// SQL function receiver_claimed(), as internal/orders and
// the Stripe provider's invoices package do (a one-time filter: the write is skipped at no
// cost). A write that forgets is still safe, since every write survives
// being run twice, but does its work for nothing. Steps are guarded so by
// the processor.
//
// A step's condition is SQL, run where the step was queued: it sees every
// write queued before it. Conditions typically ask whether this
// transaction wrote a row (`xmin = pg_current_xact_id()::xid`), which is
// how "send the email only if the order changed" is decided without a
// round trip; internal/orders and the providers provide them.
type Plan struct {
	items []planned
}

type planned struct {
	sql  string // a write, or a step's condition
	args []any
	step *Step // nil for a write
}

// Exec queues a write. Its result is not read: it must be safe to run
// twice (unique keys, conditional updates), like every write of an event,
// and should do nothing unless receiver_claimed().
func (p *Plan) Exec(sql string, args ...any) {
	p.items = append(p.items, planned{sql: sql, args: args})
}

// Step queues s, planned whatever the writes did.
func (p *Plan) Step(s Step) { p.StepIf(s, alwaysSQL) }

// StepIf queues s, planned only when query, run at this point of the
// transaction, returns a row. The row's first column (jsonb, or NULL) is
// merged into the step's payload, so that a step can carry what the
// transaction wrote (an order's id, its stored email address). The query
// uses $1… for args as usual.
func (p *Plan) StepIf(s Step, query string, args ...any) {
	p.items = append(p.items, planned{sql: query, args: args, step: &s})
}

// Steps returns the steps queued, in order.
func (p *Plan) Steps() []Step {
	var out []Step
	for _, it := range p.items {
		if it.step != nil {
			out = append(out, *it.step)
		}
	}
	return out
}

func (p *Plan) stepCount() int {
	n := 0
	for _, it := range p.items {
		if it.step != nil {
			n++
		}
	}
	return n
}

// Len is the number of writes and steps queued.
func (p *Plan) Len() int { return len(p.items) }

const alwaysSQL = `SELECT NULL::jsonb`

// stepInsertSQL plans a step under a condition: the claim row is inserted
// already leased to the transaction's worker (token 1, attempt 1), or,
// when the process cannot run its kind, skipped with the reason (a step
// of an object, Step.Object, that another event or path already planned is
// not inserted: uq_steps_object); its lease starting at clock_timestamp() rather than now() (the transaction's
// start: one that waited on a lock longer than the lease would commit
// leases already run out under a live worker). The condition's own
// parameters come first, so that its SQL is used as written; n of them.
func stepInsertSQL(cond string, n int) string {
	key := stepSQLKey{cond, n}
	if s, ok := stepSQLCache.Load(key); ok {
		return s.(string)
	}
	a := func(i int) string { return "$" + strconv.Itoa(n+i) }
	s := `INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, step_kind, payload,
                              claim_token, attempts, claimed_at, traceparent, last_error, completed_at)
SELECT ` + a(1) + `, ` + a(2) + `, ` + a(8) + `, 'step', ` + a(3) + `, ` + a(4) + `, ` + a(5) + `,
       ` + a(6) + `::jsonb || coalesce(q.patch, '{}'::jsonb), 1, 1, clock_timestamp(), NULLIF(` + a(7) + `, ''),
       NULLIF(` + a(9) + `, ''), CASE WHEN ` + a(8) + ` = 'skipped' THEN now() END
FROM (SELECT * FROM (` + cond + `) AS c(patch) LIMIT 1) AS q
WHERE receiver_claimed()
ON CONFLICT DO NOTHING
RETURNING payload`

	stepSQLCache.Store(key, s)
	return s
}

type stepSQLKey struct {
	cond string
	n    int
}

var stepSQLCache sync.Map

// Step is one piece of an event's work that leaves the database: a name
// unique within the event, the kind of work (the StepKind that runs it) and
// that kind's payload. It is stored with its claim, so that whoever takes
// the lease later (a retry, the redriver, an operator's replay) runs it
// without the provider.
type Step struct {
	Name    string          // "email.confirmation", "fulfillment"
	Kind    string          // "email", "fulfillment": a key of the processor's StepKinds
	Payload json.RawMessage // read by the kind alone
	// Object, when set, is the business object the step acts on, e.g.
	// "order:stripe:cs_…" (the confirmation and the fulfillment call of an
	// order), "invoice:in_…:attempt:2": the step is then one per object
	// and name, whichever event or path plans it first (a delivery, a
	// checkout return, a catch-up, a replay); another plan of it is not
	// inserted (the unique index uq_steps_object), and what it sends
	// outside (an email's Message-ID, a call's Idempotency-Key) derives
	// from "<Object>/<Name>" (RefKey), the same whoever planned it, rather
	// than from its claim key. Without it, the step is its event's.
	Object string
}

// objectMember is the member of a stored step's payload that holds its
// Step.Object: the processor sets it when the step is planned, after the
// kind's Prepare, and the index uq_steps_object is on it.
const objectMember = "step_object"

// RefKey is what a step's outside references derive from (StepKind.Run's
// key): "<object>/<name>" for a step of an object (Step.Object, kept in
// its payload), else its claim key.
func RefKey(claimKey, name string, payload json.RawMessage) string {
	if o := objectOf(payload); o != "" {
		return o + "/" + name
	}
	return claimKey
}

// objectOf reads the Step.Object a stored payload carries; "" when none.
func objectOf(payload json.RawMessage) string {
	if !bytes.Contains(payload, []byte(objectMember)) {
		return ""
	}
	var v struct {
		Object string `json:"step_object"`
	}
	if json.Unmarshal(payload, &v) != nil {
		return ""
	}
	return v.Object
}

// withObject returns payload (a JSON object) with its Step.Object.
func withObject(payload json.RawMessage, object string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(payload)) > 0 {
		if err := json.Unmarshal(payload, &m); err != nil {
			return nil, fmt.Errorf("a step of an object needs a JSON object as payload: %w", err)
		}
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	o, err := json.Marshal(object)
	if err != nil {
		return nil, err
	}
	m[objectMember] = o
	return json.Marshal(m)
}
