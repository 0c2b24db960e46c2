package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/store"
)

// querier is a pool or a transaction: the fenced and run writes run on the
// pool as one statement each, or together in Checkpoint's transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Checkpoint saves one page's checkpoint in one transaction (one commit
// instead of five): when p.Lease is set, the lease renewal (as LeaseRenew),
// then, when p.Finish is set, the page's outcomes (as LedgerFinish), the
// fenced cursor (as SaveCursor), the run (as UpdateRun) and, when
// p.Page is set, the page's timeline row (as RecordRunPage). On any error
// (ErrLeaseLost, ErrFenced, ErrNotFound, an invalid argument) the transaction
// rolls back and nothing is written. The renewal, when set, goes first: it
// locks the sync's fences row and then its leases row, the order
// LeaseAcquire takes them in (the cursor's fence CTE then finds the fences
// row already locked), so a checkpoint and a concurrent acquire cannot
// deadlock. Either way the fences row is share-locked before the cursor is
// written, so a newer holder's fence cannot be registered between the check
// and the commit, while the holder's own claims go on beside it.
func (s *Store) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := invalid(p.Check()); err != nil {
		return err
	}
	return s.tx(ctx, "checkpoint", func(tx pgx.Tx) error {
		if p.Lease != nil {
			if _, err := s.leaseRenew(ctx, tx, p.Cursor.SyncID, p.Lease.Token, p.Lease.TTL); err != nil {
				return err
			}
		}
		if p.Finish != nil {
			if err := s.ledgerFinish(ctx, tx, p.FinishParams()); err != nil {
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
}
