DROP INDEX IF EXISTS uq_steps_object;
