-- Migration 14 undone. Before it, refunds held figures only, of which the
-- largest per charge (or adjustment) counted: what a refund object's row
-- said (Stripe's refund events, a Paddle adjustment not approved) goes;
-- an approved Paddle adjustment stays, as the figure it was.
DELETE FROM refunds WHERE refund_id IS NOT NULL AND NOT (refund_id = charge_id AND effect = 'counts');
DROP FUNCTION IF EXISTS refunded_cents(TEXT);
ALTER TABLE refunds
    DROP CONSTRAINT IF EXISTS refunds_object_check,
    DROP CONSTRAINT IF EXISTS refunds_effect_check,
    DROP COLUMN IF EXISTS refund_id,
    DROP COLUMN IF EXISTS status,
    DROP COLUMN IF EXISTS effect,
    DROP COLUMN IF EXISTS failure_reason,
    DROP COLUMN IF EXISTS refund_created_at,
    DROP COLUMN IF EXISTS event_at;
ALTER TABLE orders
    DROP COLUMN IF EXISTS livemode,
    DROP COLUMN IF EXISTS dispute_lost,
    DROP COLUMN IF EXISTS sold_at;
