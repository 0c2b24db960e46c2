-- oncesync embedded store, migration 22: each sync's payload base, the destination
-- settings that shape every record beyond its mapped values (Brevo's
-- list_ids, Klaviyo's list_id) as first recorded for the sync. A slot's last
-- delivered state under those settings is its mapped values' hash alone;
-- under any other settings the hash includes them, so a change of them sends
-- every record again and a change back does too
-- (docs/guide.md#changing-a-sync). Written once, never updated.

CREATE TABLE payload_bases (
    sync_id TEXT NOT NULL PRIMARY KEY,
    base    TEXT NOT NULL
);
