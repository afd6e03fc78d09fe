-- An event's row stays whole in its page: no part of it goes to the TOAST
-- table unless the row, every value compressed, is still over about 8 KB.
--
-- Migration 3 gave the body STORAGE MAIN so that it would be compressed and
-- kept in the row, but PostgreSQL compresses MAIN values only after it has
-- moved EXTENDED ones out of line: a row over 2 KB before compression (every
-- event with a real body) first had each of its text values over 24 bytes
-- (the event's key and id, a traceparent) moved to the TOAST table, one
-- TOAST row and one TOAST index entry each, and only then the body
-- compressed. That cost about 5 % of PostgreSQL's CPU per new event, two
-- TOAST rows and their WAL, and a TOAST look-up for every key a replay
-- reads (measured 2026-12-02: 2 TOAST rows of 28 bytes per new
-- invoice.created event).
--
-- With every variable-length column MAIN, the body is compressed first
-- (lz4 where the server has it: 5.7 KB → 2.4 KB) and the rest stays in the
-- row. Rows written before keep their TOAST values (read as before); only
-- rows written from now on are stored whole. A column added later must be
-- given STORAGE MAIN too (TestEventRowsStayWhole checks it).
ALTER TABLE processed_events
    ALTER COLUMN event_key       SET STORAGE MAIN,
    ALTER COLUMN source          SET STORAGE MAIN,
    ALTER COLUMN status          SET STORAGE MAIN,
    ALTER COLUMN kind            SET STORAGE MAIN,
    ALTER COLUMN parent_key      SET STORAGE MAIN,
    ALTER COLUMN step            SET STORAGE MAIN,
    ALTER COLUMN last_error      SET STORAGE MAIN,
    ALTER COLUMN payload         SET STORAGE MAIN,
    ALTER COLUMN event_id        SET STORAGE MAIN,
    ALTER COLUMN event_type      SET STORAGE MAIN,
    ALTER COLUMN api_version     SET STORAGE MAIN,
    ALTER COLUMN body_hash       SET STORAGE MAIN,
    ALTER COLUMN outcome         SET STORAGE MAIN,
    ALTER COLUMN via             SET STORAGE MAIN,
    ALTER COLUMN step_kind       SET STORAGE MAIN,
    ALTER COLUMN traceparent     SET STORAGE MAIN,
    ALTER COLUMN resolved_by     SET STORAGE MAIN,
    ALTER COLUMN resolved_reason SET STORAGE MAIN;
