-- oncesync PostgreSQL store, schema version 1: the same tables as the SQLite
-- store. Statements are unqualified: they run with search_path set to the
-- store's schema. Times are unix nanoseconds from the store's clock (bigint,
-- exact, like SQLite); NULL means "never". Identifiers and keys use the "C"
-- collation: byte order like SQLite, and the cheapest comparisons.

CREATE TABLE syncs (
    id           text    COLLATE "C" NOT NULL PRIMARY KEY,
    workspace    text    NOT NULL DEFAULT '',
    definition   text    NOT NULL,
    state        text    NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused')),
    pause_reason text    NOT NULL DEFAULT '',
    paused_by    text    NOT NULL DEFAULT '',
    paused_why   text    NOT NULL DEFAULT '',
    changed_at   bigint  NOT NULL,
    created_at   bigint  NOT NULL
);

CREATE TABLE runs (
    id             bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sync_id        text    COLLATE "C" NOT NULL,
    state          text    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'interrupted', 'skipped')),
    attempt        integer NOT NULL DEFAULT 0,
    fence          bigint  NOT NULL DEFAULT 0,
    started_at     bigint  NOT NULL,
    finished_at    bigint,
    failure_code   text    NOT NULL DEFAULT '',
    failure_detail text    NOT NULL DEFAULT '',
    n_read         bigint  NOT NULL DEFAULT 0,
    n_written      bigint  NOT NULL DEFAULT 0,
    n_replayed     bigint  NOT NULL DEFAULT 0,
    n_rejected     bigint  NOT NULL DEFAULT 0,
    n_in_doubt     bigint  NOT NULL DEFAULT 0,
    n_settled      bigint  NOT NULL DEFAULT 0,
    n_pages        bigint  NOT NULL DEFAULT 0,
    n_requests     bigint  NOT NULL DEFAULT 0
);

CREATE INDEX runs_sync_id_id ON runs (sync_id, id);
CREATE INDEX runs_state ON runs (state);

-- fences holds each sync's registered fence: the highest fence granted or
-- raised. Every fenced write upserts its row first, in the write's own
-- statement or transaction: the row lock serialises a sync's fenced writes and
-- lease transitions (it is the per-sync mutex), and the value refuses stale
-- fences.
CREATE TABLE fences (
    sync_id text   COLLATE "C" NOT NULL PRIMARY KEY,
    fence   bigint NOT NULL
);

CREATE TABLE cursors (
    sync_id    text   COLLATE "C" NOT NULL PRIMARY KEY,
    value      text   NOT NULL,
    fence      bigint NOT NULL,
    run_id     bigint NOT NULL,
    updated_at bigint NOT NULL
);

CREATE TABLE ledger (
    sync_id      text    COLLATE "C" NOT NULL,
    key          text    COLLATE "C" NOT NULL,
    state        text    NOT NULL CHECK (state IN ('pending', 'complete', 'rejected', 'in_doubt')),
    fence        bigint  NOT NULL,
    run_id       bigint  NOT NULL,
    result       text    NOT NULL DEFAULT '',
    message      text    NOT NULL DEFAULT '',
    attempts     integer NOT NULL DEFAULT 1,
    claimed_at   bigint  NOT NULL,
    completed_at bigint,
    seen_at      bigint  NOT NULL,
    -- key first (not sync_id as in SQLite): "key = ANY($keys) AND sync_id = $1"
    -- is then always an index condition. With (sync_id, key) the planner,
    -- lacking statistics (a new deployment, one sync holding most rows),
    -- scanned the whole sync_id prefix and filtered the keys: a page lookup
    -- cost linear in the ledger's size. Keys are hashes, so nothing is lost.
    PRIMARY KEY (key, sync_id)
);

-- As in SQLite: only the entries a person looks at are indexed by state, and
-- there is no index on seen_at (LedgerPrune walks the primary key in windows).
CREATE INDEX ledger_problems ON ledger (sync_id, state, claimed_at) WHERE state IN ('rejected', 'in_doubt');

CREATE TABLE leases (
    sync_id    text   COLLATE "C" NOT NULL PRIMARY KEY,
    token      text   NOT NULL,
    fence      bigint NOT NULL,
    holder     text   NOT NULL DEFAULT '',
    run_id     bigint NOT NULL DEFAULT 0,
    expires_at bigint NOT NULL
);

CREATE TABLE audit (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      bigint NOT NULL,
    sync_id text   COLLATE "C" NOT NULL DEFAULT '',
    action  text   NOT NULL,
    by_who  text   NOT NULL DEFAULT '',
    why     text   NOT NULL DEFAULT ''
);

CREATE INDEX audit_sync_id_id ON audit (sync_id, id);
