package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/oncesync/oncesync/internal/store"
)

// checkFence is the fencing rule of every fenced write, run inside the write's
// transaction: the write is refused with ErrFenced when fence is below the
// sync's registered fence; otherwise fence becomes (or stays) the registered
// fence, so once a write under fence F is accepted no write under a lower
// fence ever is. The caller rolls back on error, so a refused write leaves
// nothing behind.
func checkFence(ctx context.Context, tx *sql.Tx, syncID string, fence int64) error {
	if syncID == "" || fence < 1 {
		return checkFenceWith(ctx, nil, syncID, fence)
	}
	return checkFenceWith(ctx, tx.QueryRowContext(ctx, sqlFenceCheck, syncID, fence), syncID, fence)
}

// sqlFenceCheck registers fence ?2 for sync ?1 unless a higher one is, and
// returns the registered fence.
const sqlFenceCheck = `INSERT INTO fences (sync_id, fence) VALUES (?1, ?2)
		ON CONFLICT (sync_id) DO UPDATE SET fence = max(fences.fence, excluded.fence)
		RETURNING fence`

// checkFence is checkFence with the store's prepared statement.
func (s *Store) checkFence(ctx context.Context, tx *sql.Tx, syncID string, fence int64) error {
	if err := checkFenceArgs(syncID, fence); err != nil {
		return err
	}
	return checkFenceWith(ctx, tx.StmtContext(ctx, s.stmts.fenceCheck).QueryRowContext(ctx, syncID, fence), syncID, fence)
}

// checkFenceArgs refuses the arguments no fenced write accepts.
func checkFenceArgs(syncID string, fence int64) error {
	return invalid(store.CheckFence(syncID, fence))
}

func checkFenceWith(ctx context.Context, row *sql.Row, syncID string, fence int64) error {
	if err := checkFenceArgs(syncID, fence); err != nil {
		return err
	}
	var registered int64
	if err := row.Scan(&registered); err != nil {
		return err
	}
	if registered > fence {
		return fencedError(syncID, fence, registered)
	}
	return nil
}

func fencedError(syncID string, fence, registered int64) error {
	return fmt.Errorf("sync %q: fence %d is below the registered fence %d: %w", syncID, fence, registered, store.ErrFenced)
}

// RaiseFence registers fence as the sync's fence if it is not below the
// registered one; ErrFenced if a higher one is already registered.
func (s *Store) RaiseFence(ctx context.Context, syncID string, fence int64) error {
	return s.write(ctx, "raise fence", func(tx *sql.Tx) error {
		return checkFence(ctx, tx, syncID, fence)
	})
}

// PayloadBase returns the sync's payload base, recording print when none is
// (store.Cursors).
func (s *Store) PayloadBase(ctx context.Context, syncID, print string) (string, error) {
	base, found, err := s.GetPayloadBase(ctx, syncID)
	if err != nil || found {
		return base, err
	}
	err = s.write(ctx, "record payload base", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO payload_bases (sync_id, base) VALUES (?, ?) ON CONFLICT (sync_id) DO NOTHING`,
			syncID, print); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT base FROM payload_bases WHERE sync_id = ?`, syncID).Scan(&base)
	})
	return base, err
}

// GetPayloadBase returns the sync's payload base and whether one is
// recorded (store.Cursors).
func (s *Store) GetPayloadBase(ctx context.Context, syncID string) (string, bool, error) {
	var base string
	err := s.r.QueryRowContext(ctx, `SELECT base FROM payload_bases WHERE sync_id = ?`, syncID).Scan(&base)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, s.mapErr("get payload base", err)
	}
	return base, true, nil
}

// GetCursor returns the saved cursor, or a Cursor with only SyncID set if none.
func (s *Store) GetCursor(ctx context.Context, syncID string) (store.Cursor, error) {
	c := store.Cursor{SyncID: syncID}
	var updated int64
	err := s.r.QueryRowContext(ctx, `SELECT value, payload, fence, run_id, updated_at FROM cursors WHERE sync_id = ?`, syncID).
		Scan(&c.Value, &c.Payload, &c.Fence, &c.RunID, &updated)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Cursor{SyncID: syncID}, nil
	case err != nil:
		return store.Cursor{}, s.mapErr("get cursor", err)
	}
	c.UpdatedAt = fromNanos(updated)
	return c, nil
}

const sqlCursorSave = `INSERT INTO cursors (sync_id, value, fence, run_id, updated_at, payload)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6)
			ON CONFLICT (sync_id) DO UPDATE SET value = excluded.value, payload = excluded.payload, fence = excluded.fence,
				run_id = excluded.run_id, updated_at = excluded.updated_at
			WHERE cursors.fence <= excluded.fence`

// SaveCursor writes the cursor if p.Fence is not below the sync's registered
// fence (nor the fence of the saved cursor), else ErrFenced and nothing is
// written.
func (s *Store) SaveCursor(ctx context.Context, p store.SaveCursorParams) error {
	return s.write(ctx, "save cursor", func(tx *sql.Tx) error {
		return s.saveCursor(ctx, tx, p)
	})
}

// saveCursor is SaveCursor inside the caller's write transaction (SaveCursor,
// Checkpoint); on error the caller rolls back.
func (s *Store) saveCursor(ctx context.Context, tx *sql.Tx, p store.SaveCursorParams) error {
	if err := s.checkFence(ctx, tx, p.SyncID, p.Fence); err != nil {
		return err
	}
	res, err := tx.StmtContext(ctx, s.stmts.cursorSave).ExecContext(ctx,
		p.SyncID, p.Value, p.Fence, p.RunID, nanos(s.now()), p.Payload)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		// Only reachable if the cursor row carries a fence the fences
		// table never saw (a hand-edited file): refuse all the same.
		var cur int64
		if err := tx.QueryRowContext(ctx, `SELECT fence FROM cursors WHERE sync_id = ?`, p.SyncID).Scan(&cur); err != nil {
			return err
		}
		return fencedError(p.SyncID, p.Fence, cur)
	}
	return nil
}
