-- customers_remember is the one statement an event that names a customer
-- and an address adds to its transaction (internal/customers.Remember): the
-- two writes that keep a customer's row off a burst's path, run by the
-- server instead of sent as two statements. PostgreSQL keeps the plans of a
-- function's statements for the connection, so through a transaction-mode
-- pooler that prepares nothing (PgBouncer 1.18) only this call is parsed
-- and planned per event, not the INSERT and the UPDATE; and the UPDATE is
-- skipped when the INSERT made the row (it holds this event's address and
-- time already).
--
-- The rule is the two statements' (internal/webhooks/doc.go, "What a
-- delivery's transaction may lock"): the INSERT writes only where the
-- customer has no row, and meets one without locking it (where another
-- event's insert is uncommitted, it waits for that commit, once); the
-- UPDATE writes only a real change: an event not older than the last
-- applied, with another address or the first account, or the first event
-- of a later second. VOLATILE, so each statement takes its own snapshot
-- (READ COMMITTED): the UPDATE sees a row another event committed while the
-- INSERT waited. A copy of an event (its claim made before) does nothing.
CREATE FUNCTION customers_remember(p_source TEXT, p_customer TEXT, p_email TEXT, p_account TEXT,
                                   p_at TIMESTAMPTZ, p_event TEXT) RETURNS VOID
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT receiver_claimed() THEN
        RETURN;
    END IF;
    INSERT INTO customers (source, customer_id, email, account_id, event_at, provider_event_id)
    VALUES (p_source, p_customer, p_email, NULLIF(p_account, ''), p_at, p_event)
    ON CONFLICT (source, customer_id) DO NOTHING;
    IF FOUND THEN
        RETURN;
    END IF;
    UPDATE customers AS c
    SET email = p_email, account_id = coalesce(c.account_id, NULLIF(p_account, '')), event_at = p_at,
        provider_event_id = p_event, updated_at = now()
    WHERE c.source = p_source AND c.customer_id = p_customer
      AND (c.event_at < p_at
           OR (c.event_at = p_at AND (c.email IS DISTINCT FROM p_email OR (c.account_id IS NULL AND p_account <> ''))));
END
$$;
