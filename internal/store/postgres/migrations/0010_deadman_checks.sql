-- oncesync PostgreSQL store, schema version 12: when the dead-man check last
-- ran (SPEC §9), the same as the SQLite store's. One row, name 'deadman'.
CREATE TABLE deadman_checks (
    name       text   COLLATE "C" NOT NULL PRIMARY KEY,
    checked_at bigint NOT NULL,          -- unix nanoseconds
    checked_by text   NOT NULL DEFAULT ''
);
