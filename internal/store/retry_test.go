package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

func TestRetryFor(t *testing.T) {
	t.Parallel()
	busy := errors.New("busy")
	again := func(err error) bool { return errors.Is(err, busy) }
	calls := 0
	if err := store.RetryFor(t.Context(), time.Second, again, func() error {
		if calls++; calls < 3 {
			return busy
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("busy twice, then done: %v after %d calls, want nil after 3", err, calls)
	}
	other := errors.New("other")
	calls = 0
	if err := store.RetryFor(t.Context(), time.Second, again, func() error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Fatalf("another error: %v after %d calls, want it after 1", err, calls)
	}
	calls = 0
	if err := store.RetryFor(t.Context(), 50*time.Millisecond, again, func() error { calls++; return busy }); !errors.Is(err, busy) || calls < 2 {
		t.Fatalf("busy past the limit: %v after %d calls, want busy after a few", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := store.RetryFor(ctx, time.Second, again, func() error { return busy }); !errors.Is(err, busy) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v, want busy and canceled", err)
	}
}
