package source_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/source"
)

// TestReadWithin: a read the limit cuts is a *source.NoAnswerError (source
// unavailable, retryable) naming the source, the read, the limit and what
// may hold it; a read whose caller stopped waiting keeps its own error; no
// limit leaves the read alone.
func TestReadWithin(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	blocked := func(started chan<- struct{}) func(context.Context) error {
		return func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
	}

	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- source.ReadWithin(t.Context(), clk, time.Minute, "postgres:h/db/t", "read a page", blocked(started))
	}()
	<-started
	clk.Advance(time.Minute)
	err := <-done
	var na *source.NoAnswerError
	if !errors.As(err, &na) || !errors.Is(err, source.ErrUnavailable) {
		t.Fatalf("cut read: %v, want a *source.NoAnswerError that is ErrUnavailable", err)
	}
	if want := "postgres:h/db/t: read a page: no answer within 1m0s: a lock another session holds"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("cut read says %q, want it to start %q", err, want)
	}

	ctx, cancel := context.WithCancel(t.Context())
	started = make(chan struct{})
	go func() { done <- source.ReadWithin(ctx, clk, time.Minute, "s", "read a page", blocked(started)) }()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.As(err, &na) {
		t.Fatalf("read whose caller stopped: %v, want context.Canceled and no NoAnswerError", err)
	}

	var sawDeadline bool
	err = source.ReadWithin(t.Context(), clk, 0, "s", "read a page", func(ctx context.Context) error {
		_, sawDeadline = ctx.Deadline()
		return nil
	})
	if err != nil || sawDeadline {
		t.Fatalf("no limit: err %v, deadline set %v", err, sawDeadline)
	}
}
