-- (c) The copied snippet's SQL (bench/snippet) for a new invoice.created
-- event: the claim, then the invoice, two statements each in autocommit
-- (two round trips, two commits), no stored body, on the snippet's own
-- tables (bench/snippetdb), as users run it.
--
-- Variable: r (random per transaction).
\set r random(1, 9000000000000000000)
INSERT INTO processed_events (event_key, source, status)
VALUES ('evt_pgs' || :r, 'stripe', 'done')
ON CONFLICT (event_key) DO NOTHING
RETURNING event_key;
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email)
VALUES ('in_pgs' || :r, 'pending', 2000, 0, 'usd', NULLIF('ada.lovelace@example.com', ''))
ON CONFLICT (stripe_invoice_id) DO NOTHING;
