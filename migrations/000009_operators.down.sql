DROP TABLE IF EXISTS step_attempts;
DROP INDEX IF EXISTS processed_events_resolved_idx;
-- A resolved claim goes back to what it was: parked.
UPDATE processed_events SET status = 'parked' WHERE status = 'resolved' AND kind = 'step';
UPDATE processed_events SET status = CASE WHEN outcome = 'parked' THEN 'parked' ELSE 'done' END
WHERE status = 'resolved' AND kind = 'event';
ALTER TABLE processed_events
    DROP COLUMN IF EXISTS resolved_reason,
    DROP COLUMN IF EXISTS resolved_by,
    DROP COLUMN IF EXISTS resolved_at,
    DROP CONSTRAINT processed_events_status_check,
    ADD CONSTRAINT processed_events_status_check
        CHECK (status IN ('in_progress', 'done', 'parked', 'skipped'));
