-- Reconciliation: catching up, from the providers' APIs, with what was
-- never delivered (see internal/reconcile).

-- Where the last run of a source with given filters stopped, so that
-- `server reconcile stripe --resume` continues there. scope is '' for a run
-- over every event, else its filters ("types=a,b;failed_only"): a filtered
-- run says nothing of the events it did not list.
CREATE TABLE reconcile_cursors (
    source        TEXT        NOT NULL,             -- stripe
    scope         TEXT        NOT NULL DEFAULT '',
    event_id      TEXT COLLATE "C" NOT NULL DEFAULT '', -- the last event reconciled; '': none,
    event_created TIMESTAMPTZ NOT NULL,             -- and everything created before this was
    run_id        BIGINT,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (source, scope)
);

-- Every run that writes (dry runs write nothing): its findings for
-- operators, and the time of the last successful run for the metrics.
-- A run whose process died stays 'running' with no finished_at.
CREATE TABLE reconcile_runs (
    id           BIGSERIAL   PRIMARY KEY,
    source       TEXT        NOT NULL,              -- stripe, github_marketplace
    triggered_by TEXT        NOT NULL,              -- cli, periodic
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at  TIMESTAMPTZ,
    result       TEXT        NOT NULL DEFAULT 'running',
    found        INT         NOT NULL DEFAULT 0,    -- events (accounts and orders) looked at
    missed       INT         NOT NULL DEFAULT 0,    -- never delivered (discrepancies, for GitHub)
    unresolved   INT         NOT NULL DEFAULT 0,    -- left for an operator
    summary      JSONB,
    error        TEXT,
    CONSTRAINT reconcile_runs_result_check CHECK (result IN ('running', 'ok', 'error'))
);
CREATE INDEX reconcile_runs_source_idx ON reconcile_runs (source, started_at);
