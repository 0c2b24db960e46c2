package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/store"
)

const runColumns = `id, sync_id, state, attempt, fence, started_at, finished_at, failure_code, failure_detail,
	n_read, n_written, n_replayed, n_rejected, n_in_doubt, n_settled, n_pages, n_requests, n_skipped`

// scanRun reads a run whose times are put on the Store's clock by adding
// toLocal (serverclock.go).
func scanRun(sc pgx.Row, toLocal time.Duration) (store.Run, error) {
	var (
		r        store.Run
		state    string
		started  int64
		finished *int64
	)
	if err := sc.Scan(&r.ID, &r.SyncID, &state, &r.Attempt, &r.Fence, &started, &finished, &r.FailureCode, &r.FailureDetail,
		&r.Read, &r.Written, &r.Replayed, &r.Rejected, &r.InDoubt, &r.Settled, &r.Pages, &r.Requests, &r.Skipped); err != nil {
		return store.Run{}, err
	}
	r.State = store.RunState(state)
	r.StartedAt = fromNanos(started).Add(toLocal)
	r.FinishedAt = shifted(fromNullNanos(finished), toLocal)
	return r, nil
}

// runOnServer is r with its times put on the server's clock (off is
// ClockOffset's), as sqlRunUpdate stores them.
func runOnServer(r store.Run, off time.Duration) store.Run {
	r.StartedAt, r.FinishedAt = shifted(r.StartedAt, off), shifted(r.FinishedAt, off)
	return r
}

// runArgs are sqlRunUpdate's arguments for r.
func (s *Store) runArgs(r store.Run, off time.Duration) []any {
	return runOnServer(r, off).UpdateArgs(s.now().Add(off))
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
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return store.Run{}, err
	}
	now := s.now().Add(off)
	var finished *int64
	if p.State.Finished() {
		finished = store.NullNanos(now)
	}
	out, err := scanRun(s.pool.QueryRow(ctx, `INSERT INTO runs (sync_id, state, attempt, started_at, finished_at, failure_code, failure_detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+runColumns,
		p.SyncID, string(p.State), p.Attempt, nanos(now), finished, p.FailureCode, p.Detail), -off)
	return out, mapErr("insert run", err)
}

// UpdateRun saves the run's state, attempt, fence, counters and failure
// fields, and StartedAt when it is set. FinishedAt is saved when set;
// otherwise a run moving to a final state is stamped finished now (once), and
// a run in a non-final state has none.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) error {
	if err := validRunUpdate(r); err != nil {
		return err
	}
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return err
	}
	return mapErr("update run", s.updateRun(ctx, s.pool, r, off))
}

// CloseRun saves r if the stored run is still running (store.Runs).
func (s *Store) CloseRun(ctx context.Context, r store.Run) (bool, error) {
	if err := validRunUpdate(r); err != nil {
		return false, err
	}
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, sqlRunUpdate+` AND state = 'running'`, s.runArgs(r, off)...)
	if err != nil {
		return false, mapErr("close run", err)
	}
	if tag.RowsAffected() > 0 {
		return true, nil
	}
	if _, err := s.GetRun(ctx, r.ID); err != nil {
		return false, err
	}
	return false, nil
}

// validRunUpdate refuses a run UpdateRun cannot save, before any statement.
func validRunUpdate(r store.Run) error { return invalid(r.CheckUpdate()) }

const sqlRunUpdate = `UPDATE runs SET
		state = $1, attempt = $2, fence = $3,
		started_at = coalesce($4::bigint, started_at),
		finished_at = CASE
			WHEN $5::bigint IS NOT NULL THEN $5::bigint
			WHEN $6::boolean THEN coalesce(finished_at, $7::bigint)
			ELSE NULL END,
		failure_code = $8, failure_detail = $9,
		n_read = $10, n_written = $11, n_replayed = $12, n_rejected = $13,
		n_in_doubt = $14, n_settled = $15, n_pages = $16, n_requests = $17, n_skipped = $18
	WHERE id = $19`

// updateRun is UpdateRun on q (the pool or the caller's transaction), r
// already checked by validRunUpdate; ErrNotFound when no run has r.ID.
// Driver errors are returned unmapped.
func (s *Store) updateRun(ctx context.Context, q querier, r store.Run, off time.Duration) error {
	tag, err := q.Exec(ctx, sqlRunUpdate, s.runArgs(r, off)...)
	if err != nil {
		return err
	}
	return checkRunUpdated(r, tag)
}

// checkRunUpdated is ErrNotFound when sqlRunUpdate found no run r.ID.
func checkRunUpdated(r store.Run, tag pgconn.CommandTag) error {
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("run %d: %w", r.ID, store.ErrNotFound)
	}
	return nil
}

// GetRun returns a run, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (store.Run, error) {
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return store.Run{}, err
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id), -off)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Run{}, fmt.Errorf("run %d: %w", id, store.ErrNotFound)
	}
	return r, mapErr("get run", err)
}

// ListRuns returns a sync's runs, newest first; limit <= 0 returns all.
func (s *Store) ListRuns(ctx context.Context, syncID string, limit int) ([]store.Run, error) {
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE sync_id = $1 ORDER BY id DESC LIMIT $2`,
		syncID, limitArg(limit))
	if err != nil {
		return nil, mapErr("list runs", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Run, error) { return scanRun(r, -off) })
	return out, mapErr("list runs", err)
}

