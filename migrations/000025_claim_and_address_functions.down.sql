-- The receivers of before migration 25 send the functions' statements
-- themselves.
DROP FUNCTION IF EXISTS customers_remember(TEXT, TEXT, TEXT, TEXT, TIMESTAMPTZ, TEXT);
DROP FUNCTION IF EXISTS receiver_claim(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BYTEA, BYTEA, TEXT, TEXT, TEXT);
