DROP TABLE IF EXISTS reconcile_runs;
DROP TABLE IF EXISTS reconcile_cursors;
