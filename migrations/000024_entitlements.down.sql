DROP FUNCTION IF EXISTS entitlements_follow(TEXT, TEXT, TIMESTAMPTZ, TEXT, TEXT, TEXT, TEXT);
DROP FUNCTION IF EXISTS entitlement_subjects_of(TEXT, TEXT);
DROP FUNCTION IF EXISTS entitlements_customers_moved(TEXT[]);
DROP FUNCTION IF EXISTS entitlements_recompute(TEXT[], BOOLEAN);
DROP FUNCTION IF EXISTS entitlement_set(TEXT, TIMESTAMPTZ);
DROP FUNCTION IF EXISTS entitlement_grants(TEXT, TIMESTAMPTZ);
DROP FUNCTION IF EXISTS entitlement_subject_of(TEXT);
DROP TABLE IF EXISTS entitlement_customers;
DROP TABLE IF EXISTS entitlement_subjects;
DROP TABLE IF EXISTS entitlement_settings;
DROP TABLE IF EXISTS entitlement_catalogue;
DROP TABLE IF EXISTS stripe_active_entitlements;
ALTER TABLE orders DROP COLUMN IF EXISTS items, DROP COLUMN IF EXISTS customer_key, DROP COLUMN IF EXISTS app_user_id;
ALTER TABLE subscriptions DROP COLUMN IF EXISTS items, DROP COLUMN IF EXISTS customer_key, DROP COLUMN IF EXISTS app_user_id,
    DROP COLUMN IF EXISTS past_due_at, DROP COLUMN IF EXISTS calm_at;
