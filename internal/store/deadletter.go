package store

import (
	"context"
	"errors"
	"time"
)

// Dead letters: work the checkpoint barrier (internal/barrier) parked
// after repeated mismatches. The types live here, with the other stored
// records, so that the drivers implement an interface of the package they
// build on rather than one above them; internal/barrier aliases them.

// ErrAlreadyRequeued: RequeueDeadLetter on an entry a person already
// re-queued.
var ErrAlreadyRequeued = errors.New("dead letter already requeued")

// DeadLetter is work parked after repeated mismatches at the checkpoint
// barrier: stored, shown, and re-queued by a person. It holds no personal data: keys,
// tokens and snapshot hashes only.
type DeadLetter struct {
	// ID is assigned by the store.
	ID int64
	// SyncID, RunID and Partition (1-based) name the parked work of a
	// partitioned sync; they are empty/zero for a named barrier such as
	// `oncesync checkpoint check --wait`.
	SyncID    string
	RunID     int64
	Partition int
	// Key is the barrier key (or barrier name) that kept mismatching.
	Key string
	// Reason is a short code: internal/barrier's ReasonMismatch,
	// ReasonSourceChanged, or another.
	Reason string
	// Token and Snapshot are the parked worker's; HolderToken and
	// HolderSnapshot the barrier's at the last check.
	Token, Snapshot             string
	HolderToken, HolderSnapshot string
	// Attempts is the number of checks made (1 + retries).
	Attempts int
	// Payload is what a re-queue needs to run the work again (e.g. a job's
	// JSON args); opaque to the store. Optional.
	Payload string
	// CreatedAt is when the work was parked.
	CreatedAt time.Time
	// RequeuedAt is when a person re-queued it (zero: still parked), and
	// RequeuedBy who.
	RequeuedAt time.Time
	RequeuedBy string
}

// Requeued reports whether a person re-queued the entry.
func (d DeadLetter) Requeued() bool { return !d.RequeuedAt.IsZero() }

// ListDeadLettersParams filters ListDeadLetters.
type ListDeadLettersParams struct {
	// SyncID keeps one sync's entries; empty keeps all.
	SyncID string
	// IncludeRequeued keeps re-queued entries too; by default only parked
	// ones are listed.
	IncludeRequeued bool
	// Limit caps the number of entries (newest first); <= 0 means all.
	Limit int
}

// DeadLetters is the store's dead-letter list. store/sqlite and
// store/postgres implement it.
type DeadLetters interface {
	// AddDeadLetter stores d (ID and, if zero, CreatedAt are filled in) and
	// returns it as stored.
	AddDeadLetter(ctx context.Context, d DeadLetter) (DeadLetter, error)
	// GetDeadLetter returns one entry, or an error wrapping ErrNotFound.
	GetDeadLetter(ctx context.Context, id int64) (DeadLetter, error)
	// ListDeadLetters returns entries newest first.
	ListDeadLetters(ctx context.Context, p ListDeadLettersParams) ([]DeadLetter, error)
	// RequeueDeadLetter marks a parked entry re-queued by `by` at `at` and
	// returns it; an unknown id wraps ErrNotFound, an entry already
	// re-queued gives ErrAlreadyRequeued. Exactly one of several concurrent
	// calls for one entry succeeds.
	RequeueDeadLetter(ctx context.Context, id int64, by string, at time.Time) (DeadLetter, error)
}
