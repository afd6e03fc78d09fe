-- The uses of each billing-portal link (internal/portal), by its token's
-- nonce (random, 12 bytes): a link opens the portal PORTAL_LINK_USES times
-- at most. A row is written by the first use, and deleted once the link has
-- expired (its token says when); nothing in it names the customer.
CREATE TABLE portal_link_uses (
    link_id    BYTEA PRIMARY KEY,
    uses       INTEGER NOT NULL CHECK (uses >= 0),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX portal_link_uses_expires_idx ON portal_link_uses (expires_at);
