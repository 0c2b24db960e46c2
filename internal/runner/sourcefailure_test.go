package runner

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestSourceFailureCodes: each source sentinel maps to its code; a refused
// credential (a SaaS source's token) is source_auth, not retried.
func TestSourceFailureCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want failure.Code
	}{
		{source.ErrAuth, failure.SourceAuth},
		{source.ErrInvalid, failure.SourceQueryInvalid},
		{source.ErrBadCursor, failure.SourceQueryInvalid},
		{source.ErrChanged, failure.SourceChangedDuringRun},
		{source.ErrUnavailable, failure.SourceUnavailable},
	} {
		err := sourceFailure(context.Background(), fmt.Errorf("shopify:x: %w: detail", tc.err))
		if got := failure.CodeOf(err); got != tc.want {
			t.Errorf("%v: code %s, want %s", tc.err, got, tc.want)
		}
	}
	if failure.Retryable(sourceFailure(context.Background(), source.ErrAuth)) {
		t.Error("source_auth must not be retried")
	}
}

// stallingSource holds its stallAt-th page read until release is closed,
// after closing entered.
type stallingSource struct {
	source.Source
	stallAt          int
	reads            atomic.Int32
	entered, release chan struct{}
}

func (s *stallingSource) ReadPage(ctx context.Context, cursor string, n int) (source.Page, error) {
	if int(s.reads.Add(1)) == s.stallAt {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
			return source.Page{}, ctx.Err()
		}
	}
	return s.Source.ReadPage(ctx, cursor, n)
}

// TestAnUnansweredReadIsTold: a page read waiting on another session's
// lock (an ALTER TABLE on the source's table) kept its run quiet, its lease
// renewed, for as long as the lock lasted. After readNoticeAfter it is told
// once, and the run goes on when the read answers.
func TestAnUnansweredReadIsTold(t *testing.T) {
	t.Parallel()
	tb := setup(t, 300, destination.CapVerify)
	p := tb.params(t, "id")
	p.LeaseTTL = 10 * time.Minute // the fake clock moves 30 s while the read waits
	var logs testenv.Output
	p.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src := &stallingSource{Source: p.Source, stallAt: 2, entered: make(chan struct{}), release: make(chan struct{})}
	p.Source = src
	type result struct {
		run store.Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := Run(t.Context(), p)
		done <- result{r, err}
	}()
	<-src.entered
	const told = "the source has not answered a page read yet"
	tb.clock.Advance(readNoticeAfter - time.Second)
	if strings.Contains(logs.String(), told) {
		t.Fatalf("told before %s: %s", readNoticeAfter, logs.String())
	}
	tb.clock.Advance(time.Second)
	if got := logs.String(); !strings.Contains(got, told) || !strings.Contains(got, "waited=30s") {
		t.Fatalf("a read unanswered for %s was not told: %q", readNoticeAfter, got)
	}
	close(src.release)
	res := <-done
	if res.err != nil || res.run.State != store.RunSucceeded || res.run.Written != 300 {
		t.Fatalf("run after the read answered: %+v, %v", res.run, res.err)
	}
	if n := strings.Count(logs.String(), told); n != 1 {
		t.Fatalf("told %d times, want once: %s", n, logs.String())
	}
}
