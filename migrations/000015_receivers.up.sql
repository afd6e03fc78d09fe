-- The receivers that run on this database, and what their steps use, so that
-- an operator command can tell whether its shell runs steps as they do
-- (internal/server/heartbeat.go). Each process writes its row at start-up
-- and on every heartbeat (seen_at), sets stopped_at when it stops
-- gracefully, and any receiver deletes rows unseen for a day. A row not
-- seen for a few heartbeats is not a live receiver.
CREATE TABLE receivers (
    id          TEXT PRIMARY KEY,         -- random, one per process
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    version     TEXT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    seen_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    stopped_at  TIMESTAMPTZ,
    -- config.Fingerprint: each setting a step uses, as it may be shown;
    -- secrets only as a keyed, slow hash (receivers_salt), never the value.
    fingerprint JSONB NOT NULL
);

CREATE INDEX receivers_seen_idx ON receivers (seen_at);

-- One random salt per database, written by the first receiver that starts
-- on it: the key of the fingerprints' hashes, so that a fingerprint of one
-- database says nothing about another's, and no precomputed table applies.
CREATE TABLE receivers_salt (
    one        BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    salt       BYTEA NOT NULL CHECK (length(salt) >= 16),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
