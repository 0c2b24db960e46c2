package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/store"
)

const syncColumns = `id, workspace, definition, state, pause_reason, paused_by, paused_why, changed_at, created_at`

func scanSync(sc pgx.Row) (store.Sync, error) {
	var (
		s                  store.Sync
		state              string
		changedAt, created int64
	)
	if err := sc.Scan(&s.ID, &s.Workspace, &s.Definition, &state, &s.PauseReason, &s.PausedBy, &s.PausedWhy, &changedAt, &created); err != nil {
		return store.Sync{}, err
	}
	s.State = store.SyncState(state)
	s.ChangedAt = fromNanos(changedAt)
	s.CreatedAt = fromNanos(created)
	return s, nil
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func insertAudit(ctx context.Context, q execer, e store.AuditEntry) error {
	_, err := q.Exec(ctx, `INSERT INTO audit (at, sync_id, action, by_who, why) VALUES ($1, $2, $3, $4, $5)`,
		nanos(e.At), e.SyncID, e.Action, e.By, e.Why)
	return err
}

// PutSync publishes a sync definition. A new sync or a changed Definition moves
// ChangedAt to now and writes a "publish" audit entry; an identical definition
// changes nothing (a changed Workspace alone is saved without either).
func (s *Store) PutSync(ctx context.Context, p store.PutSyncParams) (store.Sync, error) {
	if p.ID == "" {
		return store.Sync{}, invalidf("sync id is empty")
	}
	var out store.Sync
	err := s.tx(ctx, "put sync", func(tx pgx.Tx) error {
		now := s.now()
		// A new sync: inserted (a concurrent publisher of the same new id
		// waits for this one and then takes the update path below).
		created, err := scanSync(tx.QueryRow(ctx, `INSERT INTO syncs (id, workspace, definition, state, changed_at, created_at)
			VALUES ($1, $2, $3, 'active', $4, $4) ON CONFLICT (id) DO NOTHING RETURNING `+syncColumns,
			p.ID, p.Workspace, p.Definition, nanos(now)))
		switch {
		case err == nil:
			out = created
			return insertAudit(ctx, tx, store.AuditEntry{At: now, SyncID: p.ID, Action: "publish", Why: "new sync"})
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		cur, err := scanSync(tx.QueryRow(ctx, `SELECT `+syncColumns+` FROM syncs WHERE id = $1 FOR UPDATE`, p.ID))
		if err != nil {
			return err
		}
		switch {
		case cur.Definition != p.Definition:
			if out, err = scanSync(tx.QueryRow(ctx, `UPDATE syncs SET workspace = $1, definition = $2, changed_at = $3
				WHERE id = $4 RETURNING `+syncColumns, p.Workspace, p.Definition, nanos(now), p.ID)); err != nil {
				return err
			}
			return insertAudit(ctx, tx, store.AuditEntry{At: now, SyncID: p.ID, Action: "publish", Why: "definition changed"})
		case cur.Workspace != p.Workspace:
			out, err = scanSync(tx.QueryRow(ctx, `UPDATE syncs SET workspace = $1 WHERE id = $2 RETURNING `+syncColumns,
				p.Workspace, p.ID))
			return err
		default:
			out = cur
			return nil
		}
	})
	return out, err
}

// GetSync returns a sync, or ErrNotFound.
func (s *Store) GetSync(ctx context.Context, id string) (store.Sync, error) {
	out, err := scanSync(s.pool.QueryRow(ctx, `SELECT `+syncColumns+` FROM syncs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Sync{}, fmt.Errorf("sync %q: %w", id, store.ErrNotFound)
	}
	return out, mapErr("get sync", err)
}

// ListSyncs returns every sync ordered by id (byte order).
func (s *Store) ListSyncs(ctx context.Context) ([]store.Sync, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+syncColumns+` FROM syncs ORDER BY id`)
	if err != nil {
		return nil, mapErr("list syncs", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Sync, error) { return scanSync(r) })
	return out, mapErr("list syncs", err)
}

// sqlSetSyncState updates a sync's state and audits it in one statement: the
// audit row is inserted only if the sync exists.
const sqlSetSyncState = `WITH u AS (
		UPDATE syncs SET state = $2::text, pause_reason = $3, paused_by = $4, paused_why = $5,
			changed_at = CASE WHEN $2::text = 'active' THEN $6::bigint ELSE changed_at END
		WHERE id = $1::text
		RETURNING ` + syncColumns + `
	), a AS (
		INSERT INTO audit (at, sync_id, action, by_who, why) SELECT $6::bigint, u.id, $7, $8, $9 FROM u
	)
	SELECT ` + syncColumns + ` FROM u`

// SetSyncState pauses or resumes a sync and audits it ("pause" or "resume",
// with By and Why) in the same statement. Resuming moves ChangedAt to now
// (re-arming the circuit breaker); pausing keeps it. A pause without a Reason
// is a person's.
func (s *Store) SetSyncState(ctx context.Context, p store.SetSyncStateParams) (store.Sync, error) {
	var action, reason, by, why string
	switch p.State {
	case store.SyncPaused:
		action, reason, by, why = "pause", p.Reason, p.By, p.Why
		if reason == "" {
			reason = "person"
		}
		if reason != "person" && reason != "breaker" {
			return store.Sync{}, invalidf("pause reason %q (want person or breaker)", p.Reason)
		}
	case store.SyncActive:
		action = "resume"
	default:
		return store.Sync{}, invalidf("sync state %q", p.State)
	}
	out, err := scanSync(s.pool.QueryRow(ctx, sqlSetSyncState,
		p.ID, string(p.State), reason, by, why, nanos(s.now()), action, p.By, p.Why))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Sync{}, fmt.Errorf("sync %q: %w", p.ID, store.ErrNotFound)
	}
	return out, mapErr("set sync state", err)
}

// InsertAudit appends an audit entry; a zero At is stamped with now.
func (s *Store) InsertAudit(ctx context.Context, e store.AuditEntry) error {
	if e.Action == "" {
		return invalidf("audit action is empty")
	}
	if e.At.IsZero() {
		e.At = s.now()
	}
	return mapErr("insert audit", insertAudit(ctx, s.pool, e))
}

// ListAudit returns a sync's audit entries (every sync's when syncID is ""),
// newest first; limit <= 0 returns all.
func (s *Store) ListAudit(ctx context.Context, syncID string, limit int) ([]store.AuditEntry, error) {
	q := `SELECT id, at, sync_id, action, by_who, why FROM audit WHERE sync_id = $1 ORDER BY id DESC LIMIT $2`
	args := []any{syncID, limitArg(limit)}
	if syncID == "" {
		q = `SELECT id, at, sync_id, action, by_who, why FROM audit ORDER BY id DESC LIMIT $1`
		args = args[1:]
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr("list audit", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AuditEntry, error) {
		var (
			e  store.AuditEntry
			at int64
		)
		if err := r.Scan(&e.ID, &at, &e.SyncID, &e.Action, &e.By, &e.Why); err != nil {
			return store.AuditEntry{}, err
		}
		e.At = fromNanos(at)
		return e, nil
	})
	return out, mapErr("list audit", err)
}
