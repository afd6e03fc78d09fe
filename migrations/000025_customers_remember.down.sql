-- The receivers of before migration 25 send the function's two statements
-- themselves.
DROP FUNCTION IF EXISTS customers_remember(TEXT, TEXT, TEXT, TEXT, TIMESTAMPTZ, TEXT);
