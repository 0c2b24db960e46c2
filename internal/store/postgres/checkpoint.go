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
// instead of three): the fenced cursor (as SaveCursor), the run (as
// UpdateRun) and, when p.Page is set, the page's timeline row (as
// RecordRunPage). On any error (ErrFenced, ErrNotFound, an invalid argument)
// the transaction rolls back and nothing is written. The cursor goes first:
// its fence CTE locks the sync's fences row, so a newer holder's fence cannot
// be registered between the check and the commit.
func (s *Store) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := checkFenceArgs(p.Cursor.SyncID, p.Cursor.Fence); err != nil {
		return err
	}
	if err := validRunUpdate(p.Run); err != nil {
		return err
	}
	if p.Page != nil {
		if err := validRunPage(*p.Page); err != nil {
			return err
		}
	}
	return s.tx(ctx, "checkpoint", func(tx pgx.Tx) error {
		if err := s.saveCursor(ctx, tx, p.Cursor); err != nil {
			return err
		}
		if err := s.updateRun(ctx, tx, p.Run); err != nil {
			return err
		}
		if p.Page == nil {
			return nil
		}
		return s.recordRunPage(ctx, tx, *p.Page)
	})
}
