package sqlite

import (
	"context"
	"database/sql"

	"github.com/oncesync/oncesync/internal/store"
)

// Checkpoint saves one page's checkpoint in one write transaction (one WAL
// commit instead of three): the fenced cursor (as SaveCursor), the run (as
// UpdateRun) and, when p.Page is set, the page's timeline row (as
// RecordRunPage). On any error (ErrFenced, ErrNotFound, an invalid argument)
// the transaction rolls back and nothing is written.
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
	return s.write(ctx, "checkpoint", func(tx *sql.Tx) error {
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
