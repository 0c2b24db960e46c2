-- oncesync PostgreSQL store, migration 4: the checkpoint dead-letter list
-- (SPEC §11). Work parked after repeated barrier mismatches, shown to and
-- re-queued by a person. Keys, tokens and snapshot hashes only: no personal
-- data. Few rows; entries are kept after re-queueing as the audit trail.
-- Times are unix nanoseconds from the store's clock, like every table here.

CREATE TABLE dead_letters (
    id              bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sync_id         text    NOT NULL DEFAULT '',
    run_id          bigint  NOT NULL DEFAULT 0,
    partition_no    integer NOT NULL DEFAULT 0,
    barrier_key     text    NOT NULL,
    reason          text    NOT NULL,
    token           text    NOT NULL,
    snapshot        text    NOT NULL,
    holder_token    text    NOT NULL DEFAULT '',
    holder_snapshot text    NOT NULL DEFAULT '',
    attempts        integer NOT NULL DEFAULT 0,
    payload         text    NOT NULL DEFAULT '',
    created_at      bigint  NOT NULL,
    requeued_at     bigint,
    requeued_by     text    NOT NULL DEFAULT ''
);

CREATE INDEX dead_letters_sync_id_id ON dead_letters (sync_id, id);
CREATE INDEX dead_letters_parked ON dead_letters (id) WHERE requeued_at IS NULL;
