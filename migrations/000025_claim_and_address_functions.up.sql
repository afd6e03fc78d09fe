-- Two statements every new event runs, as functions: the claim
-- (receiver_claim, internal/webhooks) and a customer's address
-- (customers_remember, internal/customers). PostgreSQL keeps the plans of a
-- function's statements for the connection, so through a transaction-mode
-- pooler that prepares nothing (PgBouncer 1.18) it parses and plans one
-- small call per event instead of the statement itself: the claim's INSERT
-- into a table of seven indexes costs about 290 µs of PostgreSQL's CPU per
-- event to parse and plan, the call next to nothing. Directly, where pgx
-- prepares every statement once per connection, a call costs what the
-- statement did (BENCHMARKS.md, "Statements as functions").
--
-- receiver_claim is the dedupe claim of the single-transaction pattern,
-- with the event riding on it: INSERT … ON CONFLICT DO NOTHING on the key
-- (and, for providers that set one, the body hash). When it inserts, it
-- marks the transaction as the claim's holder (the transaction-local
-- setting receiver.claim, which receiver_claimed() reads and every write
-- and step of the event is conditional on) and returns the mark; a copy's
-- claim inserts nothing, marks nothing and returns NULL, so the rest of its
-- transaction does nothing. An event claimed as done (nothing left to do)
-- is completed at once.
CREATE FUNCTION receiver_claim(p_key TEXT, p_source TEXT, p_status TEXT, p_event_id TEXT, p_event_type TEXT,
                               p_api_version TEXT, p_body BYTEA, p_body_hash BYTEA, p_outcome TEXT, p_via TEXT,
                               p_last_error TEXT) RETURNS TEXT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    mark TEXT;
BEGIN
    INSERT INTO processed_events (event_key, source, status, kind, completed_at, event_id, event_type,
                                  api_version, body, body_hash, outcome, via, last_error)
    VALUES (p_key, p_source, p_status, 'event', CASE WHEN p_status = 'done' THEN now() END, p_event_id,
            p_event_type, NULLIF(p_api_version, ''), p_body, p_body_hash, p_outcome, p_via, NULLIF(p_last_error, ''))
    ON CONFLICT DO NOTHING
    RETURNING set_config('receiver.claim', 'yes', true) INTO mark;
    RETURN mark;
END
$$;

-- customers_remember is the one statement an event that names a customer
-- and an address adds to its transaction (internal/customers.Remember): the
-- two writes that keep a customer's row off a burst's path, run by the
-- server instead of sent as two statements; the UPDATE is skipped when the
-- INSERT made the row (it holds this event's address and time already).
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
