-- Claims: the columns that make a step's lease compare-and-set, and the
-- bookkeeping the redriver and operators need. An event's own row has
-- kind 'event'; each step that leaves the database has a row of kind 'step'
-- whose key is "<event key>/<step name>" and whose parent is the event key.
ALTER TABLE processed_events
    ADD COLUMN kind            TEXT        NOT NULL DEFAULT 'event',
    ADD COLUMN parent_key      TEXT,
    ADD COLUMN step            TEXT,
    ADD COLUMN claim_token     BIGINT      NOT NULL DEFAULT 0,
    ADD COLUMN attempts        INT         NOT NULL DEFAULT 0,
    ADD COLUMN last_error      TEXT,
    ADD COLUMN next_attempt_at TIMESTAMPTZ,
    ADD COLUMN payload         JSONB,
    ADD CONSTRAINT processed_events_status_check
        CHECK (status IN ('in_progress', 'done', 'parked')),
    ADD CONSTRAINT processed_events_kind_check
        CHECK (kind IN ('event', 'step'));

CREATE INDEX processed_events_parent_idx ON processed_events (parent_key)
    WHERE parent_key IS NOT NULL;
-- The redriver's scan: steps not done, oldest lease first.
CREATE INDEX processed_events_open_steps_idx ON processed_events (claimed_at)
    WHERE kind = 'step' AND status = 'in_progress';

-- Every verified delivery's raw body, once per event, so that nothing depends
-- on the sender to finish the work later.
CREATE TABLE webhook_events (
    event_key   TEXT PRIMARY KEY,
    source      TEXT        NOT NULL,
    event_id    TEXT        NOT NULL,
    event_type  TEXT        NOT NULL,
    api_version TEXT,
    body        BYTEA       NOT NULL,
    outcome     TEXT        NOT NULL,   -- processed, ignored, parked
    error       TEXT,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_received_idx ON webhook_events (received_at);

CREATE TABLE orders (
    id                BIGSERIAL PRIMARY KEY,
    source            TEXT        NOT NULL,
    provider_event_id TEXT        NOT NULL,
    external_id       TEXT        NOT NULL,
    payment_intent_id TEXT,
    status            TEXT        NOT NULL,
    amount_cents      BIGINT      NOT NULL DEFAULT 0,
    currency          TEXT        NOT NULL DEFAULT '',
    customer_email    TEXT,
    plan              TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT uq_orders_event UNIQUE (provider_event_id),
    CONSTRAINT uq_orders_external UNIQUE (source, external_id)
);
CREATE INDEX orders_payment_intent_idx ON orders (payment_intent_id)
    WHERE payment_intent_id IS NOT NULL;

-- Refunds seen for a payment intent, so that an order created after its
-- refund event starts refunded.
CREATE TABLE refunds (
    provider_event_id TEXT PRIMARY KEY,
    payment_intent_id TEXT        NOT NULL,
    charge_id         TEXT        NOT NULL,
    amount_refunded   BIGINT      NOT NULL,
    currency          TEXT        NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX refunds_payment_intent_idx ON refunds (payment_intent_id);

CREATE TABLE invoices (
    id                BIGSERIAL PRIMARY KEY,
    stripe_invoice_id TEXT        NOT NULL UNIQUE,
    status            TEXT        NOT NULL,
    amount_due        BIGINT      NOT NULL DEFAULT 0,
    amount_paid       BIGINT      NOT NULL DEFAULT 0,
    currency          TEXT        NOT NULL DEFAULT '',
    customer_email    TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Each failed payment attempt of an invoice, once per event.
CREATE TABLE invoice_payment_failures (
    provider_event_id TEXT PRIMARY KEY,
    stripe_invoice_id TEXT        NOT NULL,
    attempt_count     INT         NOT NULL,
    amount_due        BIGINT      NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