// ListRunsByState returns the runs of every sync in state, oldest first;
// limit <= 0 returns all.
func (s *Store) ListRunsByState(ctx context.Context, state store.RunState, limit int) ([]store.Run, error) {
	if !state.Valid() {
		return nil, invalidf("run state %q", state)
	}
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE state = $1 ORDER BY id LIMIT $2`,
		string(state), limitArg(limit))
	if err != nil {
		return nil, mapErr("list runs by state", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Run, error) { return scanRun(r, -off) })
	return out, mapErr("list runs by state", err)
}

// Run prune statements (store.Runs.PruneRuns, docs/guide.md#the-ledger-and-its-retention).
// Each seeks on runs_sync_id_id or runs_sync_succeeded; the chunk's page rows
// go in the same statement.
const (
	sqlRunsNextSync = `SELECT sync_id FROM runs WHERE sync_id > $1 ORDER BY sync_id LIMIT 1`
	sqlRunsPrune    = `WITH keep AS (
		SELECT (SELECT id FROM runs WHERE sync_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2 - 1) AS keep_from,
			coalesce((SELECT id FROM runs WHERE sync_id = $1 AND state = 'succeeded'
				ORDER BY finished_at DESC LIMIT 1), 0) AS last_ok),
	old AS (
		SELECT r.id FROM runs r, keep WHERE r.sync_id = $1 AND r.id < keep.keep_from AND r.id <> keep.last_ok
			AND r.state NOT IN ('queued', 'running') AND coalesce(r.finished_at, r.started_at) < $3
		ORDER BY r.id LIMIT $4),
	pages AS (DELETE FROM run_pages WHERE run_id IN (SELECT id FROM old)),
	gone AS (DELETE FROM runs WHERE id IN (SELECT id FROM old) RETURNING 1)
	SELECT count(*) FROM gone`
)

// PruneRuns implements store.Runs (store.RunsPruner.Walk), one statement
// per chunk.
func (s *Store) PruneRuns(ctx context.Context, before time.Time) (int64, error) {
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return 0, err
	}
	return store.RunsPruner{
		Next: func(after string) (string, bool, error) {
			var syncID string
			err := s.pool.QueryRow(ctx, sqlRunsNextSync, after).Scan(&syncID)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", false, nil
			}
			return syncID, err == nil, mapErr("prune runs", err)
		},
		Delete: func(syncID string) (n int64, err error) {
			err = s.pool.QueryRow(ctx, sqlRunsPrune, syncID, store.KeepRunsPerSync, nanos(before.Add(off)), store.PruneRunsChunk).Scan(&n)
			return n, mapErr("prune runs", err)
		},
	}.Walk()
}
