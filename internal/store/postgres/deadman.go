package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncesync/oncesync/internal/store"
)

// The dead-man check's reads and its markers (docs/guide.md#telling-silence-from-outside): Store implements
// store.ActivityReader and store.DeadmanMarkers.
var (
	_ store.ActivityReader = (*Store)(nil)
	_ store.DeadmanMarkers = (*Store)(nil)
)

// sqlSyncActivity reads every sync with its latest run (one backward probe
// of runs_sync_id_id) and its last success: the latest run's finish when it
// succeeded (the common case; a sync's runs are serialised by its lease),
// else max over the partial index runs_sync_succeeded. A nested loop of one
// or two index probes per sync, however many runs there are.
const sqlSyncActivity = `SELECT s.id, s.workspace, s.state, s.pause_reason, s.changed_at,
	coalesce(r.id, 0), coalesce(r.state, ''), greatest(r.started_at, r.finished_at), coalesce(r.failure_code, ''),
	CASE WHEN r.state = 'succeeded' THEN r.finished_at
		ELSE (SELECT max(x.finished_at) FROM runs x WHERE x.sync_id = s.id AND x.state = 'succeeded') END
FROM syncs s
LEFT JOIN LATERAL (
	SELECT y.id, y.state, y.started_at, y.finished_at, y.failure_code
	FROM runs y WHERE y.sync_id = s.id ORDER BY y.id DESC LIMIT 1
) r ON true`

// SyncActivity returns every sync's activity for the dead-man check, in one
// query.
func (s *Store) SyncActivity(ctx context.Context) ([]store.Activity, error) {
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Activity
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// The plan is a cheap nested loop whose estimated cost is high:
		// JIT compiling it costs ~100 ms and saves nothing.
		if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
			return err
		}
		var err error
		out, err = scanActivity(ctx, tx, -off)
		return err
	})
	return out, mapErr("sync activity", err)
}

// scanActivity reads the syncs' activity, their runs' times put on the
// Store's clock by adding toLocal (serverclock.go).
func scanActivity(ctx context.Context, tx pgx.Tx, toLocal time.Duration) ([]store.Activity, error) {
	rows, err := tx.Query(ctx, sqlSyncActivity)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Activity
	for rows.Next() {
		var (
			a               store.Activity
			state, runState string
			changed         int64
			lastRun, ok     pgtype.Int8 // no allocation per NULL-able value
		)
		if err := rows.Scan(&a.SyncID, &a.Workspace, &state, &a.PauseReason, &changed,
			&a.LastRunID, &runState, &lastRun, &a.LastFailureCode, &ok); err != nil {
			return nil, err
		}
		a.State = store.SyncState(state)
		a.LastRunState = store.RunState(runState)
		a.ChangedAt = fromNanos(changed)
		if lastRun.Valid {
			a.LastRunAt = fromNanos(lastRun.Int64).Add(toLocal)
		}
		if ok.Valid {
			a.LastSuccessAt = fromNanos(ok.Int64).Add(toLocal)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ListDeadmanMarkers returns every dead-man marker.
func (s *Store) ListDeadmanMarkers(ctx context.Context) ([]store.DeadmanMarker, error) {
	rows, err := s.pool.Query(ctx, `SELECT scope, id, workspace, kind, since, raised_at, alert_id
		FROM deadman_markers ORDER BY scope, id`)
	if err != nil {
		return nil, mapErr("list deadman markers", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.DeadmanMarker, error) {
		var (
			m           store.DeadmanMarker
			scope, kind string
			since       *int64
			raised      int64
		)
		if err := r.Scan(&scope, &m.ID, &m.Workspace, &kind, &since, &raised, &m.AlertID); err != nil {
			return m, err
		}
		m.Scope, m.Kind = store.DeadmanScope(scope), store.DeadmanKind(kind)
		m.Since, m.RaisedAt = fromNullNanos(since), fromNanos(raised)
		return m, nil
	})
	return out, mapErr("list deadman markers", err)
}

// PutDeadmanMarker creates m unless a marker of (m.Scope, m.ID) exists, and
// reports whether it did.
func (s *Store) PutDeadmanMarker(ctx context.Context, m store.DeadmanMarker) (bool, error) {
	if !m.Scope.Valid() || !m.Kind.Valid() {
		return false, invalidf("deadman marker scope %q kind %q", m.Scope, m.Kind)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO deadman_markers (scope, id, workspace, kind, since, raised_at, alert_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (scope, id) DO NOTHING`,
		string(m.Scope), m.ID, m.Workspace, string(m.Kind), store.NullNanos(m.Since), nanos(m.RaisedAt), m.AlertID)
	if err != nil {
		return false, mapErr("put deadman marker", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteDeadmanMarker removes the marker of scope/id and reports whether one
// existed.
func (s *Store) DeleteDeadmanMarker(ctx context.Context, scope store.DeadmanScope, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM deadman_markers WHERE scope = $1 AND id = $2`, string(scope), id)
	if err != nil {
		return false, mapErr("delete deadman marker", err)
	}
	return tag.RowsAffected() == 1, nil
}

var _ store.DeadmanCheckLog = (*Store)(nil)

// deadmanCheckName is the row of deadman_checks the check uses.
const deadmanCheckName = "deadman"

// MarkDeadmanCheck records a dead-man check at `at` unless one was recorded
// at or after notBefore (store.DeadmanCheckLog). Concurrent callers serialise on
// the row: ON CONFLICT ... WHERE re-reads the latest version, so only one
// of those that found the same old record updates it.
func (s *Store) MarkDeadmanCheck(ctx context.Context, at, notBefore time.Time, by string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO deadman_checks (name, checked_at, checked_by) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET checked_at = excluded.checked_at, checked_by = excluded.checked_by
		WHERE deadman_checks.checked_at < $4`,
		deadmanCheckName, nanos(at), by, nanos(notBefore))
	if err != nil {
		return false, mapErr("mark deadman check", err)
	}
	return tag.RowsAffected() == 1, nil
}

// LastDeadmanCheck returns the latest recorded dead-man check
// (store.DeadmanCheckLog).
func (s *Store) LastDeadmanCheck(ctx context.Context) (store.DeadmanCheck, error) {
	var (
		lc store.DeadmanCheck
		at int64
	)
	err := s.pool.QueryRow(ctx, `SELECT checked_at, checked_by FROM deadman_checks WHERE name = $1`, deadmanCheckName).Scan(&at, &lc.By)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.DeadmanCheck{}, nil
	case err != nil:
		return lc, mapErr("last deadman check", err)
	}
	lc.At = fromNanos(at)
	return lc, nil
}
