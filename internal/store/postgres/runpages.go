package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
)

const runPageColumns = `run_id, page, read, claimed, sent, replayed, rejected, in_doubt, requests, checkpointed_at`

func validRunPage(p store.RunPage) error { return invalid(p.Check()) }

const sqlRunPagePut = `INSERT INTO run_pages (` + runPageColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
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
	return mapErr("record run page", s.recordRunPage(ctx, s.pool, p))
}

// recordRunPage is RecordRunPage on q (the pool or the caller's
// transaction), p already checked by validRunPage. Driver errors are returned
// unmapped.
func (s *Store) recordRunPage(ctx context.Context, q querier, p store.RunPage) error {
	_, err := q.Exec(ctx, sqlRunPagePut, s.runPageArgs(p)...)
	return err
}

// runPageArgs are sqlRunPagePut's arguments for p.
func (s *Store) runPageArgs(p store.RunPage) []any {
	at := p.CheckpointedAt
	if at.IsZero() {
		at = s.now()
	}
	return []any{p.RunID, p.Page, p.Read, p.Claimed, p.Sent, p.Replayed, p.Rejected, p.InDoubt, p.Requests, nanos(at)}
}

// ListRunPages returns a run's pages, oldest first; limit <= 0 returns all.
func (s *Store) ListRunPages(ctx context.Context, runID int64, limit int) ([]store.RunPage, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runPageColumns+` FROM run_pages WHERE run_id = $1 ORDER BY page LIMIT $2`,
		runID, limitArg(limit))
	if err != nil {
		return nil, mapErr("list run pages", err)
	}
	defer rows.Close()
	var out []store.RunPage
	for rows.Next() {
		var (
			p  store.RunPage
			at int64
		)
		if err := rows.Scan(&p.RunID, &p.Page, &p.Read, &p.Claimed, &p.Sent, &p.Replayed, &p.Rejected, &p.InDoubt, &p.Requests, &at); err != nil {
			return nil, mapErr("list run pages", err)
		}
		p.CheckpointedAt = fromNanos(at)
		out = append(out, p)
	}
	return out, mapErr("list run pages", rows.Err())
}

// Run page prune statements (docs/guide.md#the-ledger-and-its-retention). Each seeks on the
// primary key (run_id, page). A CTE's delete is not visible to the rest of
// its statement, so "young" asks for pages at or after the cut.
const (
	sqlRunPagesNextRun = `SELECT run_id FROM run_pages WHERE run_id > $1 ORDER BY run_id LIMIT 1`
	sqlRunPagesDelete  = `WITH gone AS (
		DELETE FROM run_pages WHERE run_id = $1 AND page IN (
			SELECT page FROM run_pages WHERE run_id = $1 AND checkpointed_at < $2 ORDER BY page LIMIT $3)
		RETURNING 1)
	SELECT (SELECT count(*) FROM gone), EXISTS (SELECT 1 FROM run_pages WHERE run_id = $1 AND checkpointed_at >= $2)`
)

// PruneRunPages deletes the page rows checkpointed before before
// (store.RunPagesPruner.Walk), one statement per chunk.
func (s *Store) PruneRunPages(ctx context.Context, before time.Time) (int64, error) {
	return store.RunPagesPruner{
		Next: func(after int64) (int64, bool, error) {
			var runID int64
			err := s.pool.QueryRow(ctx, sqlRunPagesNextRun, after).Scan(&runID)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0, false, nil
			}
			return runID, err == nil, mapErr("prune run pages", err)
		},
		Delete: func(runID int64) (n int64, young bool, err error) {
			err = s.pool.QueryRow(ctx, sqlRunPagesDelete, runID, nanos(before), store.PruneRunPagesChunk).Scan(&n, &young)
			return n, young, mapErr("prune run pages", err)
		},
	}.Walk()
}
