-- The operator console's sign-in sessions (internal/console). The cookie
-- carries a random session id (and an HMAC of it under a key derived from
-- ADMIN_TOKEN); a row here is what makes it open pages, on every replica.
-- POST /logout sets revoked_at, after which the cookie opens nothing; a
-- row is deleted once it has expired (at the next sign-in).
--
-- Only a hash of the id is stored: reading this table (a backup, a
-- read-only role) gives no cookie that works.
CREATE TABLE console_sessions (
    id_hash    BYTEA       PRIMARY KEY,       -- SHA-256 of the cookie's session id
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ,                   -- signed out; NULL while it may be used
    client     TEXT        NOT NULL DEFAULT '' -- the address that signed in (TRUSTED_PROXIES decides which)
);
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);
