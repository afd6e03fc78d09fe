ALTER TABLE orders
    DROP COLUMN IF EXISTS effective_rank,
    DROP COLUMN IF EXISTS effective_at;

DROP FUNCTION IF EXISTS receiver_claimed();
DROP INDEX IF EXISTS processed_events_event_id_idx;
DROP INDEX IF EXISTS processed_events_body_hash_idx;
DROP INDEX IF EXISTS processed_events_parked_idx;
DROP INDEX IF EXISTS processed_events_received_idx;

CREATE TABLE webhook_events (
    event_key   TEXT PRIMARY KEY,
    source      TEXT        NOT NULL,
    event_id    TEXT        NOT NULL,
    event_type  TEXT        NOT NULL,
    api_version TEXT,
    body        BYTEA       NOT NULL,
    outcome     TEXT        NOT NULL,
    error       TEXT,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_received_idx ON webhook_events (received_at);
INSERT INTO webhook_events (event_key, source, event_id, event_type, api_version, body, outcome, error, received_at)
SELECT event_key, source, event_id, event_type, api_version, body, coalesce(outcome, 'processed'),
       CASE WHEN status = 'parked' THEN last_error END, claimed_at
FROM processed_events
WHERE kind = 'event' AND body IS NOT NULL;

UPDATE processed_events
SET payload = jsonb_build_object('name', step, 'email', payload)
WHERE kind = 'step' AND step_kind = 'email';
UPDATE processed_events
SET payload = jsonb_build_object('name', step, 'fulfillment', jsonb_build_object(
        'order_id', payload -> 'order' -> 'id',
        'source', payload -> 'order' -> 'source',
        'external_id', payload -> 'order' -> 'external_id',
        'amount_cents', payload -> 'order' -> 'amount_cents',
        'currency', payload -> 'order' -> 'currency',
        'customer_email', payload -> 'order' -> 'customer_email'))
WHERE kind = 'step' AND step_kind = 'fulfillment';
-- The old schema has no skipped state: a skipped step is left done, with
-- its reason in last_error.
UPDATE processed_events SET status = 'done', completed_at = coalesce(completed_at, now())
WHERE status = 'skipped';

ALTER TABLE processed_events
    DROP CONSTRAINT processed_events_status_check,
    ADD CONSTRAINT processed_events_status_check
        CHECK (status IN ('in_progress', 'done', 'parked')),
    DROP COLUMN traceparent,
    DROP COLUMN step_kind,
    DROP COLUMN via,
    DROP COLUMN outcome,
    DROP COLUMN body_hash,
    DROP COLUMN body,
    DROP COLUMN api_version,
    DROP COLUMN event_type,
    DROP COLUMN event_id,
    ALTER COLUMN parent_key TYPE TEXT COLLATE "default",
    ALTER COLUMN event_key TYPE TEXT COLLATE "default";
CREATE INDEX processed_events_parent_idx ON processed_events (parent_key)
    WHERE parent_key IS NOT NULL;
