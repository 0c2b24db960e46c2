package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

const runColumns = `id, sync_id, state, attempt, fence, started_at, finished_at, failure_code, failure_detail,
	n_read, n_written, n_replayed, n_rejected, n_in_doubt, n_settled, n_pages, n_requests, n_skipped`

func scanRun(sc rowScanner) (store.Run, error) {
	var (
		r        store.Run
		state    string
		started  int64
		finished sql.NullInt64
	)
	if err := sc.Scan(&r.ID, &r.SyncID, &state, &r.Attempt, &r.Fence, &started, &finished, &r.FailureCode, &r.FailureDetail,
		&r.Read, &r.Written, &r.Replayed, &r.Rejected, &r.InDoubt, &r.Settled, &r.Pages, &r.Requests, &r.Skipped); err != nil {
		return store.Run{}, err
	}
	r.State = store.RunState(state)
	r.StartedAt = fromNanos(started)
	r.FinishedAt = fromNullNanos(finished)
	return r, nil
}

// InsertRun creates a run stamped StartedAt=now (an empty State means queued).
// A run inserted in a final state (an enqueue-time failure, a skip) is
// finished at once.
func (s *Store) InsertRun(ctx context.Context, p store.InsertRunParams) (store.Run, error) {
	if p.SyncID == "" {
		return store.Run{}, invalidf("run sync id is empty")
	}
	if p.State == "" {
		p.State = store.RunQueued
	}
	if !p.State.Valid() {
		return store.Run{}, invalidf("run state %q", p.State)
	}
	var out store.Run
	err := s.write(ctx, "insert run", func(tx *sql.Tx) error {
		now := s.now()
		finished := sql.NullInt64{}
		if p.State.Finished() {
			finished = nullNanos(now)
		}
		row := tx.QueryRowContext(ctx, `INSERT INTO runs (sync_id, state, attempt, started_at, finished_at, failure_code, failure_detail)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING `+runColumns,
			p.SyncID, string(p.State), p.Attempt, nanos(now), finished, p.FailureCode, p.Detail)
		var err error
		out, err = scanRun(row)
		return err
	})
	return out, err
}

const sqlRunUpdate = `UPDATE runs SET
				state = ?1, attempt = ?2, fence = ?3,
				started_at = coalesce(?4, started_at),
				finished_at = CASE
					WHEN ?5 IS NOT NULL THEN ?5
					WHEN ?6 THEN coalesce(finished_at, ?7)
					ELSE NULL END,
				failure_code = ?8, failure_detail = ?9,
				n_read = ?10, n_written = ?11, n_replayed = ?12, n_rejected = ?13,
				n_in_doubt = ?14, n_settled = ?15, n_pages = ?16, n_requests = ?17, n_skipped = ?18
			WHERE id = ?19`

// UpdateRun saves the run's state, attempt, fence, counters and failure
// fields, and StartedAt when it is set. FinishedAt is saved when set;
// otherwise a run moving to a final state is stamped finished now (once), and
// a run in a non-final state has none.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) error {
	if err := validRunUpdate(r); err != nil {
		return err
	}
	return s.write(ctx, "update run", func(tx *sql.Tx) error {
		return s.updateRun(ctx, tx, r)
	})
}

