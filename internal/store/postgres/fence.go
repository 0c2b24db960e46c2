package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
)

// fenceCTE is the fencing rule of every fenced write, as the first CTEs of
// the write's own statement ($1 sync id, $2 the write's fence). It returns
// the registered fence as f; the write's CTE selects FROM f WHERE f.fence <=
// $2, so under a stale fence it writes nothing, and the caller reports
// ErrFenced when the returned fence is above $2.
//
// The sync's fences row is share-locked (f0) for the rest of the
// transaction: a fence is only ever raised by an update of that row, which
// waits until every fenced write holding the lock has committed, so no newer
// fence can be registered between a write's check and its commit. A share
// lock does not make one holder's fenced writes wait for each other (its
// claim of the next page need not wait for the checkpoint of the last one;
// an exclusive lock here made it, docs/PERFORMANCE.md#the-fences-row-is-share-locked).
// Only a write under a fence above the registered one (or with no row yet)
// registers it (fr), upgrading its lock; a locking read that waited for an
// update returns the newest row version, so a fence registered by a
// transaction that committed meanwhile is seen.
const fenceCTE = `f0 AS MATERIALIZED (
		SELECT fence FROM fences WHERE sync_id = $1::text FOR SHARE
	),
	fr AS (
		INSERT INTO fences AS fe (sync_id, fence)
		SELECT $1::text, $2::bigint WHERE NOT EXISTS (SELECT FROM f0 WHERE f0.fence >= $2::bigint)
		ON CONFLICT (sync_id) DO UPDATE SET fence = greatest(fe.fence, excluded.fence)
		RETURNING fe.fence
	),
	f AS MATERIALIZED (
		SELECT fence FROM fr UNION ALL SELECT fence FROM f0 WHERE NOT EXISTS (SELECT FROM fr)
	)`

func checkFenceArgs(syncID string, fence int64) error {
	return invalid(store.CheckFence(syncID, fence))
}

func fencedError(syncID string, fence, registered int64) error {
	return fmt.Errorf("sync %q: fence %d is below the registered fence %d: %w", syncID, fence, registered, store.ErrFenced)
}

// RaiseFence registers fence as the sync's fence if it is not below the
// registered one; ErrFenced if a higher one is already registered.
func (s *Store) RaiseFence(ctx context.Context, syncID string, fence int64) error {
	if err := checkFenceArgs(syncID, fence); err != nil {
		return err
	}
	var registered int64
	if err := s.pool.QueryRow(ctx, `WITH `+fenceCTE+` SELECT fence FROM f`, syncID, fence).Scan(&registered); err != nil {
		return mapErr("raise fence", err)
	}
	if registered > fence {
		return fencedError(syncID, fence, registered)
	}
	return nil
}

// PayloadBase returns the sync's payload base, recording print when none is
// (store.Cursors).
func (s *Store) PayloadBase(ctx context.Context, syncID, print string) (string, error) {
	var base string
	for range 2 {
		err := s.pool.QueryRow(ctx, `WITH ins AS (
				INSERT INTO payload_bases (sync_id, base) VALUES ($1, $2) ON CONFLICT (sync_id) DO NOTHING RETURNING base)
			SELECT base FROM ins UNION ALL SELECT base FROM payload_bases WHERE sync_id = $1 LIMIT 1`, syncID, print).Scan(&base)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // a concurrent insert committed after this statement's snapshot: read it
		}
		if err != nil {
			return "", mapErr("payload base", err)
		}
		return base, nil
	}
	return "", mapErr("payload base", pgx.ErrNoRows)
}

// GetPayloadBase returns the sync's payload base and whether one is
// recorded (store.Cursors).
func (s *Store) GetPayloadBase(ctx context.Context, syncID string) (string, bool, error) {
	var base string
	err := s.pool.QueryRow(ctx, `SELECT base FROM payload_bases WHERE sync_id = $1`, syncID).Scan(&base)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, mapErr("get payload base", err)
	}
	return base, true, nil
}

// GetCursor returns the saved cursor, or a Cursor with only SyncID set if none.
func (s *Store) GetCursor(ctx context.Context, syncID string) (store.Cursor, error) {
	c := store.Cursor{SyncID: syncID}
	var updated int64
	err := s.pool.QueryRow(ctx, `SELECT value, payload, fence, run_id, updated_at FROM cursors WHERE sync_id = $1`, syncID).
		Scan(&c.Value, &c.Payload, &c.Fence, &c.RunID, &updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Cursor{SyncID: syncID}, nil
	case err != nil:
		return store.Cursor{}, mapErr("get cursor", err)
	}
	c.UpdatedAt = fromNanos(updated)
	return c, nil
}

// sqlSaveCursor is a fenced cursor upsert in one statement. It returns the
// registered fence, whether the cursor was written, and the saved cursor's
// fence as it was before the statement (for the error message).
const sqlSaveCursor = `WITH ` + fenceCTE + `,
	c AS (
		INSERT INTO cursors AS c (sync_id, value, fence, run_id, updated_at, payload)
		SELECT $1::text, $3::text, $2::bigint, $4::bigint, $5::bigint, $6::text FROM f WHERE f.fence <= $2::bigint
		ON CONFLICT (sync_id) DO UPDATE SET value = excluded.value, payload = excluded.payload, fence = excluded.fence,
			run_id = excluded.run_id, updated_at = excluded.updated_at
		WHERE c.fence <= excluded.fence
		RETURNING 1
	)
	SELECT f.fence, EXISTS (SELECT FROM c), coalesce((SELECT fence FROM cursors WHERE sync_id = $1::text), 0) FROM f`

// SaveCursor writes the cursor if p.Fence is not below the sync's registered
// fence (nor the fence of the saved cursor), else ErrFenced and nothing is
// written. Check and write are one statement.
func (s *Store) SaveCursor(ctx context.Context, p store.SaveCursorParams) error {
	if err := checkFenceArgs(p.SyncID, p.Fence); err != nil {
		return err
	}
	return mapErr("save cursor", s.saveCursor(ctx, s.pool, p))
}

// saveCursor is SaveCursor on q: the pool (one statement, its own
// transaction) or the caller's transaction (Checkpoint), p already checked by
// checkFenceArgs. Errors are the driver's, unmapped.
func (s *Store) saveCursor(ctx context.Context, q querier, p store.SaveCursorParams) error {
	return checkCursor(p, q.QueryRow(ctx, sqlSaveCursor, s.cursorArgs(p)...))
}

// cursorArgs are sqlSaveCursor's arguments for p.
func (s *Store) cursorArgs(p store.SaveCursorParams) []any {
	return []any{p.SyncID, p.Fence, p.Value, p.RunID, nanos(s.now()), p.Payload}
}

// checkCursor reads sqlSaveCursor's answer: ErrFenced when the cursor was
// not written. Errors are the driver's, unmapped.
func checkCursor(p store.SaveCursorParams, row pgx.Row) error {
	var (
		registered, cur int64
		written         bool
	)
	if err := row.Scan(&registered, &written, &cur); err != nil {
		return err
	}
	switch {
	case registered > p.Fence:
		return fencedError(p.SyncID, p.Fence, registered)
	case !written:
		// Only reachable if the cursor row carries a fence the fences table
		// never saw (a hand-edited row): refuse all the same.
		return fencedError(p.SyncID, p.Fence, cur)
	}
	return nil
}
