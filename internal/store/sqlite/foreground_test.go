package sqlite

import (
	"context"
	"testing"
	"time"
)

// TestForegroundPause: a merge transaction waits while a foreground
// transaction waits for the write connection, starts as soon as none does,
// and waits at most mergeYield.
func TestForegroundPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var f foreground

	start := time.Now()
	f.pause(ctx)
	if d := time.Since(start); d >= mergeYield {
		t.Fatalf("pause with nobody waiting took %s", d)
	}

	f.enter()
	done := make(chan struct{})
	go func() { f.pause(ctx); close(done) }()
	select {
	case <-done:
		t.Fatal("pause returned while a foreground transaction waited")
	case <-time.After(mergeYield / 5):
	}
	f.leave()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not return once nobody waited")
	}

	// Nobody leaves: the round goes on after mergeYield.
	f.enter()
	defer f.leave()
	start = time.Now()
	f.pause(ctx)
	if d := time.Since(start); d < mergeYield {
		t.Fatalf("pause returned after %s with a foreground transaction waiting, want at least %s", d, mergeYield)
	}
}
