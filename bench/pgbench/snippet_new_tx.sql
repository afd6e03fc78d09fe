-- (c1) The copied snippet's SQL of (c) in one transaction: BEGIN, the claim,
-- the invoice, COMMIT, each its own round trip; one commit, on the snippet's
-- own tables (bench/snippetdb). Target 1b's baseline, at the HTTP phases'
-- concurrency (and at one client beside it).
--
-- Variable: r (random per transaction).
\set r random(1, 9000000000000000000)
BEGIN;
INSERT INTO processed_events (event_key, source, status)
VALUES ('evt_pgt' || :r, 'stripe', 'done')
ON CONFLICT (event_key) DO NOTHING
RETURNING event_key;
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
VALUES ('in_pgt' || :r, 'pending', 2000, 0, 'usd', NULLIF('ada.lovelace@example.com', ''))
ON CONFLICT (stripe_invoice_id) DO NOTHING;
COMMIT;
