-- oncesync embedded store, migration 19: the key filters of the ledger,
-- persisted (keyfilter.go, docs/PERFORMANCE.md#ledger-growth). Each process
-- used to build a sync's Bloom filter by scanning every key of the sync at its
-- first lookup, a cost linear in the ledger paid by every run. Now each merge
-- adds the keys it writes to the filter of their part in the same
-- transaction, and a process reads the parts instead of the keys.
--
-- A sync's keys are split into 257 parts: part p < 256 holds the hex keys
-- (stored as 32-byte BLOBs) whose first byte is p, part 256 the TEXT keys.
-- A row (sid, part) holds every key of that part present in ledger,
-- ledger_done or ledger_claims (deleted keys may stay in it: a false positive
-- only); n counts the keys it was built from and those added since. A part with no row
-- is built from a scan of its key range by whoever needs it: the table starts
-- empty, and a store upgraded to this version builds its parts as merges
-- touch them (the first merge of a sync scans once, as every run used to).

CREATE TABLE ledger_filter (
    sid  INTEGER NOT NULL,
    part INTEGER NOT NULL CHECK (part BETWEEN 0 AND 256),
    n    INTEGER NOT NULL,
    bits BLOB    NOT NULL,
    PRIMARY KEY (sid, part)
) STRICT;
