-- oncesync embedded store, migration 3: a compact ledger and a small table of
-- pending claims (docs/PERFORMANCE.md, "What dominates").
--
-- Ledger keys are hex SHA-256, so a page's keys land on as many B-tree leaves
-- as it has records; every leaf a transaction touches is written whole to the
-- WAL and copied back at the checkpoint. This migration
--   * stores a sync's id once (ledger_syncs) and a small integer in each row;
--   * stores a lowercase 64-character hex key as its 32 bytes (a BLOB); any
--     other key stays TEXT (a TEXT never equals a BLOB in SQLite, so the two
--     forms cannot collide; the store converts at its boundary);
--   * keeps pending entries (claims) in ledger_claims, a table the size of the
--     pages in flight, so a claim writes a few pages instead of one per
--     record, and the big ledger gets one write per record (at finish).
-- A key is in at most one of ledger and ledger_claims.

CREATE TABLE ledger_syncs (
    id      INTEGER NOT NULL PRIMARY KEY,
    sync_id TEXT    NOT NULL UNIQUE
) STRICT;

INSERT INTO ledger_syncs (sync_id) SELECT DISTINCT sync_id FROM ledger ORDER BY sync_id;

-- Final entries: complete, rejected, in_doubt.
CREATE TABLE ledger_v3 (
    sid          INTEGER NOT NULL,
    key          ANY     NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('complete', 'rejected', 'in_doubt')),
    fence        INTEGER NOT NULL,
    run_id       INTEGER NOT NULL,
    result       TEXT    NOT NULL DEFAULT '',
    message      TEXT    NOT NULL DEFAULT '',
    attempts     INTEGER NOT NULL DEFAULT 1,
    claimed_at   INTEGER NOT NULL,
    completed_at INTEGER,
    seen_at      INTEGER NOT NULL,
    PRIMARY KEY (sid, key)
) STRICT, WITHOUT ROWID;

-- Pending entries: claimed before a destination call, not yet finished.
CREATE TABLE ledger_claims (
    sid        INTEGER NOT NULL,
    key        ANY     NOT NULL,
    fence      INTEGER NOT NULL,
    run_id     INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 1,
    claimed_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    PRIMARY KEY (sid, key)
) STRICT, WITHOUT ROWID;

INSERT INTO ledger_v3 (sid, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
SELECT s.id,
       CASE WHEN length(l.key) = 64 AND l.key NOT GLOB '*[^0-9a-f]*' THEN unhex(l.key) ELSE l.key END,
       l.state, l.fence, l.run_id, l.result, l.message, l.attempts, l.claimed_at, l.completed_at, l.seen_at
FROM ledger AS l JOIN ledger_syncs AS s ON s.sync_id = l.sync_id
WHERE l.state <> 'pending';

INSERT INTO ledger_claims (sid, key, fence, run_id, attempts, claimed_at, seen_at)
SELECT s.id,
       CASE WHEN length(l.key) = 64 AND l.key NOT GLOB '*[^0-9a-f]*' THEN unhex(l.key) ELSE l.key END,
       l.fence, l.run_id, l.attempts, l.claimed_at, l.seen_at
FROM ledger AS l JOIN ledger_syncs AS s ON s.sync_id = l.sync_id
WHERE l.state = 'pending';

DROP TABLE ledger;
ALTER TABLE ledger_v3 RENAME TO ledger;

-- As before, only the entries a person looks at are indexed by state.
CREATE INDEX ledger_problems ON ledger (sid, state, claimed_at) WHERE state IN ('rejected', 'in_doubt');
