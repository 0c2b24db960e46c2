-- oncesync embedded store, migration 23: a run's skipped records, those its
-- sync's write_mode (create, update) left as the destination had them. Until
-- now they were counted in n_written, though the destination wrote nothing
-- (docs/guide.md#write-modes).

ALTER TABLE runs ADD COLUMN n_skipped INTEGER NOT NULL DEFAULT 0;
