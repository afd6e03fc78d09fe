-- Operators (internal/ops, internal/console, internal/alerts): every
-- attempt of every step, events closed by an operator, and alerts.

-- A parked event an operator closed with a reason (`server events resolve`,
-- POST /events/<key>/resolve): its own claim and its parked steps' claims
-- become 'resolved', which no take, count or alert matches, and prune treats
-- as final. The reason, who and when are kept on the event's own row (NULL
-- on every other row; a replay that reopens the event keeps them as history).
ALTER TABLE processed_events
    DROP CONSTRAINT processed_events_status_check,
    ADD CONSTRAINT processed_events_status_check
        CHECK (status IN ('in_progress', 'done', 'parked', 'skipped', 'resolved')),
    ADD COLUMN resolved_at     TIMESTAMPTZ,
    ADD COLUMN resolved_by     TEXT,
    ADD COLUMN resolved_reason TEXT;

-- Listing resolved events (`events list --status resolved`): few rows, the
-- index is written only when an operator resolves an event.
CREATE INDEX processed_events_resolved_idx ON processed_events (claimed_at)
    WHERE status = 'resolved' AND kind = 'event';

-- Every attempt of every step, written by the statement that completes or
-- gives back the step's lease (the same round trip), keyed by the step's
-- claim key and the attempt's number over the step's life: its lease token
-- (claim_token), which every take bumps and nothing resets, not the claim's
-- attempts, which a replay resets. A number with no row is an attempt whose
-- worker died (or lost the database) before it could record anything.
--
-- Rows are deleted with their event (`events prune`), and an alert's with
-- its alert; nothing references processed_events, so that recording an
-- attempt costs one index entry and no foreign-key check.
CREATE TABLE step_attempts (
    step_key    TEXT COLLATE "C" NOT NULL,
    attempt     BIGINT           NOT NULL, -- the lease token the attempt held
    claim_attempt INT            NOT NULL, -- processed_events.attempts then (a replay resets it)
    started_at  TIMESTAMPTZ      NOT NULL,
    duration_ms DOUBLE PRECISION NOT NULL,
    outcome     TEXT             NOT NULL, -- done, failed, parked, skipped, lease_lost
    error_class TEXT,                      -- timeout, *fulfillment.StatusError, …
    error       TEXT,                      -- the error's first 300 characters, email addresses redacted
    status_code INT,                       -- the answer's status: the API's HTTP status, the SMTP reply code
    runner      TEXT,                      -- redriver, operator, replay; NULL: the delivery that planned it
    PRIMARY KEY (step_key, attempt),
    CONSTRAINT step_attempts_outcome_check
        CHECK (outcome IN ('done', 'failed', 'parked', 'skipped', 'lease_lost'))
);
