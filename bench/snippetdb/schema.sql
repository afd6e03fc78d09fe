-- The copied snippet's own tables, as the seed article has them: the claims,
-- keyed by the event (event_key PRIMARY KEY), and the invoices, unique by
-- Stripe's id. Nothing more: no stored body, no index a console reads.
-- CREATE … IF NOT EXISTS, as a snippet's start-up runs it: in a database
-- migrated like the receiver's, the receiver's tables stay.
CREATE TABLE IF NOT EXISTS processed_events (
    event_key    TEXT PRIMARY KEY,
    source       TEXT        NOT NULL,
    status       TEXT        NOT NULL,   -- 'in_progress' or 'done'
    claimed_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    completed_at TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS invoices (
    id                BIGSERIAL PRIMARY KEY,
    stripe_invoice_id TEXT        NOT NULL UNIQUE,
    status            TEXT        NOT NULL,
    amount_due        BIGINT      NOT NULL DEFAULT 0,
    amount_paid       BIGINT      NOT NULL DEFAULT 0,
    currency          TEXT        NOT NULL DEFAULT '',
    customer_email    TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
