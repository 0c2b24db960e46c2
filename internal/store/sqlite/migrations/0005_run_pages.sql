-- oncesync embedded store, migration 5: the per-page timeline of a run (the
-- Run page of the web UI). One small row per checkpointed page with that
-- page's figures. The page's cursor is not stored: it may hold source data.

CREATE TABLE run_pages (
    run_id          INTEGER NOT NULL,
    page            INTEGER NOT NULL,
    read            INTEGER NOT NULL DEFAULT 0,
    claimed         INTEGER NOT NULL DEFAULT 0,
    sent            INTEGER NOT NULL DEFAULT 0,
    replayed        INTEGER NOT NULL DEFAULT 0,
    rejected        INTEGER NOT NULL DEFAULT 0,
    in_doubt        INTEGER NOT NULL DEFAULT 0,
    requests        INTEGER NOT NULL DEFAULT 0,
    checkpointed_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, page)
) STRICT, WITHOUT ROWID;
