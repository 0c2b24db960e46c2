-- oncesync embedded store, schema version 2: the dead-man check (SPEC §9).

-- One row per alerted silence of a workspace or a sync: while it exists the
-- silence is not alerted again; the first successful run after "since"
-- removes it. Few rows (only ongoing silences).
CREATE TABLE deadman_markers (
    scope     TEXT    NOT NULL CHECK (scope IN ('workspace', 'sync')),
    id        TEXT    NOT NULL,
    workspace TEXT    NOT NULL DEFAULT '',
    kind      TEXT    NOT NULL CHECK (kind IN ('runs_without_success', 'no_runs')),
    since     INTEGER,          -- NULL: unknown
    raised_at INTEGER NOT NULL,
    alert_id  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (scope, id)
) STRICT, WITHOUT ROWID;

-- A sync's last success in one probe of a covering index (max(finished_at)
-- with sync_id and state as index conditions: "state" must be a column for
-- SQLite to cover the query). Partial: only succeeded runs are in it. The
-- latest run comes from runs_sync_id_id.
CREATE INDEX runs_sync_succeeded ON runs (sync_id, state, finished_at) WHERE state = 'succeeded';
