package apiclient

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestFanOutLetsCallsInFlightFinish: a failure stops the handing out of
// calls, but a call already in flight is not cancelled (cut short after
// its request left, it would be in doubt and could still be applied after
// a read-back).
func TestFanOutLetsCallsInFlightFinish(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	started := make(chan struct{})
	var calls, cancelled atomic.Int64
	err := FanOut(t.Context(), 10, 2, func(ctx context.Context, i int) error {
		calls.Add(1)
		switch i {
		case 0:
			<-started // fail while call 1 is in flight
			return boom
		case 1:
			close(started)
			// Before, a failure cancelled this context within
			// microseconds; give it far longer than that to show.
			select {
			case <-ctx.Done():
				cancelled.Add(1)
			case <-time.After(100 * time.Millisecond):
			}
			return nil
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("FanOut = %v, want the failure", err)
	}
	if cancelled.Load() != 0 {
		t.Fatal("a call in flight saw its context cancelled by another's failure")
	}
	if n := calls.Load(); n >= 10 {
		t.Fatalf("%d calls: handing out did not stop after the failure", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := FanOut(ctx, 3, 1, func(context.Context, int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("FanOut on a cancelled context = %v", err)
	}
}
