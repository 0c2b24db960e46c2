-- oncesync PostgreSQL store, migration 20: pending entries are indexed by
-- sync. Every run lists its sync's pending entries when it starts (what an
-- earlier run left in flight), and no index served that: the primary key
-- begins with the key, ledger_listed holds other states. Each run start
-- read the whole ledger, every sync's rows (docs/PERFORMANCE.md#the-ledger-at-10-million-entries-2026-12-02-fifth-session).
-- Pending entries are the claims in flight, so the index stays small, and a
-- page's claims share their claimed_at: they land on one leaf.

CREATE INDEX ledger_pending ON ledger (sync_id, claimed_at) WHERE state = 'pending';
