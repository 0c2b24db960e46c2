package barrier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Backoff of Wait (docs/guide.md#the-checkpoint-barrier): full jitter, exponential from BackoffBase, ×2,
// capped at BackoffCap; DefaultRetries retries, then the work is dead-lettered.
const (
	BackoffBase    = 1 * time.Second
	BackoffCap     = 30 * time.Second
	DefaultRetries = 3
)

// ErrDeadLettered: Wait gave up on a barrier that kept mismatching and parked
// the work in the dead-letter list (see *DeadLetteredError).
var ErrDeadLettered = errors.New("checkpoint still mismatched after retries: work dead-lettered")

// DeadLetteredError is Wait's error after the last retry. It wraps
// ErrDeadLettered.
type DeadLetteredError struct {
	// Entry is the dead letter, as stored when Stored.
	Entry DeadLetter
	// Stored is false when Wait had no DeadLetters to store Entry in.
	Stored bool
}

func (e *DeadLetteredError) Error() string {
	where := "stored as dead letter " + fmt.Sprint(e.Entry.ID)
	if !e.Stored {
		where = "not stored (no dead-letter store)"
	}
	return fmt.Sprintf("checkpoint %s: %v (%s; %d checks; holder %s at snapshot %s, ours %s at %s)",
		e.Entry.Key, ErrDeadLettered, where, e.Entry.Attempts, e.Entry.HolderToken, e.Entry.HolderSnapshot, e.Entry.Token, e.Entry.Snapshot)
}

// Unwrap returns ErrDeadLettered.
func (e *DeadLetteredError) Unwrap() error { return ErrDeadLettered }

// WaitParams configures Wait.
type WaitParams struct {
	// Key, Token, Snapshot and TTL are Check's arguments.
	Key, Token, Snapshot string
	TTL                  time.Duration
	// VerifyOnly uses Verify instead of Check: the barrier is never
	// created from Snapshot here, and Missing is retried like a mismatch
	// (for partitions, whose coordinator pins the snapshot).
	VerifyOnly bool
	// Pin, with VerifyOnly, is the reference point the barrier's creator
	// pinned, as the caller holds it outside Redis (a partition's job
	// carries its coordinator's token and snapshot). A Missing barrier (its
	// key lost to a Redis restart without persistence, a flush, an eviction
	// or its TTL) is then created again at Pin with TTL, and Snapshot is
	// verified against it. The reference point stays the creator's, never
	// the caller's own view: a source that changed is still a Mismatch.
	// Nil: Missing is retried like a mismatch.
	Pin *Pin
	// Retries after the first check; 0 means DefaultRetries, < 0 none.
	Retries int
	// DeadLetters stores the entry after the last retry. Nil: the entry is
	// only returned in the *DeadLetteredError.
	DeadLetters DeadLetters
	// Entry is the template of the dead letter: SyncID, RunID, Partition,
	// Payload and Reason (default ReasonMismatch) are taken from it; the
	// rest is filled in.
	Entry DeadLetter
	// Sleep waits d or until ctx ends; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a uniformly random duration in [0, ceiling]; nil means
	// math/rand/v2.
	Jitter func(ceiling time.Duration) time.Duration
	// Clock stamps the dead letter; nil means the wall clock.
	Clock clock.Clock
}

// Pin is a barrier's reference point: its creator's token and snapshot.
type Pin struct {
	Token, Snapshot string
}

// BackoffCeiling is the upper bound of the sleep before retry n (0-based):
// min(BackoffCap, BackoffBase × 2^n). The sleep itself is uniform in
// [0, ceiling] (full jitter).
func BackoffCeiling(n int) time.Duration {
	if n < 0 {
		n = 0
	}
	d := BackoffBase
	for range n {
		d *= 2
		if d >= BackoffCap {
			return BackoffCap
		}
	}
	return min(d, BackoffCap)
}

// Wait checks the barrier until it answers Created or Aligned, sleeping with
// full-jitter exponential backoff after each Mismatch (or Missing, with
// VerifyOnly and no Pin; with a Pin, a Missing barrier is restored to it and
// verified at once). After the last retry it stores a dead letter and returns a
// *DeadLetteredError with the last Result. A Redis error ends the wait at
// once (wrapping store.ErrUnavailable when Redis is unreachable): the caller
// must not proceed, and retries the whole job later.
func (b *Barrier) Wait(ctx context.Context, p WaitParams) (Result, error) {
	retries := p.Retries
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	sleep, jitter, clk := p.Sleep, p.Jitter, p.Clock
	if sleep == nil {
		sleep = clock.Sleep
	}
	if jitter == nil {
		jitter = fullJitter
	}
	if clk == nil {
		clk = clock.Real{}
	}
	var (
		res Result
		err error
	)
	for attempt := 0; ; attempt++ {
		if p.VerifyOnly {
			res, err = b.Verify(ctx, p.Key, p.Snapshot)
			if err == nil && res.Outcome == Missing && p.Pin != nil {
				res, err = b.restore(ctx, p.Key, *p.Pin, p.Snapshot, p.TTL)
			}
		} else {
			res, err = b.Check(ctx, p.Key, p.Token, p.Snapshot, p.TTL)
		}
		if err != nil {
			return res, err
		}
		if res.Outcome == Created || res.Outcome == Aligned {
			return res, nil
		}
		if attempt == retries {
			break
		}
		if err := sleep(ctx, jitter(BackoffCeiling(attempt))); err != nil {
			return res, fmt.Errorf("checkpoint %s: waiting to retry: %w", p.Key, err)
		}
	}

	d := p.Entry
	d.Key, d.Token, d.Snapshot = p.Key, p.Token, p.Snapshot
	d.HolderToken, d.HolderSnapshot = res.HolderToken, res.HolderSnapshot
	d.Attempts = retries + 1
	if d.Reason == "" {
		d.Reason = ReasonMismatch
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = clk.Now()
	}
	if p.DeadLetters == nil {
		b.countDeadLetter()
		return res, &DeadLetteredError{Entry: d}
	}
	stored, err := p.DeadLetters.AddDeadLetter(ctx, d)
	if err != nil {
		return res, fmt.Errorf("checkpoint %s: still %s after %d retries, and the dead letter could not be stored: %w",
			p.Key, res.Outcome, retries, err)
	}
	b.countDeadLetter()
	return res, &DeadLetteredError{Entry: stored, Stored: true}
}

// restore creates the missing barrier at key again at pin (Check: if another
// caller restored it first, its value stands), then verifies snapshot
// against whatever the barrier now holds.
func (b *Barrier) restore(ctx context.Context, key string, pin Pin, snapshot string, ttl time.Duration) (Result, error) {
	res, err := b.Check(ctx, key, pin.Token, pin.Snapshot, ttl)
	if err != nil {
		return res, err
	}
	if res.Outcome == Created {
		b.log.LogAttrs(ctx, slog.LevelWarn, "checkpoint barrier restored from the pinned snapshot (its key was gone from Redis)",
			slog.String("key", key), slog.String("token", pin.Token), slog.String("snapshot", pin.Snapshot))
	}
	return b.Verify(ctx, key, snapshot)
}

func (b *Barrier) countDeadLetter() {
	if b.metrics != nil {
		b.metrics.deadLetters.Inc()
	}
}

func fullJitter(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}
