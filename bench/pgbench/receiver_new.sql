-- (a) The receiver's transaction for a new invoice.created event, statement
-- for statement as the core sends it (internal/webhooks: Processor.commit
-- with claimSQL; internal/providers/stripe/invoices EnsurePending and
-- internal/customers Remember, whose writes are conditional on receiver_claimed()): the claim
-- with the stored body, the invoice, the customer's address (an invoice names both), in one
-- pipeline ending in one Sync: one round trip and one implicit
-- transaction, as pgx sends a batch.
-- (No BEGIN or COMMIT: the pipeline's one Sync makes it one transaction.)
-- An invoice.created plans no steps, so no step INSERT is sent. Keep this
-- file in step with that code when its SQL moves.
--
-- Variables: r is a random number per transaction (the event's key and
-- invoice id); body is a real-sized invoice.created body that benchrun
-- passes with -D (loadgen -print-body). pgbench sends both as parameters.
\set r random(1, 9000000000000000000)
\startpipeline
INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type,
                              api_version, body, body_hash, outcome, via, last_error)
VALUES ('evt_pga' || :r, 'stripe', 'done', 'event', CASE WHEN 'done' = 'done' THEN now() END,
        'evt_pga' || :r, 'invoice.created', NULLIF('2023-10-16', ''), convert_to(:body, 'UTF8'), NULL,
        'processed', 'delivery', NULLIF('', ''))
ON CONFLICT DO NOTHING
RETURNING set_config('receiver.claim', 'yes', true);
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
SELECT 'in_pga' || :r, 'pending', 2000, 0, 'usd', NULLIF('ada.lovelace@example.com', '') WHERE receiver_claimed()
ON CONFLICT (stripe_invoice_id) DO NOTHING;
INSERT INTO customers AS c (source, customer_id, email, account_id, event_at, provider_event_id)
SELECT 'stripe', 'cus_pga' || :r, 'ada.lovelace@example.com', NULLIF('', ''), now(), 'evt_pga' || :r WHERE receiver_claimed()
ON CONFLICT (source, customer_id) DO UPDATE
    SET email = EXCLUDED.email, account_id = coalesce(c.account_id, EXCLUDED.account_id),
        event_at = EXCLUDED.event_at, provider_event_id = EXCLUDED.provider_event_id, updated_at = now()
    WHERE EXCLUDED.event_at >= c.event_at;
\endpipeline
