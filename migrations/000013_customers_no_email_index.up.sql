-- customers_email_idx (migration 8) indexed lower(email), and no query of
-- the receiver reads it: an address is looked up by (source, customer_id),
-- the primary key, and the console's search finds a customer by its id,
-- and an address through the orders and invoices that carry it (their own
-- lower(customer_email) indexes). Every invoice and Checkout Session that
-- names a customer upserts its row, and each upsert paid for one more
-- index tuple, on a random page (a full-page image in the WAL after every
-- checkpoint).
DROP INDEX IF EXISTS customers_email_idx;
