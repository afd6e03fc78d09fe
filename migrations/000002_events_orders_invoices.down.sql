DROP TABLE IF EXISTS invoice_payment_failures;
DROP TABLE IF EXISTS invoices;
DROP TABLE IF EXISTS refunds;
DROP TABLE IF EXISTS orders;
DROP TABLE IF EXISTS webhook_events;
DROP INDEX IF EXISTS processed_events_open_steps_idx;
DROP INDEX IF EXISTS processed_events_parent_idx;
ALTER TABLE processed_events
    DROP CONSTRAINT IF EXISTS processed_events_kind_check,
    DROP CONSTRAINT IF EXISTS processed_events_status_check,
    DROP COLUMN IF EXISTS payload,
    DROP COLUMN IF EXISTS next_attempt_at,
    DROP COLUMN IF EXISTS last_error,
    DROP COLUMN IF EXISTS attempts,
    DROP COLUMN IF EXISTS claim_token,
    DROP COLUMN IF EXISTS step,
    DROP COLUMN IF EXISTS parent_key,
    DROP COLUMN IF EXISTS kind;
