package entitlements

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Path is where the app is told: POST {FULFILLMENT_URL}/entitlements.
const Path = "/entitlements"

// Kind runs the steps that tell the app (KindNotify). It is bound to the
// processor that runs them (webhooks.Binder): a step reads the subject's
// newest version and takes its turn to send in the database.
type Kind struct {
	Client *fulfillment.Client // nil when FULFILLMENT_URL is unset
	// Lease bounds a turn to send (LEASE_DURATION): a worker that died
	// while sending leaves it to the next after that.
	Lease time.Duration

	pool *pgxpool.Pool
}

// Bind implements webhooks.Binder.
func (k Kind) Bind(p *webhooks.Processor) webhooks.StepKind {
	k.pool = p.Pool()
	if k.Lease <= 0 {
		k.Lease = p.Options().Lease
	}
	return k
}

// Prepare implements webhooks.StepKind.
func (Kind) Prepare(payload json.RawMessage) (json.RawMessage, error) { return payload, nil }

// Unconfigured implements webhooks.StepKind.
func (k Kind) Unconfigured() string {
	if k.Client == nil {
		return "FULFILLMENT_URL is unset"
	}
	return ""
}

// Unavailable implements webhooks.StepKind.
func (Kind) Unavailable(payload json.RawMessage) string {
	var p Payload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "entitlements step payload unreadable: " + err.Error()
	}
	if len(p.Subjects) == 0 {
		return "the step names no subject"
	}
	return ""
}

// IdempotencyKey is the Idempotency-Key (and webhook-id) of every attempt
// to tell subject's version, whichever step or path planned it.
func IdempotencyKey(subject string, version int64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "entitlements\x00%s\x00%d", subject, version))
	return "ent-" + hex.EncodeToString(sum[:])[:40]
}

// Refs implements webhooks.Referrer.
func (Kind) Refs(_ string, payload json.RawMessage) []webhooks.Ref {
	var p Payload
	if json.Unmarshal(payload, &p) != nil {
		return nil
	}
	var refs []webhooks.Ref
	for _, t := range p.Subjects {
		refs = append(refs, webhooks.Ref{Name: "Idempotency-Key", Value: IdempotencyKey(t.Subject, t.Version)})
	}
	return refs
}

// Run implements webhooks.StepKind: each subject's version is sent if it
// is still the subject's newest and no higher one was answered 2xx.
func (k Kind) Run(ctx context.Context, _ string, payload json.RawMessage) error {
	var p Payload
	if err := json.Unmarshal(payload, &p); err != nil {
		return permanentError{fmt.Errorf("entitlements step payload: %w", err)}
	}
	if k.pool == nil {
		return errors.New("entitlements: the step kind is not bound to a processor")
	}
	for _, t := range p.Subjects {
		if err := k.send(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

type permanentError struct{ error }

func (permanentError) Permanent() bool { return true }

// busyError is a subject another worker is telling now.
var errBusy = errors.New("entitlements: another version of the subject is being sent; retried")

// send tells the app t's version: it takes the subject's turn to send
// (only for its newest version, above the last one answered 2xx, and when
// nobody else holds the turn or the holder's lease ran out), posts the
// set, and records a 2xx as the subject's acknowledged version. A version
// no longer the newest, or already acknowledged, is done without a call.
// A turn held by another worker is waited for, within ctx.
func (k Kind) send(ctx context.Context, t Told) error {
	var set json.RawMessage
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := k.pool.QueryRow(ctx, `
UPDATE entitlement_subjects SET sending_version = $2, sending_until = now() + make_interval(secs => $3)
WHERE subject = $1 AND version = $2 AND acked_version < $2 AND (sending_until IS NULL OR sending_until < now())
RETURNING entitlements`, t.Subject, t.Version, k.Lease.Seconds()).Scan(&set)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("entitlements: take the turn of %s: %w", t.Subject, err)
		}
		var version, acked int64
		switch err := k.pool.QueryRow(ctx, `SELECT version, acked_version FROM entitlement_subjects WHERE subject = $1`,
			t.Subject).Scan(&version, &acked); {
		case errors.Is(err, pgx.ErrNoRows):
			return nil // nothing to tell
		case err != nil:
			return fmt.Errorf("entitlements: read %s: %w", t.Subject, err)
		case version != t.Version || acked >= t.Version:
			return nil // superseded by a newer version, which its own step sends; or told already
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return errBusy
		case <-timer.C:
		}
	}
	body, err := json.Marshal(struct {
		Subject      string          `json:"subject"`
		Version      int64           `json:"version"`
		Entitlements json.RawMessage `json:"entitlements"`
	}{t.Subject, t.Version, set})
	if err != nil {
		return permanentError{err}
	}
	sendErr := k.Client.Post(ctx, Path, IdempotencyKey(t.Subject, t.Version), body)
	// The turn is given back whatever the answer, and on a 2xx the version
	// is acknowledged, in one statement; recorded on a context of its own.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhooks.RecordTimeout(k.Lease))
	defer cancel()
	if _, err := k.pool.Exec(rctx, `
UPDATE entitlement_subjects
SET acked_version = CASE WHEN $3 THEN greatest(acked_version, $2) ELSE acked_version END,
    sending_version = NULL, sending_until = NULL
WHERE subject = $1 AND sending_version = $2`, t.Subject, t.Version, sendErr == nil); err != nil && sendErr == nil {
		return fmt.Errorf("entitlements: %s version %d answered, but not recorded: %w", t.Subject, t.Version, err)
	}
	return sendErr
}
