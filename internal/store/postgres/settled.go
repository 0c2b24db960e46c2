package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
)

// Settlements (store.LedgerFinish.Settled): how each write in doubt was
// settled, written in the transaction of the marks that settle it. They are
// rare (a write's answer lost, a run killed mid-page), so a plain table.

// sqlSettledPut records settlements: $2, $3 and $4 are the keys, identities
// and hows, one per settlement.
const sqlSettledPut = `INSERT INTO ledger_settled (sync_id, key, identity, how, run_id, at)
	SELECT $1, k, i, h, $5, $6 FROM unnest($2::text[], $3::text[], $4::text[]) AS t(k, i, h)
	ON CONFLICT (sync_id, key) DO UPDATE SET identity = excluded.identity, how = excluded.how, run_id = excluded.run_id, at = excluded.at`

// settledArgs are sqlSettledPut's arguments for p's settlements; nil when
// it has none. A key given twice keeps its last, as a finish does.
func (s *Store) settledArgs(p store.LedgerFinishParams) []any {
	var (
		index           map[string]int // made at the first settlement: most finishes have none
		keys, ids, hows []string
	)
	for _, e := range p.Entries {
		if e.Settled == nil {
			continue
		}
		if index == nil {
			index = map[string]int{}
		}
		if i, dup := index[e.Key]; dup {
			ids[i], hows[i] = e.Settled.Identity, e.Settled.How
			continue
		}
		index[e.Key] = len(keys)
		keys, ids, hows = append(keys, e.Key), append(ids, e.Settled.Identity), append(hows, e.Settled.How)
	}
	if len(keys) == 0 {
		return nil
	}
	return []any{p.SyncID, keys, ids, hows, p.RunID, nanos(s.now())}
}

// LedgerSettled returns syncID's settlements, newest first.
func (s *Store) LedgerSettled(ctx context.Context, syncID string, limit int) ([]store.SettledEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, identity, how, run_id, at FROM ledger_settled
		WHERE sync_id = $1 ORDER BY at DESC, key LIMIT $2`, syncID, limitArg(limit))
	if err != nil {
		return nil, mapErr("ledger settled", err)
	}
	defer rows.Close()
	out := []store.SettledEntry{}
	for rows.Next() {
		var (
			e  store.SettledEntry
			at int64
		)
		if err := rows.Scan(&e.Key, &e.Identity, &e.How, &e.RunID, &at); err != nil {
			return nil, mapErr("ledger settled", err)
		}
		e.At = fromNanos(at)
		out = append(out, e)
	}
	return out, mapErr("ledger settled", rows.Err())
}

// pruneSettled deletes the settlements recorded before before.
func (s *Store) pruneSettled(ctx context.Context, before time.Time) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM ledger_settled WHERE at < $1`, nanos(before))
	return mapErr("ledger prune", err)
}

// ledgerFinishSettled is LedgerFinish with settlements: the marks and the
// settlements in one transaction.
func (s *Store) ledgerFinishSettled(ctx context.Context, p store.LedgerFinishParams, settled []any, off time.Duration) error {
	return s.tx(ctx, "ledger finish", func(tx pgx.Tx) error {
		if err := s.ledgerFinish(ctx, tx, p, off); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sqlSettledPut, settled...)
		return err
	})
}
