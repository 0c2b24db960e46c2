package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/store"
)

// querier is a pool or a transaction: the fenced and run writes run on the
// pool as one statement each, or together in a transaction.
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
//
// The writes go as one pipelined batch, BEGIN included when there is no
// renewal, and the COMMIT is sent only once every answer was checked in
// order: two round trips (a renewal adds its own three), not seven, each of
// which is a wake-up of a server process that waits for a core on a busy
// machine (docs/PERFORMANCE.md#pipelined-checkpoints).
// A refusal found in an answer rolls the whole transaction back, as before;
// the commit is synchronous, as before.
func (s *Store) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := invalid(p.Check()); err != nil {
		return err
	}
	err := s.checkpoint(ctx, p)
	if isUniqueViolation(err) && anyAbsent(p.Finish) {
		// An entry said to be absent was present after all: the
		// transaction rolled back; write it again with an upsert.
		p.Finish = withoutAbsent(p.FinishParams()).Entries
		err = s.checkpoint(ctx, p)
	}
	return err
}

func (s *Store) checkpoint(ctx context.Context, p store.CheckpointParams) error {
	b := &pgx.Batch{}
	if p.Lease == nil {
		b.BeginTx(pgx.TxOptions{})
	}
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return err
	}
	if err := s.queueCheckpoint(b, p, off); err != nil {
		return err
	}
	if p.Lease != nil {
		return s.tx(ctx, "checkpoint", func(tx pgx.Tx) error {
			if _, err := s.leaseRenew(ctx, tx, p.Cursor.SyncID, p.Lease.Token, p.Lease.TTL); err != nil {
				return err
			}
			return tx.SendBatch(ctx, b).Close()
		})
	}
	br := s.pool.SendBatch(ctx, b)
	err = br.Close()
	tx := br.Tx()
	if err != nil {
		_ = tx.Rollback(ctx)
		return mapErr("checkpoint", err)
	}
	return mapErr("checkpoint", tx.Commit(ctx))
}

// queueCheckpoint queues p's writes (all but the renewal) on b, each with
// the check of its answer; it refuses an invalid p before queueing anything
// that could be sent.
func (s *Store) queueCheckpoint(b *pgx.Batch, p store.CheckpointParams, off time.Duration) error {
	if p.Finish != nil {
		args, check, err := s.finishStmt(p.FinishParams(), off)
		if err != nil {
			return err
		}
		b.Queue(sqlLedgerFinish, args...).QueryRow(check)
		if settled := s.settledArgs(p.FinishParams()); settled != nil {
			b.Queue(sqlSettledPut, settled...)
		}
	}
	b.Queue(sqlSaveCursor, s.cursorArgs(p.Cursor)...).QueryRow(func(row pgx.Row) error { return checkCursor(p.Cursor, row) })
	b.Queue(sqlRunUpdate, s.runArgs(p.Run, off)...).Exec(func(tag pgconn.CommandTag) error { return checkRunUpdated(p.Run, tag) })
	if p.Page != nil {
		b.Queue(sqlRunPagePut, s.runPageArgs(*p.Page)...)
	}
	for _, pg := range p.MorePages {
		b.Queue(sqlRunPagePut, s.runPageArgs(pg)...)
	}
	return nil
}
