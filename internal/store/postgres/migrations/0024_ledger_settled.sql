-- oncesync PostgreSQL store, migration 24: how each write in doubt was
-- settled (read back and found landed, sent again, sent again under its
-- idempotency key), by the record's identity, so that every settlement is
-- visible (docs/guide.md#the-ledger-and-its-retention), not only counted.
-- Written in the transaction of the ledger marks that settle the doubt;
-- pruned with the ledger's retention. One row per delivery key: a key
-- settled again keeps its latest. Times are unix nanoseconds.

CREATE TABLE ledger_settled (
    sync_id  text   NOT NULL,
    key      text   NOT NULL,
    identity text   NOT NULL,
    how      text   NOT NULL,
    run_id   bigint NOT NULL,
    at       bigint NOT NULL,
    PRIMARY KEY (sync_id, key)
);

CREATE INDEX ledger_settled_at ON ledger_settled (sync_id, at);
