-- Entitlements: who has access to what, now (internal/entitlements).
--
-- What each subscription and order is for, kept with the row by the
-- statements that write it: items ([{"price", "product", "quantity"}], as
-- the newest event applied carries them; an order's once known: a Stripe
-- Checkout Session's are read from its API), the provider-keyed subject of
-- its customer (customer_key: stripe:cus_…, paddle:ctm_…, polar:<id>,
-- github:<account id>) and the app's user id its events carried
-- (app_user_id, a claim). A customer is its newest claimed app user's.
ALTER TABLE subscriptions
    ADD COLUMN items        JSONB,
    ADD COLUMN customer_key TEXT,
    ADD COLUMN app_user_id  TEXT,
    -- When it became past due, whatever order its events arrive in: the
    -- times of its past_due events newer than the newest event of another
    -- status (calm_at). Its grace starts at the earliest of them.
    ADD COLUMN past_due_at  TIMESTAMPTZ[] NOT NULL DEFAULT '{}',
    ADD COLUMN calm_at      TIMESTAMPTZ;
CREATE INDEX subscriptions_customer_key_idx ON subscriptions (customer_key) WHERE customer_key IS NOT NULL;
CREATE INDEX subscriptions_app_user_idx ON subscriptions (app_user_id) WHERE app_user_id IS NOT NULL;

ALTER TABLE orders
    ADD COLUMN items        JSONB,
    ADD COLUMN customer_key TEXT,
    ADD COLUMN app_user_id  TEXT;
CREATE INDEX orders_customer_key_idx ON orders (customer_key) WHERE customer_key IS NOT NULL;
CREATE INDEX orders_app_user_idx ON orders (app_user_id) WHERE app_user_id IS NOT NULL;
-- A Marketplace order is its account's: github:<account id>.
UPDATE orders SET customer_key = 'github:' || substr(external_id, 9)
WHERE source = 'github_marketplace' AND external_id LIKE 'account:%';

-- Stripe Entitlements: a customer's active features, as the newest
-- entitlements.active_entitlement_summary.updated (or the API, when it
-- had more than it could carry) lists them: [{"feature", "lookup_key"}].
CREATE TABLE stripe_active_entitlements (
    customer_key      TEXT PRIMARY KEY,
    features          JSONB       NOT NULL,
    event_at          TIMESTAMPTZ NOT NULL,
    provider_event_id TEXT        NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The catalogue (ENTITLEMENTS_FILE), as the receiver that started last
-- installed it: which provider ids grant which keys, and the grace.
CREATE TABLE entitlement_catalogue (
    source  TEXT NOT NULL,  -- stripe, paddle, polar, github_marketplace
    item_id TEXT NOT NULL,  -- a price, product, plan or feature id
    key     TEXT NOT NULL,
    PRIMARY KEY (source, item_id, key)
);
CREATE TABLE entitlement_settings (
    id          BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
    grace       INTERVAL    NOT NULL,
    fingerprint TEXT        NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A subject's entitlements as last computed (the body of its latest
-- version), the version the app last answered 2xx (acked_version), the
-- one a step was planned for (planned_version), who is sending now.
CREATE TABLE entitlement_subjects (
    subject         TEXT PRIMARY KEY,
    version         BIGINT      NOT NULL,
    entitlements    JSONB       NOT NULL,
    next_change_at  TIMESTAMPTZ,           -- the earliest until: when time alone changes the set
    planned_version BIGINT      NOT NULL DEFAULT 0,
    acked_version   BIGINT      NOT NULL DEFAULT 0,
    sending_version BIGINT,
    sending_until   TIMESTAMPTZ,
    changed_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX entitlement_subjects_due_idx ON entitlement_subjects (next_change_at) WHERE next_change_at IS NOT NULL;
CREATE INDEX entitlement_subjects_unplanned_idx ON entitlement_subjects (subject) WHERE planned_version < version;

-- Which subject each customer's rows were last computed for: when a
-- customer is linked to another app user, the one it leaves is computed
-- again (announced without them).
CREATE TABLE entitlement_customers (
    customer_key TEXT PRIMARY KEY,
    subject      TEXT NOT NULL
);

-- The subject a customer's rows belong to: its newest claimed app user,
-- else the provider-keyed subject itself.
CREATE FUNCTION entitlement_subject_of(p_customer TEXT) RETURNS TEXT
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT u FROM (
        SELECT app_user_id AS u, event_at AS t FROM subscriptions WHERE customer_key = p_customer AND app_user_id IS NOT NULL
        UNION ALL
        SELECT app_user_id, created_at FROM orders WHERE customer_key = p_customer AND app_user_id IS NOT NULL) AS c
      ORDER BY t DESC, u LIMIT 1), p_customer)
$$;

-- What grants the subject's keys at p_now: one row per grant (a
-- subscription, order or Stripe feature list and the catalogue id it
-- matched), with the state it gives ('active', 'grace') and until when.
-- Rows that grant nothing now are left out.
CREATE FUNCTION entitlement_grants(p_subject TEXT, p_now TIMESTAMPTZ)
RETURNS TABLE (key TEXT, state TEXT, until TIMESTAMPTZ, source TEXT, kind TEXT, object_id TEXT, status TEXT, item TEXT)
LANGUAGE sql STABLE AS $$
    WITH settings AS (SELECT coalesce((SELECT grace FROM entitlement_settings), interval '72 hours') AS grace),
    keys AS (
        SELECT p_subject AS k
        UNION SELECT customer_key FROM subscriptions WHERE app_user_id = p_subject AND customer_key IS NOT NULL
        UNION SELECT customer_key FROM orders WHERE app_user_id = p_subject AND customer_key IS NOT NULL),
    customers AS (SELECT k FROM keys WHERE entitlement_subject_of(k) = p_subject),
    subs AS (
        SELECT s.* FROM subscriptions s WHERE s.customer_key IN (SELECT k FROM customers)
        UNION ALL
        SELECT s.* FROM subscriptions s WHERE s.customer_key IS NULL AND s.app_user_id = p_subject),
    ords AS (
        SELECT o.* FROM orders o WHERE o.customer_key IN (SELECT k FROM customers)
        UNION ALL
        SELECT o.* FROM orders o WHERE o.customer_key IS NULL AND o.app_user_id = p_subject),
    sub_grants AS (
        SELECT c.key, g.state, g.until, s.source, 'subscription'::text AS kind, s.external_id AS object_id, s.status,
               c.item_id AS item
        FROM subs s
        CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(s.items) = 'array' THEN s.items ELSE '[]' END) AS it(v)
        JOIN entitlement_catalogue c ON c.source = s.source AND c.item_id IN (it.v ->> 'price', it.v ->> 'product')
        CROSS JOIN LATERAL (SELECT CASE
                WHEN s.status IN ('trialing', 'active')
                     AND (NOT s.cancel_at_period_end OR s.current_period_end IS NULL OR s.current_period_end > p_now)
                    THEN 'active'
                WHEN s.status = 'past_due'
                     AND coalesce((SELECT min(t) FROM unnest(s.past_due_at) AS t), s.event_at) + (SELECT grace FROM settings) > p_now
                    THEN 'grace' END AS state,
            CASE WHEN s.status = 'past_due'
                    THEN coalesce((SELECT min(t) FROM unnest(s.past_due_at) AS t), s.event_at) + (SELECT grace FROM settings)
                 WHEN s.cancel_at_period_end THEN s.current_period_end END AS until) AS g
        WHERE g.state IS NOT NULL),
    order_grants AS (
        SELECT c.key, 'active'::text AS state, NULL::timestamptz AS until, o.source, 'order'::text AS kind,
               o.external_id AS object_id, o.status, c.item_id AS item
        FROM ords o
        CROSS JOIN LATERAL jsonb_array_elements(CASE
            WHEN o.source = 'github_marketplace' THEN jsonb_build_array(jsonb_build_object('plan', split_part(o.plan, ':', 1)))
            WHEN jsonb_typeof(o.items) = 'array' THEN o.items ELSE '[]' END) AS it(v)
        JOIN entitlement_catalogue c ON c.source = o.source AND c.item_id IN (it.v ->> 'price', it.v ->> 'product', it.v ->> 'plan')
        WHERE o.status IN ('paid', 'partially_refunded') AND NOT o.dispute_lost),
    feature_grants AS (
        SELECT c.key, 'active'::text AS state, NULL::timestamptz AS until, 'stripe'::text AS source, 'stripe_features'::text AS kind,
               f.customer_key AS object_id, 'active'::text AS status, c.item_id AS item
        FROM stripe_active_entitlements f
        CROSS JOIN LATERAL jsonb_array_elements(f.features) AS it(v)
        JOIN entitlement_catalogue c ON c.source = 'stripe' AND c.item_id IN (it.v ->> 'feature', it.v ->> 'lookup_key')
        WHERE f.customer_key IN (SELECT k FROM customers))
    SELECT DISTINCT * FROM (SELECT * FROM sub_grants UNION ALL SELECT * FROM order_grants UNION ALL SELECT * FROM feature_grants) AS g
