package sqlite

import (
	"context"
	"database/sql"

	"github.com/oncesync/oncesync/internal/store"
)

// Checkpoint saves one page's checkpoint in one write transaction (one WAL
// commit instead of five): when p.Lease is set, the lease renewal (as
// LeaseRenew) first, then, when p.Finish is set, the page's marks (as
// LedgerFinish), the fenced cursor (as SaveCursor), the run (as UpdateRun)
// and, when p.Page is set, the page's timeline row (as RecordRunPage). On
// any error (ErrLeaseLost, ErrFenced, ErrNotFound, an invalid argument) the
// transaction rolls back and nothing is written. The commit is lazy (see
// durability): a checkpoint lost in a power cut leaves an older cursor (and
// the page's marks, if any: its keys stay pending, in doubt), and the pages
// after it are replayed from the ledger.
func (s *Store) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := invalid(p.Check()); err != nil {
		return err
	}
	var (
		fin *pendingFinish
		rec *logRecord
	)
	if p.Finish != nil {
		var err error
		if fin, err = newFinish(p.FinishParams()); err != nil {
			return err
		}
	}
	err := s.writeLazy(ctx, "checkpoint", func(tx *sql.Tx) error {
		if p.Lease != nil {
			if _, err := s.leaseRenew(ctx, tx, p.Cursor.SyncID, p.Lease.Token, p.Lease.TTL); err != nil {
				return err
			}
		}
		if fin != nil {
			var err error
			if rec, err = s.appendFencedTx(ctx, tx, p.Cursor.SyncID, p.Cursor.Fence, fin.mks, fin.live, fin.build); err != nil {
				return err
			}
			if err := s.putSettled(ctx, tx, p.Cursor.SyncID, p.Cursor.RunID, settlements(p.FinishParams())); err != nil {
				return err
			}
		}
		if err := s.saveCursor(ctx, tx, p.Cursor); err != nil {
			return err
		}
		if err := s.updateRun(ctx, tx, p.Run); err != nil {
			return err
		}
		if p.Page != nil {
			if err := s.recordRunPage(ctx, tx, *p.Page); err != nil {
				return err
			}
		}
		for _, pg := range p.MorePages {
			if err := s.recordRunPage(ctx, tx, pg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || rec == nil {
		return err
	}
	s.mem.applyOwn(rec)
	s.afterFinish(ctx)
	return nil
}
