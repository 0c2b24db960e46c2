package barrier

import (
	"context"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// Reasons recorded on dead letters.
const (
	// ReasonMismatch: the barrier kept holding another snapshot (failure
	// code checkpoint_mismatch, docs/recovery.md#checkpoint_mismatch).
	ReasonMismatch = "checkpoint_mismatch"
	// ReasonSourceChanged: a partition's source snapshot no longer matched
	// the one its run pinned (docs/guide.md#the-checkpoint-barrier; failure code source_changed_during_run).
	ReasonSourceChanged = "source_changed_during_run"
)

// The dead-letter types are the store's (internal/store/deadletter.go).
type (
	DeadLetter            = store.DeadLetter
	ListDeadLettersParams = store.ListDeadLettersParams
	DeadLetters           = store.DeadLetters
)

// ErrAlreadyRequeued: RequeueDeadLetter on an entry a person already
// re-queued.
var ErrAlreadyRequeued = store.ErrAlreadyRequeued

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
