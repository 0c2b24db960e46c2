package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

const runPageColumns = `run_id, page, read, claimed, sent, replayed, rejected, in_doubt, requests, checkpointed_at`

func validRunPage(p store.RunPage) error { return invalid(p.Check()) }

var sqlRunPagePut = `INSERT INTO run_pages (` + runPageColumns + `)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id, page) DO UPDATE SET
				read = excluded.read, claimed = excluded.claimed, sent = excluded.sent,
				replayed = excluded.replayed, rejected = excluded.rejected, in_doubt = excluded.in_doubt,
				requests = excluded.requests, checkpointed_at = excluded.checkpointed_at`

// RecordRunPage saves one checkpointed page of a run; recording the same
// (RunID, Page) again replaces it. A zero CheckpointedAt is stamped now.
func (s *Store) RecordRunPage(ctx context.Context, p store.RunPage) error {
	if err := validRunPage(p); err != nil {
		return err
	}
	return s.write(ctx, "record run page", func(tx *sql.Tx) error {
		return s.recordRunPage(ctx, tx, p)
	})
}

// recordRunPage is RecordRunPage inside the caller's write transaction
// (RecordRunPage, Checkpoint), p already checked by validRunPage.
func (s *Store) recordRunPage(ctx context.Context, tx *sql.Tx, p store.RunPage) error {
	at := p.CheckpointedAt
	if at.IsZero() {
		at = s.now()
	}
	_, err := tx.StmtContext(ctx, s.stmts.runPagePut).ExecContext(ctx,
		p.RunID, p.Page, p.Read, p.Claimed, p.Sent, p.Replayed, p.Rejected, p.InDoubt, p.Requests, nanos(at))
	return err
}

// ListRunPages returns a run's pages, oldest first; limit <= 0 returns all.
func (s *Store) ListRunPages(ctx context.Context, runID int64, limit int) ([]store.RunPage, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+runPageColumns+` FROM run_pages WHERE run_id = ? ORDER BY page LIMIT ?`,
		runID, limitArg(limit))
	if err != nil {
		return nil, s.mapErr("list run pages", err)
	}
	defer rows.Close()
	var out []store.RunPage
	for rows.Next() {
		var (
			p  store.RunPage
			at int64
		)
		if err := rows.Scan(&p.RunID, &p.Page, &p.Read, &p.Claimed, &p.Sent, &p.Replayed, &p.Rejected, &p.InDoubt, &p.Requests, &at); err != nil {
			return nil, s.mapErr("list run pages", err)
		}
		p.CheckpointedAt = fromNanos(at)
		out = append(out, p)
	}
	return out, s.mapErr("list run pages", rows.Err())
}

// Run page prune statements (docs/guide.md#the-ledger-and-its-retention). Each seeks on the
// primary key (run_id, page).
const (
	sqlRunPagesNextRun = `SELECT run_id FROM run_pages WHERE run_id > ? ORDER BY run_id LIMIT 1`
	sqlRunPagesDelete  = `DELETE FROM run_pages WHERE run_id = ?1 AND page IN (
		SELECT page FROM run_pages WHERE run_id = ?1 AND checkpointed_at < ?2 ORDER BY page LIMIT ?3)`
	sqlRunPagesYoung = `SELECT EXISTS (SELECT 1 FROM run_pages WHERE run_id = ?1 AND checkpointed_at >= ?2)`
)

// PruneRunPages deletes the page rows checkpointed before before
// (store.RunPagesPruner.Walk), one write transaction per chunk.
func (s *Store) PruneRunPages(ctx context.Context, before time.Time) (int64, error) {
	return store.RunPagesPruner{
		Next: func(after int64) (int64, bool, error) {
			var runID int64
			err := s.r.QueryRowContext(ctx, sqlRunPagesNextRun, after).Scan(&runID)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, false, nil
			}
			return runID, err == nil, s.mapErr("prune run pages", err)
		},
		Delete: func(runID int64) (n int64, young bool, err error) {
			err = s.write(ctx, "prune run pages", func(tx *sql.Tx) error {
				res, err := tx.ExecContext(ctx, sqlRunPagesDelete, runID, nanos(before), store.PruneRunPagesChunk)
				if err != nil {
					return err
				}
				if n, err = res.RowsAffected(); err != nil {
					return err
				}
				return tx.QueryRowContext(ctx, sqlRunPagesYoung, runID, nanos(before)).Scan(&young)
			})
			if err != nil {
				n = 0 // rolled back
			}
			return n, young, err
		},
	}.Walk()
}
