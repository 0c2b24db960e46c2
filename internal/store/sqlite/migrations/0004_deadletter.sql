-- oncesync embedded store, migration 4: the checkpoint dead-letter list
-- (SPEC §11). Work parked after repeated barrier mismatches, shown to and
-- re-queued by a person. Keys, tokens and snapshot hashes only: no personal
-- data. Few rows; entries are kept after re-queueing as the audit trail.

CREATE TABLE dead_letters (
    id              INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sync_id         TEXT    NOT NULL DEFAULT '',
    run_id          INTEGER NOT NULL DEFAULT 0,
    partition_no    INTEGER NOT NULL DEFAULT 0,
    barrier_key     TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    token           TEXT    NOT NULL,
    snapshot        TEXT    NOT NULL,
    holder_token    TEXT    NOT NULL DEFAULT '',
    holder_snapshot TEXT    NOT NULL DEFAULT '',
    attempts        INTEGER NOT NULL DEFAULT 0,
    payload         TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    requeued_at     INTEGER,
    requeued_by     TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX dead_letters_sync_id_id ON dead_letters (sync_id, id);
CREATE INDEX dead_letters_parked ON dead_letters (id) WHERE requeued_at IS NULL;
