-- Each failed payment attempt of a Paddle transaction, once per event
-- (transaction.payment_failed): Paddle has no invoice to hang it on, and a
-- transaction may fail several times before it completes, or never.
CREATE TABLE paddle_payment_failures (
    provider_event_id TEXT PRIMARY KEY,            -- the notification's event_id (evt_…)
    transaction_id    TEXT        NOT NULL,        -- txn_…, the external_id of its order if it completes
    error_code        TEXT,                        -- the latest attempt's error_code: declined, …
    amount_cents      BIGINT      NOT NULL,        -- details.totals.grand_total
    currency          TEXT        NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX paddle_payment_failures_transaction_idx ON paddle_payment_failures (transaction_id);
