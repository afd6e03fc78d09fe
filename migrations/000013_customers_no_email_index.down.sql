-- Migration 8's index again.
CREATE INDEX IF NOT EXISTS customers_email_idx ON customers (lower(email));
