-- (a) The receiver's transaction for a new invoice.created event, statement
-- for statement as the core sends it (internal/webhooks: Processor.commit
-- with claimSQL, the function receiver_claim; internal/providers/stripe/
-- invoices EnsurePending and internal/customers Remember, whose writes are
-- conditional on receiver_claimed()): the claim with the stored body, the
-- invoice, the customer's address (an invoice names both:
-- customers_remember, its insert where absent, else its update where
-- changed), in one pipeline ending in one Sync: one round trip and one
-- implicit transaction, as pgx sends a batch.
-- (No BEGIN or COMMIT: the pipeline's one Sync makes it one transaction.)
-- An invoice.created plans no steps, so no step INSERT is sent. Keep this
-- file in step with that code when its SQL moves.
--
-- Run at the HTTP phases' concurrency, it is the ceiling P of the receiver's
-- own work: what PostgreSQL alone does with the receiver's statements.
--
-- Variables: r is a random number per transaction (the event's key,
-- invoice id and customer: a customer of its own per event, as loadgen's);
-- body is a real-sized invoice.created body that benchrun passes with -D
-- (loadgen -print-body). pgbench sends both as parameters.
\set r random(1, 9000000000000000000)
\startpipeline
SELECT receiver_claim('evt_pga' || :r, 'stripe', 'done', 'evt_pga' || :r, 'invoice.created', '2023-10-16',
                      convert_to(:body, 'UTF8'), NULL, 'processed', 'delivery', '');
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
SELECT 'in_pga' || :r, 'pending', 2000, 0, 'usd', NULLIF('ada.lovelace@example.com', '') WHERE receiver_claimed()
ON CONFLICT (stripe_invoice_id) DO NOTHING;
SELECT customers_remember('stripe', 'cus_pga' || :r, 'ada.lovelace@example.com', '', now(), 'evt_pga' || :r);
\endpipeline