// CloseRun saves r if the stored run is still running (store.Runs).
func (s *Store) CloseRun(ctx context.Context, r store.Run) (bool, error) {
	if err := validRunUpdate(r); err != nil {
		return false, err
	}
	closed := false
	err := s.write(ctx, "close run", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlRunUpdate+` AND state = 'running'`, r.UpdateArgs(s.now())...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if closed = n > 0; closed {
			return nil
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = ?`, r.ID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %d: %w", r.ID, store.ErrNotFound)
		} else if err != nil {
			return err
		}
		return nil
	})
	return closed, err
}

// validRunUpdate refuses a run UpdateRun cannot save, before any transaction.
func validRunUpdate(r store.Run) error { return invalid(r.CheckUpdate()) }

// updateRun is UpdateRun inside the caller's write transaction (UpdateRun,
// Checkpoint), r already checked by validRunUpdate; ErrNotFound when no run
// has r.ID.
func (s *Store) updateRun(ctx context.Context, tx *sql.Tx, r store.Run) error {
	res, err := tx.StmtContext(ctx, s.stmts.runUpdate).ExecContext(ctx, r.UpdateArgs(s.now())...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("run %d: %w", r.ID, store.ErrNotFound)
	}
	return nil
}

// GetRun returns a run, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (store.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, fmt.Errorf("run %d: %w", id, store.ErrNotFound)
	}
	return r, s.mapErr("get run", err)
}

// ListRuns returns a sync's runs, newest first; limit <= 0 returns all.
func (s *Store) ListRuns(ctx context.Context, syncID string, limit int) ([]store.Run, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE sync_id = ? ORDER BY id DESC LIMIT ?`,
		syncID, limitArg(limit))
	if err != nil {
		return nil, s.mapErr("list runs", err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.mapErr("list runs", err)
		}
		out = append(out, r)
	}
	return out, s.mapErr("list runs", rows.Err())
}

// ListRunsByState returns the runs of every sync in state, oldest first;
// limit <= 0 returns all.
func (s *Store) ListRunsByState(ctx context.Context, state store.RunState, limit int) ([]store.Run, error) {
	if !state.Valid() {
		return nil, invalidf("run state %q", state)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM runs WHERE state = ? ORDER BY id LIMIT ?`,
		string(state), limitArg(limit))
	if err != nil {
		return nil, s.mapErr("list runs by state", err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.mapErr("list runs by state", err)
		}
		out = append(out, r)
	}
	return out, s.mapErr("list runs by state", rows.Err())
}

// Run prune statements (store.Runs.PruneRuns, docs/guide.md#the-ledger-and-its-retention).
// Each seeks on runs_sync_id_id or runs_sync_succeeded.
const (
	sqlRunsNextSync = `SELECT sync_id FROM runs WHERE sync_id > ? ORDER BY sync_id LIMIT 1`
	// sqlRunsKeepFrom is the oldest of the sync's newest ?2 runs.
	sqlRunsKeepFrom = `SELECT id FROM runs WHERE sync_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2 - 1`
	sqlRunsLastOK   = `SELECT coalesce((SELECT id FROM runs WHERE sync_id = ?1 AND state = 'succeeded'
		ORDER BY finished_at DESC LIMIT 1), 0)`
	sqlRunsPrunable = `SELECT id FROM runs WHERE sync_id = ?1 AND id < ?2 AND id <> ?3
		AND state NOT IN ('queued', 'running') AND coalesce(finished_at, started_at) < ?4 ORDER BY id LIMIT ?5`
)

// PruneRuns implements store.Runs (store.RunsPruner.Walk), one write
// transaction per chunk.
func (s *Store) PruneRuns(ctx context.Context, before time.Time) (int64, error) {
	return store.RunsPruner{
		Next: func(after string) (string, bool, error) {
			var syncID string
			err := s.r.QueryRowContext(ctx, sqlRunsNextSync, after).Scan(&syncID)
			if errors.Is(err, sql.ErrNoRows) {
				return "", false, nil
			}
			return syncID, err == nil, s.mapErr("prune runs", err)
		},
		Delete: func(syncID string) (n int64, err error) {
			err = s.write(ctx, "prune runs", func(tx *sql.Tx) error {
				var keepFrom, lastOK int64
				err := tx.QueryRowContext(ctx, sqlRunsKeepFrom, syncID, store.KeepRunsPerSync).Scan(&keepFrom)
				if errors.Is(err, sql.ErrNoRows) {
					return nil // no more runs than are kept
				} else if err != nil {
					return err
				}
				if err := tx.QueryRowContext(ctx, sqlRunsLastOK, syncID).Scan(&lastOK); err != nil {
					return err
				}
				args := []any{syncID, keepFrom, lastOK, nanos(before), store.PruneRunsChunk}
				if _, err := tx.ExecContext(ctx, `DELETE FROM run_pages WHERE run_id IN (`+sqlRunsPrunable+`)`, args...); err != nil {
					return err
				}
				res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id IN (`+sqlRunsPrunable+`)`, args...)
				if err != nil {
					return err
				}
				n, err = res.RowsAffected()
				return err
			})
			if err != nil {
				n = 0 // rolled back
			}
			return n, err
		},
	}.Walk()
}
