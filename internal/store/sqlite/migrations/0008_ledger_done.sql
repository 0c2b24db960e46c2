-- oncesync embedded store, migration 8: complete ledger entries in a compact
-- table. A merge writes most keys as complete; ledger_done holds each one as
-- its key, its last-seen time (touch, prune) and one value blob (fence, run,
-- attempts, claim and completion times, result, message: ledgerdone.go),
-- four columns instead of eleven, which halves the cost of the upserts that
-- dominate a merge (docs/PERFORMANCE.md). ledger keeps rejected and in_doubt
-- entries, and the complete entries written before this migration (nothing
-- is moved: every reader reads both tables, and a merge that writes a key
-- drops its row from the others, so a key is in at most one table).

CREATE TABLE ledger_done (
    sid     INTEGER NOT NULL,
    key     ANY     NOT NULL,
    seen_at INTEGER NOT NULL,
    v       BLOB    NOT NULL,
    PRIMARY KEY (sid, key)
) STRICT, WITHOUT ROWID;
