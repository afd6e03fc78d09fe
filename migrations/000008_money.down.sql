DROP TABLE IF EXISTS customers;
DROP TABLE IF EXISTS disputes;
DROP TABLE IF EXISTS subscription_notices;
DROP TABLE IF EXISTS subscriptions;
ALTER TABLE invoices DROP COLUMN IF EXISTS account_id;
-- A partly refunded order was refunded before this migration.
UPDATE orders SET status = 'refunded' WHERE status = 'partially_refunded';
ALTER TABLE orders
    DROP COLUMN IF EXISTS amount_refunded_cents,
    DROP COLUMN IF EXISTS account_id;
CREATE INDEX IF NOT EXISTS refunds_payment_intent_idx ON refunds (payment_intent_id);
DROP INDEX IF EXISTS refunds_refund_idx;
