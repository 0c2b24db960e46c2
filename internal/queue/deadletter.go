package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// ErrSyncPaused: a dead letter of a paused sync is not re-queued (a queued
// run of a paused sync would complete without running); resume it first.
var ErrSyncPaused = errors.New("the sync is paused; resume it first")

// RequeueParams configures RequeueDeadLetter.
type RequeueParams struct {
	// DeadLetters holds the entry; Store is read for the sync's state.
	// Both are required (a store usually implements both).
	DeadLetters barrier.DeadLetters
	Store       store.Store
	// Enqueue queues a run of a sync now: (*Service).Enqueue. Nil is
	// allowed with MarkOnly, or when no entry names a sync; the CLI opens
	// its queue lazily through it.
	Enqueue func(ctx context.Context, syncID, reason string) (Enqueued, error)
	// ID is the entry to re-queue; By names the person (recorded).
	ID int64
	By string
	// SyncID, if set, is the sync the entry must belong to (the sync
	// page's): another sync's entry is not found.
	SyncID string
	// MarkOnly marks the entry re-queued without queueing a run (its sync
	// left the config, or the person ran the sync by other means).
	MarkOnly bool
	// Clock stamps the entry's RequeuedAt; nil means the wall clock.
	Clock clock.Clock
}

// Requeued says what RequeueDeadLetter did.
type Requeued struct {
	// DeadLetter is the entry, as marked re-queued.
	DeadLetter barrier.DeadLetter
	// Queued reports whether a run of the entry's sync was queued; Run is
	// its job (Run.Duplicate: a run of the sync was already queued or
	// working, and it is the one that redoes the work). Nothing is queued
	// for MarkOnly or for an entry that names no sync (a named barrier of
	// `oncesync checkpoint check --wait`, whose caller re-runs itself).
	Queued bool
	Run    Enqueued
	// Working, when not 0, is a run of the sync newer than the parked one
	// that is still working (a partitioned run whose coordinator job ended
	// while its partitions work): it redoes the work, so none was queued.
	Working int64
}

// RequeueDeadLetter re-queues a parked dead letter (docs/guide.md#the-checkpoint-barrier): the work of a
// partitioned sync is redone by a new run of the whole sync, queued like
// "run now" (the parked run's pinned snapshot is stale by definition, so its
// partition jobs cannot simply run again), then the entry is marked
// re-queued. The run is queued first: when it cannot be (the sync is paused
// or not in the config, the queue is unreachable) the entry stays parked.
// Queueing is idempotent per sync (a run already queued is reused), so two
// people re-queueing at once, or a crash between queueing and marking,
// queue one run. The web UI and `oncesync deadletter requeue` both use it.
func RequeueDeadLetter(ctx context.Context, p RequeueParams) (Requeued, error) {
	var out Requeued
	if p.DeadLetters == nil || p.Store == nil {
		return out, errors.New("queue: RequeueDeadLetter needs DeadLetters and Store")
	}
	d, err := barrier.Requeue(ctx, barrier.RequeueParams{
		Store: p.DeadLetters, ID: p.ID, By: p.By, Clock: p.Clock,
		Enqueue: func(ctx context.Context, d barrier.DeadLetter) error {
			if p.SyncID != "" && d.SyncID != p.SyncID {
				return fmt.Errorf("%w: dead letter %d is not one of sync %s's", store.ErrNotFound, d.ID, p.SyncID)
			}
			if p.MarkOnly || d.SyncID == "" {
				return nil
			}
			row, err := p.Store.GetSync(ctx, d.SyncID)
			switch {
			case err == nil && row.State == store.SyncPaused:
				return fmt.Errorf("sync %s: %w", d.SyncID, ErrSyncPaused)
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("read sync %s: %w", d.SyncID, err)
			}
			// A run started since the parked one and still working reads
			// the source anew: it redoes the work. Its coordinator's job may
			// have ended already (partition jobs carry the run), so the
			// queue would take another run, which would end skipped.
			if runs, err := p.Store.ListRuns(ctx, d.SyncID, 1); err != nil {
				return fmt.Errorf("read the runs of sync %s: %w", d.SyncID, err)
			} else if len(runs) == 1 && runs[0].State == store.RunRunning && runs[0].ID > d.RunID {
				out.Queued, out.Working = true, runs[0].ID
				return nil
			}
			if p.Enqueue == nil {
				return errors.New("no queue to queue a run on")
			}
			e, err := p.Enqueue(ctx, d.SyncID, ReasonManual)
			if err != nil {
				return err
			}
			out.Queued, out.Run = true, e
			return nil
		},
	})
	if err != nil {
		return Requeued{DeadLetter: d}, err
	}
	out.DeadLetter = d
	return out, nil
}
