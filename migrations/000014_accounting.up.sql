-- Accounting (issue 34): a refund follows its own state, a lost dispute
-- marks its order, and an order knows the mode of the event that made it.
-- See internal/orders for how the rows below add up.

-- refunds keeps one row per event that recorded a refund. Until now every
-- row was a figure: Stripe's cumulative amount_refunded of a charge,
-- Polar's of an order, or a Paddle adjustment's total. A row may now also
-- be what an event said of one refund object (Stripe's re_…, Paddle's
-- adj_…, refund_id): its amount, its status in the provider's words, and
-- that status's effect on the payment:
--   counts  the refund stands (Stripe pending, requires_action, succeeded;
--           Paddle approved): it is part of what was refunded;
--   awaits  not yet (Paddle pending_approval): it may still count;
--   void    it never will (Stripe failed, canceled; Paddle rejected,
--           reversed): final, whatever arrives later.
-- event_at is when the event happened (Stripe's signed created, Paddle's
-- occurred_at); NULL for a figure that is not ordered by time (Polar's:
-- the larger counts). refund_created_at is when the refund object was
-- made (Stripe's created): a charge's figure of a later time includes it.
ALTER TABLE refunds
    ADD COLUMN refund_id         TEXT,
    ADD COLUMN status            TEXT,
    ADD COLUMN effect            TEXT,
    ADD COLUMN failure_reason    TEXT,
    ADD COLUMN refund_created_at TIMESTAMPTZ,
    ADD COLUMN event_at          TIMESTAMPTZ,
    ADD CONSTRAINT refunds_effect_check CHECK (effect IN ('counts', 'awaits', 'void')),
    ADD CONSTRAINT refunds_object_check CHECK ((refund_id IS NULL) = (effect IS NULL));

-- What the payment whose id is payment (a Stripe payment intent, Paddle's
-- transaction, Polar's order) has had refunded, from its rows: per charge,
-- its newest figure (of one second, the larger; a figure without a time,
-- Polar's, the largest), less the refunds that figure counted (made no
-- later than it) and that are void since, never below nothing, plus the
-- refunds that count now. A refund object's state is its newest event's,
-- a void one final. internal/orders calls it for every order it inserts
-- and every refund it records, and explains it; one definition, in the
-- database, so that operators can ask it too: SELECT refunded_cents('pi_…').
CREATE FUNCTION refunded_cents(payment TEXT) RETURNS BIGINT
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        WITH r AS (SELECT * FROM refunds WHERE payment_intent_id = payment),
        figure AS (SELECT DISTINCT ON (charge_id) charge_id, amount_refunded AS amount, event_at AS at
                   FROM r WHERE refund_id IS NULL
                   ORDER BY charge_id, event_at DESC NULLS LAST, amount_refunded DESC),
        object AS (SELECT refund_id, max(charge_id) AS charge_id, max(amount_refunded) AS amount,
                          (array_agg(effect ORDER BY effect = 'void' DESC, event_at DESC, effect = 'counts' DESC))[1] AS effect,
                          min(coalesce(refund_created_at, event_at)) AS made,
                          min(event_at) FILTER (WHERE effect = 'void') AS voided
                   FROM r WHERE refund_id IS NOT NULL GROUP BY refund_id)
        SELECT coalesce(sum(
                 greatest(coalesce(f.amount, 0) - coalesce((SELECT sum(o.amount) FROM object o
                     WHERE o.charge_id = c.charge_id AND o.made <= f.at AND (o.voided IS NULL OR o.voided > f.at)), 0), 0)
               + coalesce((SELECT sum(o.amount) FROM object o WHERE o.charge_id = c.charge_id AND o.effect = 'counts'), 0)), 0)::bigint
        FROM (SELECT charge_id FROM figure UNION SELECT charge_id FROM object) AS c
        LEFT JOIN figure f ON f.charge_id = c.charge_id);
END $$;

-- The rows written before: when each event happened, read from its stored
-- body (Stripe's created, Paddle's occurred_at), else when it was received.
-- A body that cannot be read as JSON gives NULL, never an error.
CREATE OR REPLACE FUNCTION pg_temp.event_time(body BYTEA, source TEXT) RETURNS TIMESTAMPTZ
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    doc JSONB;
BEGIN
    doc := convert_from(body, 'UTF8')::jsonb;
    IF source = 'stripe' THEN
        RETURN to_timestamp((doc ->> 'created')::bigint);
    END IF;
    RETURN (doc ->> 'occurred_at')::timestamptz;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

-- Which provider wrote a row: its event's claim says, else its charge id
-- (Stripe's ch_… and py_…, Paddle's adj_…); Polar's rows (a UUID) keep no
-- time: their larger figure counts, as before.
CREATE OR REPLACE VIEW pg_temp.refund_sources AS
SELECT r.provider_event_id,
       coalesce(p.source, CASE WHEN r.charge_id LIKE 'adj\_%' THEN 'paddle'
                               WHEN r.charge_id LIKE 'ch\_%' OR r.charge_id LIKE 'py\_%' THEN 'stripe' END) AS source,
       p.body
FROM refunds r
LEFT JOIN processed_events p ON p.event_key = r.provider_event_id AND p.kind = 'event';

-- Paddle recorded only approved refund adjustments, one row per event:
-- each is its adjustment, counted.
UPDATE refunds r
SET refund_id = r.charge_id, status = 'approved', effect = 'counts',
    event_at = coalesce(pg_temp.event_time(s.body, 'paddle'), r.created_at)
FROM pg_temp.refund_sources s
WHERE s.provider_event_id = r.provider_event_id AND s.source = 'paddle';

UPDATE refunds r
SET event_at = coalesce(pg_temp.event_time(s.body, 'stripe'), r.created_at)
FROM pg_temp.refund_sources s
WHERE s.provider_event_id = r.provider_event_id AND s.source = 'stripe';

DROP VIEW pg_temp.refund_sources;
DROP FUNCTION pg_temp.event_time(BYTEA, TEXT);

-- The orders: the mode of the event that made the order (Stripe's
-- livemode; NULL where the provider does not say); whether a dispute of
-- its payment was lost (the money went back to the cardholder; a dispute
-- won clears it); and when it first stood as a sale (paid or
-- partially_refunded), when its paid steps (confirmation, fulfillment)
-- were planned: an order that started refunded, its refund having come
-- first, has none until that refund fails.
ALTER TABLE orders
    ADD COLUMN livemode     BOOLEAN,
    ADD COLUMN dispute_lost BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN sold_at      TIMESTAMPTZ;

-- An order of before: every one that stands, or stood, as a sale is taken
-- as sold when it was made (a refunded one may have started refunded, and
-- was then never fulfilled; taking it as sold never fulfils one twice).
UPDATE orders SET sold_at = created_at WHERE status IN ('paid', 'partially_refunded', 'refunded', 'cancelled');

UPDATE orders o SET dispute_lost = true
WHERE o.payment_intent_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM disputes d
              WHERE d.source = o.source AND d.payment_intent_id = o.payment_intent_id AND d.status = 'lost');
