package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// wallManager grants for the TTL on the wall clock and, like a real lease
// store, gives up a renewal when its context is done.
type wallManager struct{}

func (wallManager) Acquire(_ context.Context, p AcquireParams) (Grant, error) {
	return Grant{SyncID: p.SyncID, Token: "t", Fence: 1, ExpiresAt: time.Now().Round(0).Add(p.TTL)}, nil
}

func (wallManager) Renew(ctx context.Context, g Grant, ttl time.Duration) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return g, err
	}
	g.ExpiresAt = time.Now().Round(0).Add(ttl)
	return g, nil
}

func (wallManager) Release(context.Context, Grant) error { return nil }

// TestHeldAfterSleep: a machine that slept (its wall clock ran on, its
// monotonic clock did not) wakes with the lease's monotonic expiry still
// ahead, but other processes count on the wall clock and may have taken the
// lease. The holder must count it gone too: its expiry and write deadline
// are past, Ensure reports ErrLost instead of letting a write start, and
// Keep cancels the work at once. A holder that did not sleep keeps working.
func TestHeldAfterSleep(t *testing.T) {
	t.Parallel()
	for _, slept := range []time.Duration{0, 31 * time.Second} {
		h, err := Hold(t.Context(), HoldParams{Manager: wallManager{}, SyncID: "s", RunID: 1, TTL: 30 * time.Second, Clock: clock.Real{}})
		if err != nil {
			t.Fatal(err)
		}
		if h.Expiry() == h.Expiry().Round(0) {
			t.Fatal("the local expiry has no monotonic reading: this test needs the real clock")
		}
		// What the sleep did: the wall clock is `slept` further from the
		// ask than the monotonic clock (the test cannot move the machine's
		// clocks apart, so it moves the lease's wall-clock expiry back).
		h.mu.Lock()
		h.wallAt = h.wallAt.Add(-slept)
		h.mu.Unlock()

		now := time.Now()
		asleep := slept > 0
		if got := h.Expiry().Before(now); got != asleep {
			t.Errorf("slept %s: expiry %s before now = %v, want %v", slept, h.Expiry().Sub(now), got, asleep)
		}
		if got := h.WriteDeadline().Before(now); got != asleep {
			t.Errorf("slept %s: write deadline in the past = %v, want %v", slept, got, asleep)
		}
		if err := h.Ensure(t.Context()); errors.Is(err, ErrLost) != asleep {
			t.Errorf("slept %s: Ensure = %v, want ErrLost: %v", slept, err, asleep)
		}
		work, cancel := context.WithCancelCause(t.Context())
		stop := h.Keep(work, cancel)
		if asleep {
			select {
			case <-work.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("slept %s: the work was not cancelled", slept)
			}
			if !errors.Is(context.Cause(work), ErrLost) {
				t.Errorf("slept %s: cause %v, want ErrLost", slept, context.Cause(work))
			}
		} else if work.Err() != nil {
			t.Errorf("slept %s: work cancelled: %v", slept, context.Cause(work))
		}
		stop()
		cancel(nil)
	}
}

// TestHeldWallStepWhileKept: the wall clock steps forward past the lease
// (an NTP correction, a clock set by hand) while Keep guards the work. The
// lease store and every other process on the machine count on the wall
// clock, so another run may take the sync at once; the holder must cancel
// its work, and with it every destination call in flight, within about a
// second, not at the monotonic expiry or the next renewal.
func TestHeldWallStepWhileKept(t *testing.T) {
	t.Parallel()
	h, err := Hold(t.Context(), HoldParams{Manager: wallManager{}, SyncID: "s", RunID: 1, TTL: 30 * time.Second, Clock: clock.Real{}})
	if err != nil {
		t.Fatal(err)
	}
	work, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	stop := h.Keep(work, cancel)
	defer stop()
	time.Sleep(50 * time.Millisecond) // armed before the step
	if work.Err() != nil {
		t.Fatalf("work cancelled before the step: %v", context.Cause(work))
	}
	// The step: the wall clock is an hour further from the ask than the
	// monotonic clock (moved on the lease's wall expiry, as above).
	h.mu.Lock()
	h.wallAt = h.wallAt.Add(-time.Hour)
	h.mu.Unlock()
	select {
	case <-work.Done():
	case <-time.After(3 * wallCheck):
		t.Fatal("the work goes on after a wall-clock step ended the lease")
	}
	if !errors.Is(context.Cause(work), ErrLost) {
		t.Errorf("cause %v, want ErrLost", context.Cause(work))
	}
}
