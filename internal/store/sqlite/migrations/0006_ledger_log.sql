-- oncesync embedded store, migration 6: the ledger log (docs/PERFORMANCE.md,
-- "Ledger log").
--
-- Ledger keys are hashes, so writing a page's entries into the ledger B-tree
-- rewrites about one random leaf per record, at every claim and finish. With
-- this migration a claim or a finish appends ONE row to ledger_log (the
-- page's keys and outcomes, encoded in body), which writes a few sequential
-- pages; every process folds the log into memory to answer lookups, and the
-- log is merged into ledger / ledger_claims many thousand entries at a time,
-- sorted by key, so each leaf is written once per merge instead of once per
-- page. A key's newest log entry overrides ledger and ledger_claims.
--
-- ledger_meta.merged_through is the last log seq merged (and deleted from
-- the log); generation counts changes to ledger and ledger_claims (merges,
-- touches, prunes), so a process can tell whether what it read from them is
-- still current.

CREATE TABLE ledger_log (
    seq    INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sid    INTEGER NOT NULL,
    kind   INTEGER NOT NULL CHECK (kind IN (1, 2)), -- 1 claim, 2 finish
    fence  INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    at     INTEGER NOT NULL,
    n      INTEGER NOT NULL, -- entries in body
    body   BLOB    NOT NULL
) STRICT;

CREATE TABLE ledger_meta (
    id             INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    merged_through INTEGER NOT NULL,
    generation     INTEGER NOT NULL
) STRICT;

INSERT INTO ledger_meta (id, merged_through, generation) VALUES (1, 0, 0);
