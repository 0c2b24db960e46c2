-- oncesync embedded store, migration 9: accepted entries, claim results and
-- released keys (SPEC §3, §4; store.LedgerAccepted, store.LedgerReleased).
--
--   * ledger's CHECK allowed complete, rejected and in_doubt only: the table
--     is rebuilt to allow accepted (a destination took the delivery for
--     processing later; Result names the process). Accepted entries are
--     listed (polled) like rejected and in-doubt ones, so the partial index
--     is rebuilt with them (renamed: it no longer holds problems only).
--   * ledger_claims gets the Result a claim carries while pending.
--   * ledger_meta.round_through is the highest log seq any background merge
--     round has set out to merge (registered in the round's first
--     transaction, never lowered). A writer that finds a key's newest entry
--     in memory above it knows no merge has written or will write that entry,
--     so a released key whose claim is still in memory leaves no trace in
--     the tables (ledgerlog.go, "Where a key may be").
--
-- The log's bodies change encoding (a marker byte, then per-item table bits
-- and claim results); bodies written before this migration still decode.

CREATE TABLE ledger_v9 (
    sid          INTEGER NOT NULL,
    key          ANY     NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('complete', 'rejected', 'in_doubt', 'accepted')),
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

INSERT INTO ledger_v9 (sid, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
SELECT sid, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at FROM ledger;

DROP TABLE ledger;
ALTER TABLE ledger_v9 RENAME TO ledger;

-- Only the entries LedgerList reads by state are indexed by it: the hot path
-- (claims, complete entries) maintains no secondary index.
CREATE INDEX ledger_listed ON ledger (sid, state, claimed_at) WHERE state IN ('rejected', 'in_doubt', 'accepted');

ALTER TABLE ledger_claims ADD COLUMN result TEXT NOT NULL DEFAULT '';

ALTER TABLE ledger_meta ADD COLUMN round_through INTEGER NOT NULL DEFAULT 0;
