-- Back to a body hash of the hook id (the first part of the key) and the
-- body, as the receiver before migration 10 computed it, so that it again
-- knows a redelivery of the events stored since. For a form-encoded
-- delivery that is not the raw body it hashed (the form is not stored), so
-- such an event is known only by its key. A hash another row holds already
-- is left off. Keys made since keep their third part.
UPDATE processed_events SET body_hash = NULL
WHERE source = 'github' AND kind = 'event' AND body_hash IS NOT NULL;

UPDATE processed_events p SET body_hash = h.hash
FROM (
    SELECT DISTINCT ON (hash) event_key, hash
    FROM (
        SELECT event_key, claimed_at,
               sha256(convert_to(split_part(event_key, ':', 1), 'UTF8') || '\x00'::bytea || body) AS hash
        FROM processed_events
        WHERE source = 'github' AND kind = 'event' AND body IS NOT NULL
          AND coalesce(via, 'delivery') = 'delivery'
    ) e
    ORDER BY hash, claimed_at, event_key
) h
WHERE p.event_key = h.event_key;
