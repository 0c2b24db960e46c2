package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// Settlements (store.LedgerFinish.Settled): how each write in doubt was
// settled, written in the transaction of the marks that settle it. They are
// rare (a write's answer lost, a run killed mid-page), so a plain table.

const sqlSettledPut = `INSERT INTO ledger_settled (sid, key, identity, how, run_id, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
	ON CONFLICT (sid, key) DO UPDATE SET identity = excluded.identity, how = excluded.how, run_id = excluded.run_id, at = excluded.at`

// settlements is p's entries that carry a Settlement.
func settlements(p store.LedgerFinishParams) []store.LedgerFinish {
	var out []store.LedgerFinish
	for _, e := range p.Entries {
		if e.Settled != nil {
			out = append(out, e)
		}
	}
	return out
}

// putSettled records es's settlements in tx (the caller has checked the
// fence in it).
func (s *Store) putSettled(ctx context.Context, tx *sql.Tx, syncID string, runID int64, es []store.LedgerFinish) error {
	if len(es) == 0 {
		return nil
	}
	sid, err := s.ledgerSID(ctx, tx, syncID)
	if err != nil {
		return err
	}
	at := nanos(s.now())
	for _, e := range es {
		if _, err := tx.ExecContext(ctx, sqlSettledPut, sid, e.Key, e.Settled.Identity, e.Settled.How, runID, at); err != nil {
			return err
		}
	}
	return nil
}

// LedgerSettled returns syncID's settlements, newest first.
func (s *Store) LedgerSettled(ctx context.Context, syncID string, limit int) ([]store.SettledEntry, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT key, identity, how, run_id, at FROM ledger_settled
		WHERE sid = `+sqlSID+` ORDER BY at DESC, key LIMIT ?2`, syncID, limitArg(limit))
	if err != nil {
		return nil, s.mapErr("ledger settled", err)
	}
	defer rows.Close()
	out := []store.SettledEntry{}
	for rows.Next() {
		var (
			e  store.SettledEntry
			at int64
		)
		if err := rows.Scan(&e.Key, &e.Identity, &e.How, &e.RunID, &at); err != nil {
			return nil, s.mapErr("ledger settled", err)
		}
		e.At = fromNanos(at)
		out = append(out, e)
	}
	return out, s.mapErr("ledger settled", rows.Err())
}

// pruneSettled deletes the settlements recorded before before.
func (s *Store) pruneSettled(ctx context.Context, before time.Time) error {
	return s.write(ctx, "ledger prune", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ledger_settled WHERE at < ?1`, nanos(before))
		return err
	})
}
