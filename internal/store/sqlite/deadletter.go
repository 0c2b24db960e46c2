package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// The checkpoint dead-letter list (docs/guide.md#the-checkpoint-barrier, migration 0004): Store
// implements store.DeadLetters.
var _ store.DeadLetters = (*Store)(nil)

const deadLetterColumns = `id, sync_id, run_id, partition_no, barrier_key, reason, token, snapshot,
	holder_token, holder_snapshot, attempts, payload, created_at, requeued_at, requeued_by`

func scanDeadLetter(sc rowScanner) (store.DeadLetter, error) {
	var (
		d        store.DeadLetter
		created  int64
		requeued sql.NullInt64
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
	d.RequeuedAt, d.RequeuedBy = time.Time{}, ""
	var stored store.DeadLetter
	err := s.write(ctx, "add dead letter", func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, `INSERT INTO dead_letters (sync_id, run_id, partition_no, barrier_key, reason,
			token, snapshot, holder_token, holder_snapshot, attempts, payload, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+deadLetterColumns,
			d.SyncID, d.RunID, d.Partition, d.Key, d.Reason, d.Token, d.Snapshot,
			d.HolderToken, d.HolderSnapshot, d.Attempts, d.Payload, nanos(d.CreatedAt))
		var err error
		stored, err = scanDeadLetter(row)
		return err
	})
	if err != nil {
		return store.DeadLetter{}, err
	}
	return stored, nil
}

// GetDeadLetter returns one dead letter, or an error wrapping
// store.ErrNotFound.
func (s *Store) GetDeadLetter(ctx context.Context, id int64) (store.DeadLetter, error) {
	d, err := scanDeadLetter(s.r.QueryRowContext(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.DeadLetter{}, fmt.Errorf("dead letter %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.DeadLetter{}, s.mapErr("get dead letter", err)
	}
	return d, nil
}

// ListDeadLetters returns dead letters newest first, parked ones only unless
// p.IncludeRequeued.
func (s *Store) ListDeadLetters(ctx context.Context, p store.ListDeadLettersParams) ([]store.DeadLetter, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters
		WHERE (? = '' OR sync_id = ?) AND (? OR requeued_at IS NULL)
		ORDER BY id DESC LIMIT ?`,
		p.SyncID, p.SyncID, p.IncludeRequeued, limitArg(p.Limit))
	if err != nil {
		return nil, s.mapErr("list dead letters", err)
	}
	defer rows.Close()
	var out []store.DeadLetter
	for rows.Next() {
		d, err := scanDeadLetter(rows)
		if err != nil {
			return nil, s.mapErr("list dead letters", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr("list dead letters", err)
	}
	return out, nil
}

// RequeueDeadLetter marks a parked dead letter re-queued by `by` at `at`.
// Only the first of concurrent calls succeeds; later ones get
// store.ErrAlreadyRequeued, an unknown id store.ErrNotFound.
func (s *Store) RequeueDeadLetter(ctx context.Context, id int64, by string, at time.Time) (store.DeadLetter, error) {
	if at.IsZero() {
		at = s.now()
	}
	var d store.DeadLetter
	err := s.write(ctx, "requeue dead letter", func(tx *sql.Tx) error {
		var err error
		d, err = scanDeadLetter(tx.QueryRowContext(ctx, `UPDATE dead_letters SET requeued_at = ?, requeued_by = ?
			WHERE id = ? AND requeued_at IS NULL RETURNING `+deadLetterColumns, nanos(at), by, id))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		cur, err := scanDeadLetter(tx.QueryRowContext(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("dead letter %d: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		d = cur
		return fmt.Errorf("dead letter %d: %w", id, store.ErrAlreadyRequeued)
	})
	if errors.Is(err, store.ErrAlreadyRequeued) {
		return d, err
	}
	if err != nil {
		return store.DeadLetter{}, err
	}
	return d, nil
}
