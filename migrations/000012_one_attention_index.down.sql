-- The three partial indexes of migrations 2, 3 and 9 again.
DROP INDEX processed_events_attention_idx;
CREATE INDEX processed_events_open_steps_idx ON processed_events (claimed_at)
    WHERE kind = 'step' AND status = 'in_progress';
CREATE INDEX processed_events_parked_idx ON processed_events (claimed_at)
    WHERE status = 'parked';
CREATE INDEX processed_events_resolved_idx ON processed_events (claimed_at)
    WHERE status = 'resolved' AND kind = 'event';
