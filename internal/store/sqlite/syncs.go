package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

const syncColumns = `id, workspace, definition, state, pause_reason, paused_by, paused_why, changed_at, created_at`

type rowScanner interface{ Scan(dest ...any) error }

func scanSync(sc rowScanner) (store.Sync, error) {
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

func getSync(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (store.Sync, error) {
	s, err := scanSync(q.QueryRowContext(ctx, `SELECT `+syncColumns+` FROM syncs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Sync{}, fmt.Errorf("sync %q: %w", id, store.ErrNotFound)
	}
	return s, err
}

func insertAudit(ctx context.Context, tx *sql.Tx, e store.AuditEntry) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO audit (at, sync_id, action, by_who, why) VALUES (?, ?, ?, ?, ?)`,
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
	err := s.write(ctx, "put sync", func(tx *sql.Tx) error {
		cur, what, err := putSync(ctx, tx, s.now(), p)
		if err != nil || what == putUnchanged {
			out = cur
			return err
		}
		out, err = getSync(ctx, tx, p.ID)
		return err
	})
	return out, err
}

// putOutcome is what putSync did.
type putOutcome int

const (
	putUnchanged putOutcome = iota
	putCreated
	putChanged
	putWorkspace
)

// putSync is PutSync's work in tx; cur is the row read before (zero for a
// new sync).
func putSync(ctx context.Context, tx *sql.Tx, now time.Time, p store.PutSyncParams) (cur store.Sync, _ putOutcome, _ error) {
	cur, err := getSync(ctx, tx, p.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if _, err := tx.ExecContext(ctx, `INSERT INTO syncs (id, workspace, definition, state, changed_at, created_at)
			VALUES (?, ?, ?, 'active', ?, ?)`, p.ID, p.Workspace, p.Definition, nanos(now), nanos(now)); err != nil {
			return cur, 0, err
		}
		return cur, putCreated, insertAudit(ctx, tx, store.AuditEntry{At: now, SyncID: p.ID, Action: "publish", By: p.By, Why: "new sync"})
	case err != nil:
		return cur, 0, err
	case cur.Definition != p.Definition:
		if _, err := tx.ExecContext(ctx, `UPDATE syncs SET workspace = ?, definition = ?, changed_at = ? WHERE id = ?`,
			p.Workspace, p.Definition, nanos(now), p.ID); err != nil {
			return cur, 0, err
		}
		return cur, putChanged, insertAudit(ctx, tx, store.AuditEntry{At: now, SyncID: p.ID, Action: "publish", By: p.By, Why: "definition changed"})
	case cur.Workspace != p.Workspace:
		_, err := tx.ExecContext(ctx, `UPDATE syncs SET workspace = ? WHERE id = ?`, p.Workspace, p.ID)
		return cur, putWorkspace, err
	default:
		return cur, putUnchanged, nil
	}
}

// PutSyncs publishes many definitions in one write transaction (one commit,
// one fsync), each as PutSync would, in id order.
func (s *Store) PutSyncs(ctx context.Context, ps []store.PutSyncParams) (store.PutSyncsResult, error) {
	sorted, err := store.SortPutSyncs(ps)
	if err != nil {
		return store.PutSyncsResult{}, invalid(err)
	}
	var res store.PutSyncsResult
	if len(sorted) == 0 {
		return res, nil
	}
	err = s.write(ctx, "put syncs", func(tx *sql.Tx) error {
		res = store.PutSyncsResult{}
		now := s.now()
		for _, p := range sorted {
			_, what, err := putSync(ctx, tx, now, p)
			if err != nil {
				return err
			}
			switch what {
			case putCreated:
				res.Created++
			case putChanged:
				res.Changed++
			case putWorkspace:
				res.WorkspaceOnly++
			default:
				res.Unchanged++
			}
		}
		return nil
	})
	if err != nil {
		return store.PutSyncsResult{}, err
	}
	return res, nil
}

// ListPausedSyncs returns the ids of the paused syncs, in id order.
func (s *Store) ListPausedSyncs(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM syncs WHERE state = 'paused' ORDER BY id`)
	if err != nil {
		return nil, s.mapErr("list paused syncs", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.mapErr("list paused syncs", err)
		}
		out = append(out, id)
	}
	return out, s.mapErr("list paused syncs", rows.Err())
}

// GetSync returns a sync, or ErrNotFound.
func (s *Store) GetSync(ctx context.Context, id string) (store.Sync, error) {
	out, err := getSync(ctx, s.r, id)
	return out, s.mapErr("get sync", err)
}

// ListSyncs returns every sync ordered by id.
func (s *Store) ListSyncs(ctx context.Context) ([]store.Sync, error) {
	// Behind /readyz: a process whose file is gone is not ready.
	if err := s.checkFile("list syncs"); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+syncColumns+` FROM syncs ORDER BY id`)
	if err != nil {
		return nil, s.mapErr("list syncs", err)
	}
	defer rows.Close()
	var out []store.Sync
	for rows.Next() {
		sy, err := scanSync(rows)
		if err != nil {
			return nil, s.mapErr("list syncs", err)
		}
		out = append(out, sy)
	}
	return out, s.mapErr("list syncs", rows.Err())
}

// SetSyncState pauses or resumes a sync and audits it ("pause" or "resume",
// with By and Why) in the same transaction. Resuming moves ChangedAt to now
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
	var out store.Sync
	err := s.write(ctx, "set sync state", func(tx *sql.Tx) error {
		now := s.now()
		cur, err := getSync(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if p.From != "" && cur.State != p.From {
			return fmt.Errorf("sync %q is %s, not %s: %w", p.ID, cur.State, p.From, store.ErrStateChanged)
		}
		q := `UPDATE syncs SET state = ?, pause_reason = ?, paused_by = ?, paused_why = ? WHERE id = ?`
		args := []any{string(p.State), reason, by, why, p.ID}
		if p.State == store.SyncActive {
			q = `UPDATE syncs SET state = ?, pause_reason = ?, paused_by = ?, paused_why = ?, changed_at = ? WHERE id = ?`
			args = []any{string(p.State), reason, by, why, nanos(now), p.ID}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		if err := insertAudit(ctx, tx, store.AuditEntry{At: now, SyncID: p.ID, Action: action, By: p.By, Why: p.Why}); err != nil {
			return err
		}
		out, err = getSync(ctx, tx, p.ID)
		return err
	})
	return out, err
}

// InsertAudit appends an audit entry; a zero At is stamped with now.
func (s *Store) InsertAudit(ctx context.Context, e store.AuditEntry) error {
	if e.Action == "" {
		return invalidf("audit action is empty")
	}
	return s.write(ctx, "insert audit", func(tx *sql.Tx) error {
		if e.At.IsZero() {
			e.At = s.now()
		}
		return insertAudit(ctx, tx, e)
	})
}

// ListAudit returns a sync's audit entries (every sync's when syncID is ""),
// newest first; limit <= 0 returns all.
func (s *Store) ListAudit(ctx context.Context, syncID string, limit int) ([]store.AuditEntry, error) {
	q := `SELECT id, at, sync_id, action, by_who, why FROM audit WHERE sync_id = ? ORDER BY id DESC LIMIT ?`
	args := []any{syncID, limitArg(limit)}
	if syncID == "" {
		q = `SELECT id, at, sync_id, action, by_who, why FROM audit ORDER BY id DESC LIMIT ?`
		args = args[1:]
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.mapErr("list audit", err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		var (
			e  store.AuditEntry
			at int64
		)
		if err := rows.Scan(&e.ID, &at, &e.SyncID, &e.Action, &e.By, &e.Why); err != nil {
			return nil, s.mapErr("list audit", err)
		}
		e.At = fromNanos(at)
		out = append(out, e)
	}
	return out, s.mapErr("list audit", rows.Err())
}
