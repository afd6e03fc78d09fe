-- Money states beyond paid: refunds by amount, subscriptions, disputes, the
-- customers whose addresses later emails need, and the Stripe connected
-- account a row belongs to.

-- Refunds by amount. amount_refunded_cents is what has been refunded of
-- the order in all: the sum, over the charges (Stripe) or adjustments
-- (Paddle) of its payment, of the largest amount recorded for each in
-- refunds (see internal/orders). The order is partially_refunded while it
-- is below amount_cents, refunded once it reaches it.
ALTER TABLE orders
    ADD COLUMN amount_refunded_cents BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN account_id            TEXT;  -- the Stripe connected account (acct_…); NULL: the platform's own

-- refunds keeps one row per event that recorded a refund. A refund is the
-- payment (payment_intent_id), the charge or adjustment (charge_id) and
-- the amount: Stripe's cumulative amount_refunded of the charge, or
-- Paddle's adjustment total. The look-up by that triple (is this refund
-- new?) and by payment intent use this index.
CREATE INDEX refunds_refund_idx ON refunds (payment_intent_id, charge_id, amount_refunded);
DROP INDEX refunds_payment_intent_idx;

-- Orders refunded before this migration were marked refunded by any
-- refund, partial or not: they take the amount their refunds add up to.
UPDATE orders o
SET amount_refunded_cents = r.total,
    status = CASE WHEN r.total >= o.amount_cents THEN 'refunded' ELSE 'partially_refunded' END
FROM (SELECT payment_intent_id, sum(m)::bigint AS total
      FROM (SELECT payment_intent_id, max(amount_refunded) AS m FROM refunds GROUP BY payment_intent_id, charge_id) AS per_charge
      GROUP BY payment_intent_id) AS r
WHERE o.payment_intent_id = r.payment_intent_id AND o.status = 'refunded' AND r.total > 0;

ALTER TABLE invoices ADD COLUMN account_id TEXT;

-- Subscriptions of every source, in the provider's own words. A row takes
-- the state of the newest event applied to it (event_at: Stripe's signed
-- created, Paddle's occurred_at, Polar's modified_at); an event of the
-- same time as the last one applied is applied too (the later arrival
-- wins), an older one changes nothing, and a final status (Stripe's
-- canceled and incomplete_expired, Paddle's canceled) never changes again.
-- See internal/subscriptions.
CREATE TABLE subscriptions (
    id                   BIGSERIAL PRIMARY KEY,
    source               TEXT        NOT NULL,
    external_id          TEXT        NOT NULL,  -- sub_…, the provider's subscription id
    status               TEXT        NOT NULL,
    customer_id          TEXT,                  -- cus_…, ctm_…
    current_period_end   TIMESTAMPTZ,
    cancel_at_period_end BOOLEAN     NOT NULL DEFAULT false,
    account_id           TEXT,                  -- the Stripe connected account
    event_at             TIMESTAMPTZ NOT NULL,  -- when the last event applied happened
    provider_event_id    TEXT        NOT NULL,  -- the last event applied
    created_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT uq_subscriptions_external UNIQUE (source, external_id)
);
CREATE INDEX subscriptions_customer_idx ON subscriptions (customer_id) WHERE customer_id IS NOT NULL;

-- The customer emails a subscription's events send, once each: the
-- subscription-ended email once per subscription ("ended"), the
-- trial-ending email once per trial ("trial_will_end:<trial end>"), so
-- that a replay past emptied claims sends nothing.
CREATE TABLE subscription_notices (
    source            TEXT        NOT NULL,
    subscription_id   TEXT        NOT NULL,
    notice            TEXT        NOT NULL,
    provider_event_id TEXT        NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (source, subscription_id, notice)
);

-- Disputes (chargebacks): the newest event's state wins, a closed status
-- (won, lost, warning_closed) is final. notified_event_id is the event
-- whose notice to NOTIFY_EMAIL was planned: one per dispute.
CREATE TABLE disputes (
    id                BIGSERIAL PRIMARY KEY,
    source            TEXT        NOT NULL,
    external_id       TEXT        NOT NULL,     -- dp_…
    charge_id         TEXT,
    payment_intent_id TEXT,
    amount_cents      BIGINT      NOT NULL,
    currency          TEXT        NOT NULL,
    reason            TEXT,
    status            TEXT        NOT NULL,
    evidence_due_by   TIMESTAMPTZ,
    account_id        TEXT,
    event_at          TIMESTAMPTZ NOT NULL,
    provider_event_id TEXT        NOT NULL,     -- the last event applied
    notified_event_id TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT uq_disputes_external UNIQUE (source, external_id)
);
CREATE INDEX disputes_payment_intent_idx ON disputes (payment_intent_id) WHERE payment_intent_id IS NOT NULL;

-- A customer's address, as the newest event that named the customer and
-- an address gave it: what the subscription emails are sent to.
CREATE TABLE customers (
    source            TEXT        NOT NULL,
    customer_id       TEXT        NOT NULL,     -- cus_…
    email             TEXT        NOT NULL,
    account_id        TEXT,
    event_at          TIMESTAMPTZ NOT NULL,
    provider_event_id TEXT        NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (source, customer_id)
);
CREATE INDEX customers_email_idx ON customers (lower(email));
