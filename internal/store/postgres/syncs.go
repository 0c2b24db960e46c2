package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

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
			return insertAudit(ctx, tx, store.AuditEntry{At: now, SyncID: p.ID, Action: "publish", By: p.By, Why: "new sync"})
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
			return insertAudit(ctx, tx, store.AuditEntry{At: now, SyncID: p.ID, Action: "publish", By: p.By, Why: "definition changed"})
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

// putSyncsChunk bounds the definitions one statement of PutSyncs carries
// (a few hundred bytes each): every chunk is still in the one transaction.
const putSyncsChunk = 2000

// The statements of PutSyncs over one chunk ($1 ids, $2 workspaces, $3
// definitions, $4 now): new syncs, changed definitions, then workspaces
// alone, each as PutSync treats it. An identical definition matches none
// and is not written.
const (
	sqlPutSyncsInsert = `INSERT INTO syncs (id, workspace, definition, state, changed_at, created_at)
		SELECT p.id, p.workspace, p.definition, 'active', $4, $4
		FROM unnest($1::text[], $2::text[], $3::text[]) AS p(id, workspace, definition)
		ORDER BY p.id
		ON CONFLICT (id) DO NOTHING RETURNING id`
	sqlPutSyncsChange = `UPDATE syncs AS s SET workspace = p.workspace, definition = p.definition, changed_at = $4
		FROM unnest($1::text[], $2::text[], $3::text[]) AS p(id, workspace, definition)
		WHERE s.id = p.id AND s.definition <> p.definition
		RETURNING s.id`
	sqlPutSyncsWorkspace = `UPDATE syncs AS s SET workspace = p.workspace
		FROM unnest($1::text[], $2::text[], $3::text[]) AS p(id, workspace, definition)
		WHERE s.id = p.id AND s.definition = p.definition AND s.workspace <> p.workspace
		RETURNING s.id`
	sqlPutSyncsAudit = `INSERT INTO audit (at, sync_id, action, by_who, why)
		SELECT $1, id, 'publish', $4, $3 FROM unnest($2::text[]) AS id`
)

// PutSyncs publishes many definitions in one transaction, each as PutSync
// would, a chunk of putSyncsChunk per statement. Concurrent batches (serve and
// its workers starting on one config) are serialised by an advisory lock of
// the schema: two UPDATE ... FROM could otherwise lock the same rows in
// different orders and deadlock.
func (s *Store) PutSyncs(ctx context.Context, ps []store.PutSyncParams) (store.PutSyncsResult, error) {
	sorted, err := store.SortPutSyncs(ps)
	if err != nil {
		return store.PutSyncsResult{}, invalid(err)
	}
	var res store.PutSyncsResult
	if len(sorted) == 0 {
		return res, nil
	}
	err = s.tx(ctx, "put syncs", func(tx pgx.Tx) error {
		res = store.PutSyncsResult{}
		now := nanos(s.now())
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, publishLockKey(s.schema)); err != nil {
			return err
		}
		for lo := 0; lo < len(sorted); lo += putSyncsChunk {
			chunk := sorted[lo:min(lo+putSyncsChunk, len(sorted))]
			ids, workspaces, defs := make([]string, len(chunk)), make([]string, len(chunk)), make([]string, len(chunk))
			for i, p := range chunk {
				ids[i], workspaces[i], defs[i] = p.ID, p.Workspace, p.Definition
			}
			created, err := returnedIDs(ctx, tx, sqlPutSyncsInsert, ids, workspaces, defs, now)
			if err != nil {
				return err
			}
			changed, err := returnedIDs(ctx, tx, sqlPutSyncsChange, ids, workspaces, defs, now)
			if err != nil {
				return err
			}
			moved, err := returnedIDs(ctx, tx, sqlPutSyncsWorkspace, ids, workspaces, defs)
			if err != nil {
				return err
			}
			for _, a := range []struct {
				ids []string
				why string
			}{{created, "new sync"}, {changed, "definition changed"}} {
				if len(a.ids) == 0 {
					continue
				}
				if _, err := tx.Exec(ctx, sqlPutSyncsAudit, now, a.ids, a.why, chunk[0].By); err != nil {
					return err
				}
			}
			res.Created += len(created)
			res.Changed += len(changed)
			res.WorkspaceOnly += len(moved)
			res.Unchanged += len(chunk) - len(created) - len(changed) - len(moved)
		}
		return nil
	})
	if err != nil {
		return store.PutSyncsResult{}, err
	}
	return res, nil
}

// returnedIDs runs a statement returning one id per row.
func returnedIDs(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// publishLockKey is the advisory lock PutSyncs holds while it writes: one
// per schema, across every process sharing the database.
func publishLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("oncesync publish " + schema))
	return int64(h.Sum64())
}

// ListPausedSyncs returns the ids of the paused syncs, in id order.
func (s *Store) ListPausedSyncs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM syncs WHERE state = 'paused' ORDER BY id`)
	if err != nil {
		return nil, mapErr("list paused syncs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr("list paused syncs", err)
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
		WHERE id = $1::text AND ($10::text = '' OR state = $10::text)
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
		p.ID, string(p.State), reason, by, why, nanos(s.now()), action, p.By, p.Why, string(p.From)))
	if errors.Is(err, pgx.ErrNoRows) {
		if p.From != "" {
			// Nothing changed: the sync is missing or in another state.
			cur, gerr := s.GetSync(ctx, p.ID)
			if gerr != nil {
				return store.Sync{}, gerr
			}
			return store.Sync{}, fmt.Errorf("sync %q is %s, not %s: %w", p.ID, cur.State, p.From, store.ErrStateChanged)
		}
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
