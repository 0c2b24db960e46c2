-- oncesync embedded store, schema version 12: when the dead-man check last
-- ran (SPEC §9), so a process that does not lead can tell that the leader's
-- hourly check stopped and claim one itself. One row, name 'deadman'.
CREATE TABLE deadman_checks (
    name       TEXT    NOT NULL PRIMARY KEY,
    checked_at INTEGER NOT NULL,          -- unix nanoseconds
    checked_by TEXT    NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;
