-- Stripe's health alerts about events it failed to generate
-- (v2.core.health.event_generation_failure.resolved, received as a thin
-- event on /webhooks/stripe/thin): one row per alert Stripe names, written
-- by the health event's transaction with its claim, and never again for
-- the same alert. What the receiver recovered is applied by the same
-- transaction, through the Stripe provider's own plan; the operator alert
-- is planned only when this row is new, so that a duplicate of the health
-- event, another health event naming the same alert, a replay or one past
-- emptied claims tells the operators nothing twice.
CREATE TABLE stripe_health_alerts (
    alert_id          TEXT        PRIMARY KEY,  -- halert_…; the event's id when Stripe gave none
    provider_event_id TEXT        NOT NULL,     -- the health event (evt_…) that reported it first
    event_type        TEXT,                     -- the event Stripe failed to generate
    object_type       TEXT,                     -- its related object: checkout.session, subscription, …
    object_id         TEXT,
    account_id        TEXT,                     -- the connected account it was for; NULL: the platform's own
    severity          TEXT,                     -- critical, non_critical
    applied_as        TEXT,                     -- the event type the object's state was applied as; NULL: not applied
    resolved_at       TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
