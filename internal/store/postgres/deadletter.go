package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
)

// The checkpoint dead-letter list (docs/guide.md#the-checkpoint-barrier, migration 0004): Store
// implements store.DeadLetters with the semantics of store/sqlite.
var _ store.DeadLetters = (*Store)(nil)

const deadLetterColumns = `id, sync_id, run_id, partition_no, barrier_key, reason, token, snapshot,
	holder_token, holder_snapshot, attempts, payload, created_at, requeued_at, requeued_by`

func scanDeadLetter(sc pgx.Row) (store.DeadLetter, error) {
	var (
		d        store.DeadLetter
		created  int64
		requeued *int64
	)
	err := sc.Scan(&d.ID, &d.SyncID, &d.RunID, &d.Partition, &d.Key, &d.Reason, &d.Token, &d.Snapshot,
		&d.HolderToken, &d.HolderSnapshot, &d.Attempts, &d.Payload, &created, &requeued, &d.RequeuedBy)
	if err != nil {
		return store.DeadLetter{}, err
	}
	d.CreatedAt = fromNanos(created)
	d.RequeuedAt = fromNullNanos(requeued)
	return d, nil
}

// AddDeadLetter stores d with a new ID (CreatedAt defaults to the store's
// clock) and returns it as stored.
func (s *Store) AddDeadLetter(ctx context.Context, d store.DeadLetter) (store.DeadLetter, error) {
	switch {
	case d.Key == "":
		return store.DeadLetter{}, invalidf("dead letter without a barrier key")
	case d.Reason == "":
		return store.DeadLetter{}, invalidf("dead letter without a reason")
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = s.now()
	}
	stored, err := scanDeadLetter(s.pool.QueryRow(ctx, `INSERT INTO dead_letters (sync_id, run_id, partition_no, barrier_key,
		reason, token, snapshot, holder_token, holder_snapshot, attempts, payload, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING `+deadLetterColumns,
		d.SyncID, d.RunID, d.Partition, d.Key, d.Reason, d.Token, d.Snapshot,
		d.HolderToken, d.HolderSnapshot, d.Attempts, d.Payload, nanos(d.CreatedAt)))
	if err != nil {
		return store.DeadLetter{}, mapErr("add dead letter", err)
	}
	return stored, nil
}

// GetDeadLetter returns one dead letter, or an error wrapping
// store.ErrNotFound.
func (s *Store) GetDeadLetter(ctx context.Context, id int64) (store.DeadLetter, error) {
	d, err := scanDeadLetter(s.pool.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.DeadLetter{}, fmt.Errorf("dead letter %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.DeadLetter{}, mapErr("get dead letter", err)
	}
	return d, nil
}

// ListDeadLetters returns dead letters newest first, parked ones only unless
// p.IncludeRequeued.
func (s *Store) ListDeadLetters(ctx context.Context, p store.ListDeadLettersParams) ([]store.DeadLetter, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters
		WHERE ($1 = '' OR sync_id = $1) AND ($2 OR requeued_at IS NULL)
		ORDER BY id DESC LIMIT $3`,
		p.SyncID, p.IncludeRequeued, limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("list dead letters", err)
	}
	defer rows.Close()
	var out []store.DeadLetter
	for rows.Next() {
		d, err := scanDeadLetter(rows)
		if err != nil {
			return nil, mapErr("list dead letters", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("list dead letters", err)
	}
	return out, nil
}

// RequeueDeadLetter marks a parked dead letter re-queued by `by` at `at`.
// The conditional UPDATE lets only the first of concurrent calls succeed;
// later ones get store.ErrAlreadyRequeued, an unknown id
// store.ErrNotFound.
func (s *Store) RequeueDeadLetter(ctx context.Context, id int64, by string, at time.Time) (store.DeadLetter, error) {
	if at.IsZero() {
		at = s.now()
	}
	d, err := scanDeadLetter(s.pool.QueryRow(ctx, `UPDATE dead_letters SET requeued_at = $1, requeued_by = $2
		WHERE id = $3 AND requeued_at IS NULL RETURNING `+deadLetterColumns, nanos(at), by, id))
	if err == nil {
		return d, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.DeadLetter{}, mapErr("requeue dead letter", err)
	}
	cur, err := s.GetDeadLetter(ctx, id)
	if err != nil {
		return store.DeadLetter{}, err
	}
	return cur, fmt.Errorf("dead letter %d: %w", id, store.ErrAlreadyRequeued)
}
