-- An event's own claim row now carries the event: its stored raw body and
-- what the processor and operators need of it, so that a new event writes
-- one row (and one primary-key entry) instead of two, and a step row carries
-- its kind and a payload that kind alone reads.
--
-- Keys are compared byte by byte (COLLATE "C"), so that every row of an
-- event (its own, "<key>", and its steps', "<key>/<step>") is one range of
-- the primary key: a copy of an event reads all of them with one index scan,
-- and the parent-key index is no longer needed.
ALTER TABLE processed_events
    ALTER COLUMN event_key TYPE TEXT COLLATE "C",
    ALTER COLUMN parent_key TYPE TEXT COLLATE "C",
    ADD COLUMN event_id    TEXT COLLATE "C", -- the provider's id of the event as sent (GitHub: the delivery GUID)
    ADD COLUMN event_type  TEXT,
    ADD COLUMN api_version TEXT,
    ADD COLUMN body        BYTEA,            -- the verified event as sent (GitHub form bodies: the payload field)
    ADD COLUMN body_hash   BYTEA,            -- providers that sign no identity: a hash of the signed body, unique
    ADD COLUMN outcome     TEXT,             -- processed, ignored, parked
    ADD COLUMN via         TEXT,             -- delivery, reconcile
    ADD COLUMN step_kind   TEXT,             -- email, fulfillment, … (the runner that reads payload)
    ADD COLUMN traceparent TEXT,             -- W3C trace context of the delivery that planned a step
    DROP CONSTRAINT processed_events_status_check,
    ADD CONSTRAINT processed_events_status_check
        CHECK (status IN ('in_progress', 'done', 'parked', 'skipped'));

-- A body is compressed and kept in its row (STORAGE MAIN), not moved to the
-- TOAST table: a 5.7 KB invoice.created body compresses to about 2.4 KB, just
-- over the 2 KB at which PostgreSQL would otherwise move it out of line, at
-- the cost of a TOAST row, a TOAST index entry and some 300 more WAL bytes
-- per event. Lz4 is cheaper than pglz for the bodies (about 30 µs less
-- CPU per event); a server built without it keeps pglz.
ALTER TABLE processed_events ALTER COLUMN body SET STORAGE MAIN;
DO $$
BEGIN
    ALTER TABLE processed_events ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 compression unavailable; bodies keep the default compression';
END $$;

UPDATE processed_events p
SET event_id = w.event_id, event_type = w.event_type, api_version = w.api_version,
    body = w.body, outcome = w.outcome, via = 'delivery',
    last_error = coalesce(p.last_error, w.error),
    claimed_at = least(p.claimed_at, w.received_at)
FROM webhook_events w
WHERE w.event_key = p.event_key AND p.kind = 'event';

-- Steps: {"name", "email": {…}} or {"name", "fulfillment": {…}} become a
-- kind and that kind's own payload.
UPDATE processed_events
SET step_kind = 'email', payload = payload -> 'email'
WHERE kind = 'step' AND payload ? 'email';
UPDATE processed_events
SET step_kind = 'fulfillment',
    payload = jsonb_build_object('order', jsonb_build_object(
        'id', payload -> 'fulfillment' -> 'order_id',
        'source', payload -> 'fulfillment' -> 'source',
        'external_id', payload -> 'fulfillment' -> 'external_id',
        'amount_cents', payload -> 'fulfillment' -> 'amount_cents',
        'currency', payload -> 'fulfillment' -> 'currency',
        'customer_email', payload -> 'fulfillment' -> 'customer_email'))
WHERE kind = 'step' AND payload ? 'fulfillment';

DROP TABLE webhook_events;
DROP INDEX processed_events_parent_idx;

-- Listing and pruning events by age, newest first, with keyset pagination.
CREATE INDEX processed_events_received_idx ON processed_events (claimed_at, event_key)
    WHERE kind = 'event';
-- What waits for an operator (few rows: the index is written only when a
-- claim is parked).
CREATE INDEX processed_events_parked_idx ON processed_events (claimed_at)
    WHERE status = 'parked';
-- A signed body seen once per hook, whatever delivery id it carries.
CREATE UNIQUE INDEX processed_events_body_hash_idx ON processed_events (body_hash)
    WHERE body_hash IS NOT NULL;
-- Finding an event by the provider's id where it is not its key (GitHub's
-- delivery GUID): rows whose id is their key are not in the index at all.
CREATE INDEX processed_events_event_id_idx ON processed_events (event_id)
    WHERE kind = 'event' AND event_id <> event_key;

-- true in the transaction that made an event's claim (its claim sets the
-- transaction-local receiver.claim): every write of an event ends its WHERE
-- with it, so that a copy of the event, sent in the same single round trip
-- as a new one, skips its writes at no cost (a one-time filter) instead of
-- running them to no effect.
CREATE FUNCTION receiver_claimed() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT coalesce(current_setting('receiver.claim', true), '') = 'yes' $$;

-- Orders only move forward: the position of the last event applied to an
-- order (GitHub Marketplace: its effective_date, then the action's place in
-- purchased < changed < cancelled; sponsorships: created < cancelled), so
-- that an older event, replayed or late, changes nothing.
ALTER TABLE orders
    ADD COLUMN effective_at   TIMESTAMPTZ,
    ADD COLUMN effective_rank SMALLINT;
