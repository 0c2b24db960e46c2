package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Reasons recorded on dead letters.
const (
	// ReasonMismatch: the barrier kept holding another snapshot.
	ReasonMismatch = "checkpoint_mismatch"
	// ReasonSourceChanged: a partition's source snapshot no longer matched
	// the one its run pinned (SPEC §11; failure code source_changed_during_run).
	ReasonSourceChanged = "source_changed_during_run"
)

// ErrAlreadyRequeued: RequeueDeadLetter on an entry a person already
// re-queued.
var ErrAlreadyRequeued = errors.New("dead letter already requeued")

// DeadLetter is work parked after repeated barrier mismatches (SPEC §11):
// stored, shown, and re-queued by a person. It holds no personal data: keys,
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
	// Reason is ReasonMismatch, ReasonSourceChanged or another short code.
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
	// GetDeadLetter returns one entry, or an error wrapping store.ErrNotFound.
	GetDeadLetter(ctx context.Context, id int64) (DeadLetter, error)
	// ListDeadLetters returns entries newest first.
	ListDeadLetters(ctx context.Context, p ListDeadLettersParams) ([]DeadLetter, error)
	// RequeueDeadLetter marks a parked entry re-queued by `by` at `at` and
	// returns it; an unknown id wraps store.ErrNotFound (package
	// internal/store), an entry already
	// re-queued gives ErrAlreadyRequeued. Exactly one of several concurrent
	// calls for one entry succeeds.
	RequeueDeadLetter(ctx context.Context, id int64, by string, at time.Time) (DeadLetter, error)
}

// RequeueParams configures Requeue.
type RequeueParams struct {
	// Store holds the dead letters. Required.
	Store DeadLetters
	// ID is the entry to re-queue.
	ID int64
	// By names the person re-queueing (recorded).
	By string
	// Enqueue, if set, schedules the work again. It runs before the entry
	// is marked, so a failure leaves the entry parked; it must be
	// idempotent per entry ID (e.g. a unique River job keyed by it), since
	// a crash between enqueue and mark, or two people re-queueing at once,
	// can call it twice.
	Enqueue func(ctx context.Context, d DeadLetter) error
	// Clock stamps RequeuedAt; nil means the wall clock.
	Clock clock.Clock
}

// Requeue re-queues a parked dead letter: Enqueue (if any), then mark it
// re-queued. It returns the marked entry.
func Requeue(ctx context.Context, p RequeueParams) (DeadLetter, error) {
	if p.Store == nil {
		return DeadLetter{}, fmt.Errorf("%w: no dead-letter store", ErrInvalid)
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	d, err := p.Store.GetDeadLetter(ctx, p.ID)
	if err != nil {
		return DeadLetter{}, err
	}
	if d.Requeued() {
		return d, fmt.Errorf("dead letter %d: %w at %s by %q", d.ID, ErrAlreadyRequeued, d.RequeuedAt.UTC().Format(time.RFC3339), d.RequeuedBy)
	}
	if p.Enqueue != nil {
		if err := p.Enqueue(ctx, d); err != nil {
			return d, fmt.Errorf("dead letter %d: enqueue: %w", d.ID, err)
		}
	}
	return p.Store.RequeueDeadLetter(ctx, p.ID, p.By, clk.Now())
}
