-- (b) The least a new invoice.created event needs while keeping every
-- guarantee of (a): the claim, the stored body and the invoice commit
-- together or not at all, and a copy changes nothing. One statement in
-- autocommit: one round trip, one commit.
--
-- Variables: r (random per transaction), body (-D, as for (a)).
\set r random(1, 9000000000000000000)
WITH claim AS (
    INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type,
                                  api_version, body, outcome, via)
    VALUES ('evt_pgm' || :r, 'stripe', 'done', 'event', now(), 'evt_pgm' || :r, 'invoice.created',
            '2023-10-16', convert_to(:body, 'UTF8'), 'processed', 'delivery')
    ON CONFLICT DO NOTHING
    RETURNING event_key
)
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
SELECT 'in_pgm' || :r, 'pending', 2000, 0, 'usd', 'ada.lovelace@example.com' FROM claim
ON CONFLICT DO NOTHING;
