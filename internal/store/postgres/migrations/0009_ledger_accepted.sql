-- oncesync PostgreSQL store, migration 9: accepted entries (SPEC §4,
-- store.LedgerAccepted). Same number as the SQLite migration of the same
-- change. A destination took the delivery for processing later (Result names
-- the process); accepted entries are listed (polled) like rejected and
-- in-doubt ones, so the partial index is rebuilt with them (renamed: it no
-- longer holds problems only). Released keys are deleted by the finish and
-- need no state; a claim's Result lives in the result column it has.

ALTER TABLE ledger DROP CONSTRAINT ledger_state_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_state_check
    CHECK (state IN ('pending', 'complete', 'rejected', 'in_doubt', 'accepted'));

DROP INDEX ledger_problems;
CREATE INDEX ledger_listed ON ledger (sync_id, state, claimed_at) WHERE state IN ('rejected', 'in_doubt', 'accepted');