$$;

-- The subject's entitlements at p_now, as the app is told them: one entry
-- per key, active over grace; an active key's until is null when any of
-- its active grants has none, else the latest; a grace key's the latest.
CREATE FUNCTION entitlement_set(p_subject TEXT, p_now TIMESTAMPTZ) RETURNS JSONB
LANGUAGE sql STABLE AS $$
    WITH g AS (SELECT * FROM entitlement_grants(p_subject, p_now)),
    best AS (SELECT g.key, min(g.state) AS state FROM g GROUP BY g.key), -- 'active' < 'grace'
    k AS (SELECT b.key, b.state, CASE WHEN bool_or(g.until IS NULL) THEN NULL ELSE max(g.until) END AS until
          FROM best b JOIN g ON g.key = b.key AND g.state = b.state GROUP BY b.key, b.state)
    SELECT coalesce(jsonb_agg(jsonb_build_object('key', k.key, 'state', k.state,
               'until', to_char(k.until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')) ORDER BY k.key), '[]'::jsonb)
    FROM k
$$;

-- entitlements_recompute computes the subjects' entitlements again, each
-- under a lock of its own (taken in order, held to the commit: writers of
-- one subject wait for each other, and the last sees what the others
-- wrote), and writes a subject's row only when its set changed: a new
-- version. With p_planned, the caller plans the step that tells the app in
-- the same statement (planned_version follows). It returns
-- {"subjects": [{"subject", "version"}]} of the subjects whose set changed,
-- or NULL.
CREATE FUNCTION entitlements_recompute(p_subjects TEXT[], p_planned BOOLEAN) RETURNS JSONB
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    s        TEXT;
    now_     TIMESTAMPTZ := clock_timestamp();
    computed JSONB;
    stored   entitlement_subjects%ROWTYPE;
    next_at  TIMESTAMPTZ;
    v        BIGINT;
    changed  JSONB := '[]'::jsonb;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM entitlement_settings) THEN
        RETURN NULL; -- no catalogue installed: entitlements are not kept
    END IF;
    FOR s IN SELECT DISTINCT x FROM unnest(p_subjects) AS x WHERE x IS NOT NULL AND x <> '' ORDER BY x LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('entitlements:' || s, 0));
    END LOOP;
    FOR s IN SELECT DISTINCT x FROM unnest(p_subjects) AS x WHERE x IS NOT NULL AND x <> '' ORDER BY x LOOP
        -- A fresh snapshot, taken after the lock: what every earlier
        -- writer of the subject committed.
        computed := entitlement_set(s, now_);
        SELECT min((e ->> 'until')::timestamptz) INTO next_at FROM jsonb_array_elements(computed) AS e;
        SELECT * INTO stored FROM entitlement_subjects WHERE subject = s;
        IF NOT FOUND THEN
            IF computed = '[]'::jsonb THEN
                CONTINUE; -- never granted anything: nothing to tell
            END IF;
            INSERT INTO entitlement_subjects (subject, version, entitlements, next_change_at, planned_version)
            VALUES (s, 1, computed, next_at, CASE WHEN p_planned THEN 1 ELSE 0 END);
            v := 1;
        ELSIF stored.entitlements = computed THEN
            CONTINUE;
        ELSE
            v := stored.version + 1;
            UPDATE entitlement_subjects
            SET version = v, entitlements = computed, next_change_at = next_at, changed_at = now_,
                planned_version = CASE WHEN p_planned THEN v ELSE planned_version END
            WHERE subject = s;
        END IF;
        changed := changed || jsonb_build_object('subject', s, 'version', v);
    END LOOP;
    IF changed = '[]'::jsonb THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('subjects', changed);
END $$;

-- entitlements_customers_moved keeps which subject each customer's rows
-- were computed for, and returns the subjects the customers leave.
CREATE FUNCTION entitlements_customers_moved(p_customers TEXT[]) RETURNS TEXT[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    c    TEXT;
    now_ TEXT;
    was  TEXT;
    out_ TEXT[] := '{}';
BEGIN
    FOR c IN SELECT DISTINCT x FROM unnest(p_customers) AS x WHERE x IS NOT NULL ORDER BY x LOOP
        now_ := entitlement_subject_of(c);
        SELECT subject INTO was FROM entitlement_customers WHERE customer_key = c;
        IF NOT FOUND THEN
            INSERT INTO entitlement_customers (customer_key, subject) VALUES (c, now_) ON CONFLICT DO NOTHING;
        ELSIF was IS DISTINCT FROM now_ THEN
            UPDATE entitlement_customers SET subject = now_ WHERE customer_key = c AND subject IS DISTINCT FROM now_;
            out_ := out_ || was;
        END IF;
    END LOOP;
    RETURN out_;
END $$;

-- The subjects a written row's customer may belong to, or have belonged
-- to: its subject now, the provider-keyed subject, the one its rows were
-- last computed for.
CREATE FUNCTION entitlement_subjects_of(p_customer TEXT, p_app_user TEXT) RETURNS TEXT[]
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_customer IS NULL THEN ARRAY[p_app_user]
           ELSE ARRAY[entitlement_subject_of(p_customer), p_customer,
                      (SELECT subject FROM entitlement_customers WHERE customer_key = p_customer)] END
$$;

-- entitlements_follow is the one statement an event that may change
-- entitlements adds to its transaction (internal/entitlements.Follow): for
-- the subscription and the orders (by business key or payment) the event
-- names, it records when a subscription was past due, then, only when this
-- transaction wrote one of those rows, computes their subjects again
-- (entitlements_recompute). An event that wrote none of them locks and
-- writes nothing here. A copy of an event (its claim made before) does
-- nothing.
CREATE FUNCTION entitlements_follow(p_sub_source TEXT, p_sub_id TEXT, p_sub_at TIMESTAMPTZ, p_sub_status TEXT,
                                    p_order_source TEXT, p_order_id TEXT, p_payment TEXT) RETURNS JSONB
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    subjects  TEXT[] := '{}';
    customers TEXT[] := '{}';
    r         RECORD;
BEGIN
    IF NOT receiver_claimed() OR NOT EXISTS (SELECT 1 FROM entitlement_settings) THEN
        RETURN NULL;
    END IF;
    IF p_sub_id IS NOT NULL THEN
        -- The subscription's past_due times: an event of another status
        -- newer than any seen moves calm_at; a past_due event newer than
        -- calm_at adds its time. Written only when they change.
        IF p_sub_status = 'past_due' THEN
            UPDATE subscriptions s
            SET past_due_at = (SELECT array_agg(DISTINCT t ORDER BY t) FROM unnest(s.past_due_at || p_sub_at) AS t)
            WHERE s.source = p_sub_source AND s.external_id = p_sub_id
              AND (s.calm_at IS NULL OR p_sub_at > s.calm_at) AND NOT (p_sub_at = ANY (s.past_due_at));
        ELSE
            UPDATE subscriptions s
            SET calm_at = p_sub_at,
                past_due_at = coalesce((SELECT array_agg(t ORDER BY t) FROM unnest(s.past_due_at) AS t WHERE t > p_sub_at), '{}')
            WHERE s.source = p_sub_source AND s.external_id = p_sub_id AND (s.calm_at IS NULL OR p_sub_at > s.calm_at);
        END IF;
        FOR r IN SELECT customer_key, app_user_id FROM subscriptions
                 WHERE source = p_sub_source AND external_id = p_sub_id AND xmin = pg_current_xact_id()::xid LOOP
            subjects := subjects || entitlement_subjects_of(r.customer_key, r.app_user_id);
            customers := customers || r.customer_key;
        END LOOP;
    END IF;
    IF p_order_id IS NOT NULL OR p_payment IS NOT NULL THEN
        FOR r IN SELECT customer_key, app_user_id FROM orders
                 WHERE source = p_order_source AND (external_id = p_order_id OR payment_intent_id = p_payment)
                   AND xmin = pg_current_xact_id()::xid LOOP
            subjects := subjects || entitlement_subjects_of(r.customer_key, r.app_user_id);
            customers := customers || r.customer_key;
        END LOOP;
    END IF;
    IF cardinality(subjects) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN entitlements_recompute(subjects || entitlements_customers_moved(customers), true);
END $$;
