-- oncesync embedded store, schema version 1.
-- Times are unix nanoseconds from the store's clock; NULL means "never".

CREATE TABLE syncs (
    id           TEXT    NOT NULL PRIMARY KEY,
    workspace    TEXT    NOT NULL DEFAULT '',
    definition   TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused')),
    pause_reason TEXT    NOT NULL DEFAULT '',
    paused_by    TEXT    NOT NULL DEFAULT '',
    paused_why   TEXT    NOT NULL DEFAULT '',
    changed_at   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE runs (
    id             INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sync_id        TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'interrupted', 'skipped')),
    attempt        INTEGER NOT NULL DEFAULT 0,
    fence          INTEGER NOT NULL DEFAULT 0,
    started_at     INTEGER NOT NULL,
    finished_at    INTEGER,
    failure_code   TEXT    NOT NULL DEFAULT '',
    failure_detail TEXT    NOT NULL DEFAULT '',
    n_read         INTEGER NOT NULL DEFAULT 0,
    n_written      INTEGER NOT NULL DEFAULT 0,
    n_replayed     INTEGER NOT NULL DEFAULT 0,
    n_rejected     INTEGER NOT NULL DEFAULT 0,
    n_in_doubt     INTEGER NOT NULL DEFAULT 0,
    n_settled      INTEGER NOT NULL DEFAULT 0,
    n_pages        INTEGER NOT NULL DEFAULT 0,
    n_requests     INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX runs_sync_id_id ON runs (sync_id, id);
CREATE INDEX runs_state ON runs (state);

-- fences holds each sync's registered fence: the highest fence granted or
-- raised. Every fenced write compares against it in its own transaction.
CREATE TABLE fences (
    sync_id TEXT    NOT NULL PRIMARY KEY,
    fence   INTEGER NOT NULL
) STRICT;

CREATE TABLE cursors (
    sync_id    TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    fence      INTEGER NOT NULL,
    run_id     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE ledger (
    sync_id      TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'complete', 'rejected', 'in_doubt')),
    fence        INTEGER NOT NULL,
    run_id       INTEGER NOT NULL,
    result       TEXT    NOT NULL DEFAULT '',
    message      TEXT    NOT NULL DEFAULT '',
    attempts     INTEGER NOT NULL DEFAULT 1,
    claimed_at   INTEGER NOT NULL,
    completed_at INTEGER,
    seen_at      INTEGER NOT NULL,
    PRIMARY KEY (sync_id, key)
) STRICT, WITHOUT ROWID;

-- Only the entries a person looks at are indexed by state: the hot path
-- (claim pending, finish complete) then maintains no secondary index at all.
-- There is deliberately no index on seen_at: every claim and finish moves it,
-- and LedgerPrune walks the primary key in short windows instead.
CREATE INDEX ledger_problems ON ledger (sync_id, state, claimed_at) WHERE state IN ('rejected', 'in_doubt');

CREATE TABLE leases (
    sync_id    TEXT    NOT NULL PRIMARY KEY,
    token      TEXT    NOT NULL,
    fence      INTEGER NOT NULL,
    holder     TEXT    NOT NULL DEFAULT '',
    run_id     INTEGER NOT NULL DEFAULT 0,
    expires_at INTEGER NOT NULL
) STRICT;

CREATE TABLE audit (
    id      INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    sync_id TEXT    NOT NULL DEFAULT '',
    action  TEXT    NOT NULL,
    by_who  TEXT    NOT NULL DEFAULT '',
    why     TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX audit_sync_id_id ON audit (sync_id, id);
