-- oncesync PostgreSQL store, migration 21: a cursor remembers what the records
-- it was read with became at the destination (the mapping, the identity, the
-- source read: store.Cursor.Payload). A run whose sync's payload differs reads
-- the source from its start, so a mapping changed after a keyset source's
-- cursor moved on still reaches every row (docs/guide.md#changing-a-sync).
-- '' is a cursor saved before this migration: kept as it is.

ALTER TABLE cursors ADD COLUMN payload TEXT NOT NULL DEFAULT '';
