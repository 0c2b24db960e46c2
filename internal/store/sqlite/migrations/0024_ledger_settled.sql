-- oncesync embedded store, migration 24: how each write in doubt was settled
-- (read back and found landed, sent again, sent again under its idempotency
-- key), by the record's identity, so that every settlement is visible
-- (docs/guide.md#the-ledger-and-its-retention), not only counted. Written in
-- the transaction of the ledger marks that settle the doubt; pruned with the
-- ledger's retention. One row per delivery key: a key settled again keeps
-- its latest.

CREATE TABLE ledger_settled (
    sid      INTEGER NOT NULL,
    key      TEXT    NOT NULL,
    identity TEXT    NOT NULL,
    how      TEXT    NOT NULL,
    run_id   INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    PRIMARY KEY (sid, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX ledger_settled_at ON ledger_settled (sid, at);
