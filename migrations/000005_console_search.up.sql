-- The operator console's look-ups (internal/ops, internal/console). Every
-- index here is maintained on every insert into its table, so each is
-- measured against what it costs (PostgreSQL backend CPU per inserted
-- row, bulk inserts of 3.8 KB Checkout event rows, median of 5 interleaved
-- runs on the 2-core development machine) and kept only where a page
-- needs it.
--
-- Not indexed, on purpose: event bodies. An expression index on the id
-- of a body's object (data.object.id) cost +15 to +25 µs of PostgreSQL CPU
-- per new event (the body is parsed as JSON inside the insert; an
-- exception-safe function is needed, since a body a sender signed must
-- never fail its claim), about a third of the claim's own insert. Search
-- reaches events through the ids the business tables already index
-- (orders, refunds, invoices) and through the claims, and reads bodies
-- only of the few events that wait for an operator and of the newest ones.

-- Events of one source, newest first: the events page's source filter
-- (keyset pagination on (claimed_at, event_key) within a source, however
-- rare the source) and the overview's "last event per provider" (one
-- index probe each instead of a backward scan of every event until one of
-- that source turns up: 1 s at 1 M events for a source with none).
-- Measured: +4 µs of CPU per new event (46 → 50 µs per bare insert).
CREATE INDEX processed_events_source_idx ON processed_events (source, claimed_at, event_key)
    WHERE kind = 'event';

-- Search by a customer's email. Orders and invoices are written once per
-- purchase or invoice, not per event: +3 µs per order insert.
CREATE INDEX orders_customer_email_idx ON orders (lower(customer_email))
    WHERE customer_email IS NOT NULL;
CREATE INDEX invoices_customer_email_idx ON invoices (lower(customer_email))
    WHERE customer_email IS NOT NULL;

-- Search by invoice id for the events that recorded a failed payment
-- (written only when a payment fails).
CREATE INDEX invoice_payment_failures_invoice_idx ON invoice_payment_failures (stripe_invoice_id);
