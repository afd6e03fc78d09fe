-- GitHub deliveries are known by what GitHub signed (issue 21; see the
-- package comment of internal/providers/github). A delivery's body hash is
-- now SHA-256 of its JSON payload alone, which is what processed_events.body
-- holds, instead of SHA-256 of the unsigned hook id and the raw body; and
-- a new key ends with part of that hash ("<hook id>:<GUID>:<16 hex digits>").
--
-- Keys stored before keep their "<hook id>:<GUID>" shape, with their steps'
-- keys, Message-IDs and Idempotency-Keys, and orders keep their
-- provider_event_id: nothing that was sent outside changes. What must
-- change is their body hash: a redelivery of such an event is keyed the new
-- way and is known as a copy of it only by its hash. So every stored GitHub
-- delivery gets the hash of its stored payload. One payload stored more
-- than once (the same body under two hook ids, or under a JSON and a form
-- delivery: one event each before, one event now) keeps its hash on the
-- first received; the others keep no hash, and the first answers for them.
-- Synthetic events of the Marketplace reconciliation (via 'reconcile')
-- were never signed and keep none. (While a deploy replaces them, replicas
-- of the earlier version still store the earlier hash: a body one of them
-- stores then is known again by its key alone, and its orders by their
-- business keys.)
UPDATE processed_events SET body_hash = NULL
WHERE source = 'github' AND kind = 'event' AND body_hash IS NOT NULL;

UPDATE processed_events p SET body_hash = h.hash
FROM (
    SELECT DISTINCT ON (sha256(body)) event_key, sha256(body) AS hash
    FROM processed_events
    WHERE source = 'github' AND kind = 'event' AND body IS NOT NULL
      AND coalesce(via, 'delivery') = 'delivery'
    ORDER BY sha256(body), claimed_at, event_key
) h
WHERE p.event_key = h.event_key;
