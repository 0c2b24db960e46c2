-- oncesync embedded store, migration 7: the lease of a background merge of
-- the ledger log (ledgermerge.go). A round writes the log into the ledger
-- tables in several short transactions, one key range each, so the write
-- lock is never held for long; merge_owner is the round's token and
-- merge_until its expiry (unix ns). One round at a time across processes;
-- every transaction of a round checks the token and that merged_through has
-- not moved since the round began.

ALTER TABLE ledger_meta ADD COLUMN merge_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE ledger_meta ADD COLUMN merge_until INTEGER NOT NULL DEFAULT 0;
