package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// The dead-man check's reads and its markers (docs/guide.md#telling-silence-from-outside): Store implements
// store.ActivityReader and store.DeadmanMarkers.
var (
	_ store.ActivityReader = (*Store)(nil)
	_ store.DeadmanMarkers = (*Store)(nil)
)

// sqlSyncActivity reads every sync with its latest run (by id, through
// runs_sync_id_id, then the rowid) and its last success: the latest run's
// finish when it succeeded (the common case; a sync's runs are serialised by
// its lease), else max over the partial index runs_sync_succeeded. Two or
// three index probes per sync, however many runs there are.
const sqlSyncActivity = `SELECT s.id, s.workspace, s.state, s.pause_reason, s.changed_at,
	r.id, r.state, max(r.started_at, coalesce(r.finished_at, r.started_at)), r.failure_code,
	CASE WHEN r.state = 'succeeded' THEN r.finished_at
		ELSE (SELECT max(x.finished_at) FROM runs x WHERE x.sync_id = s.id AND x.state = 'succeeded') END
FROM syncs s
LEFT JOIN runs r ON r.id = (SELECT max(y.id) FROM runs y WHERE y.sync_id = s.id)`

// SyncActivity returns every sync's activity for the dead-man check, in one
// query.
func (s *Store) SyncActivity(ctx context.Context) ([]store.Activity, error) {
	rows, err := s.r.QueryContext(ctx, sqlSyncActivity)
	if err != nil {
		return nil, s.mapErr("sync activity", err)
	}
	defer rows.Close()
	var out []store.Activity
	for rows.Next() {
		var (
			a              store.Activity
			state          string
			changed        int64
			runID          sql.NullInt64
			runState, code sql.NullString
			lastRun, ok    sql.NullInt64
		)
		if err := rows.Scan(&a.SyncID, &a.Workspace, &state, &a.PauseReason, &changed,
			&runID, &runState, &lastRun, &code, &ok); err != nil {
			return nil, s.mapErr("sync activity", err)
		}
		a.State = store.SyncState(state)
		a.ChangedAt = fromNanos(changed)
		a.LastRunID = runID.Int64
		a.LastRunState = store.RunState(runState.String)
		a.LastFailureCode = code.String
		a.LastRunAt = fromNullNanos(lastRun)
		a.LastSuccessAt = fromNullNanos(ok)
		out = append(out, a)
	}
	return out, s.mapErr("sync activity", rows.Err())
}

// ListDeadmanMarkers returns every dead-man marker.
func (s *Store) ListDeadmanMarkers(ctx context.Context) ([]store.DeadmanMarker, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT scope, id, workspace, kind, since, raised_at, alert_id
		FROM deadman_markers ORDER BY scope, id`)
	if err != nil {
		return nil, s.mapErr("list deadman markers", err)
	}
	defer rows.Close()
	var out []store.DeadmanMarker
	for rows.Next() {
		var (
			m           store.DeadmanMarker
			scope, kind string
			since       sql.NullInt64
			raised      int64
		)
		if err := rows.Scan(&scope, &m.ID, &m.Workspace, &kind, &since, &raised, &m.AlertID); err != nil {
			return nil, s.mapErr("list deadman markers", err)
		}
		m.Scope, m.Kind = store.DeadmanScope(scope), store.DeadmanKind(kind)
		m.Since, m.RaisedAt = fromNullNanos(since), fromNanos(raised)
		out = append(out, m)
	}
	return out, s.mapErr("list deadman markers", rows.Err())
}

// PutDeadmanMarker creates m unless a marker of (m.Scope, m.ID) exists, and
// reports whether it did.
func (s *Store) PutDeadmanMarker(ctx context.Context, m store.DeadmanMarker) (bool, error) {
	if !m.Scope.Valid() || !m.Kind.Valid() {
		return false, invalidf("deadman marker scope %q kind %q", m.Scope, m.Kind)
	}
	var created bool
	err := s.write(ctx, "put deadman marker", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO deadman_markers (scope, id, workspace, kind, since, raised_at, alert_id)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, id) DO NOTHING`,
			string(m.Scope), m.ID, m.Workspace, string(m.Kind), nullNanos(m.Since), nanos(m.RaisedAt), m.AlertID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		created = n == 1
		return err
	})
	return created, err
}

// DeleteDeadmanMarker removes the marker of scope/id and reports whether one
// existed.
func (s *Store) DeleteDeadmanMarker(ctx context.Context, scope store.DeadmanScope, id string) (bool, error) {
	var deleted bool
	err := s.write(ctx, "delete deadman marker", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM deadman_markers WHERE scope = ? AND id = ?`, string(scope), id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = n == 1
		return err
	})
	return deleted, err
}

var _ store.DeadmanCheckLog = (*Store)(nil)

// deadmanCheckName is the row of deadman_checks the check uses.
const deadmanCheckName = "deadman"

// MarkDeadmanCheck records a dead-man check at `at` unless one was recorded
// at or after notBefore (store.DeadmanCheckLog). The write transaction makes it
// atomic: a second caller reads the first one's row.
func (s *Store) MarkDeadmanCheck(ctx context.Context, at, notBefore time.Time, by string) (bool, error) {
	var marked bool
	err := s.write(ctx, "mark deadman check", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO deadman_checks (name, checked_at, checked_by) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET checked_at = excluded.checked_at, checked_by = excluded.checked_by
			WHERE deadman_checks.checked_at < ?`,
			deadmanCheckName, nanos(at), by, nanos(notBefore))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		marked = n == 1
		return err
	})
	return marked, err
}

// LastDeadmanCheck returns the latest recorded dead-man check
// (store.DeadmanCheckLog).
func (s *Store) LastDeadmanCheck(ctx context.Context) (store.DeadmanCheck, error) {
	var (
		lc store.DeadmanCheck
		at int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT checked_at, checked_by FROM deadman_checks WHERE name = ?`, deadmanCheckName).Scan(&at, &lc.By)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.DeadmanCheck{}, nil
	case err != nil:
		return lc, s.mapErr("last deadman check", err)
	}
	lc.At = fromNanos(at)
	return lc, nil
}
