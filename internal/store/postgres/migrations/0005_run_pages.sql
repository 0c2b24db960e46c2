-- oncesync PostgreSQL store, migration 5: the per-page timeline of a run (the
-- Run page of the web UI). One small row per checkpointed page with that
-- page's figures. The page's cursor is not stored: it may hold source data.
-- Times are unix nanoseconds from the store's clock, like every table here.

CREATE TABLE run_pages (
    run_id          bigint NOT NULL,
    page            bigint NOT NULL,
    read            bigint NOT NULL DEFAULT 0,
    claimed         bigint NOT NULL DEFAULT 0,
    sent            bigint NOT NULL DEFAULT 0,
    replayed        bigint NOT NULL DEFAULT 0,
    rejected        bigint NOT NULL DEFAULT 0,
    in_doubt        bigint NOT NULL DEFAULT 0,
    requests        bigint NOT NULL DEFAULT 0,
    checkpointed_at bigint NOT NULL,
    PRIMARY KEY (run_id, page)
);
