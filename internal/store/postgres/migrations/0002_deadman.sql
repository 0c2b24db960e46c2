-- oncesync PostgreSQL store, schema version 2: the dead-man check (SPEC §9),
-- the same as the SQLite store's.

-- One row per alerted silence of a workspace or a sync: while it exists the
-- silence is not alerted again; the first successful run after "since"
-- removes it. Few rows (only ongoing silences).
CREATE TABLE deadman_markers (
    scope     text   NOT NULL CHECK (scope IN ('workspace', 'sync')),
    id        text   COLLATE "C" NOT NULL,
    workspace text   NOT NULL DEFAULT '',
    kind      text   NOT NULL CHECK (kind IN ('runs_without_success', 'no_runs')),
    since     bigint,          -- NULL: unknown
    raised_at bigint NOT NULL,
    alert_id  text   NOT NULL DEFAULT '',
    PRIMARY KEY (scope, id)
);

-- A sync's last success in one backward index-only probe (max(finished_at)
-- over this partial index: only succeeded runs are in it). The latest run
-- comes from runs_sync_id_id.
CREATE INDEX runs_sync_succeeded ON runs (sync_id, finished_at) WHERE state = 'succeeded';
