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

// runResult is what Run returned.
type runResult struct {
	run store.Run
	err error
}

// runStalled starts Run with p's source stalling at its second page read
// (p.Source becomes the stalling source), and returns once that read
// waits; close src.release to let it answer.
func runStalled(t *testing.T, p *Params) (*stallingSource, <-chan runResult) {
	t.Helper()
	src := &stallingSource{Source: p.Source, stallAt: 2, entered: make(chan struct{}), release: make(chan struct{})}
	p.Source = src
	done := make(chan runResult, 1)
	go func(p Params) {
		r, err := Run(t.Context(), p)
		done <- runResult{r, err}
	}(*p)
	<-src.entered
	return src, done
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
	src, done := runStalled(t, &p)
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

// TestAnUnansweredReadGivesUp: a page read that stays unanswered (a lock
// another session holds on the source's table) held its run, and the
// sync's lease, for as long as the lock lasted: every later run was
// skipped as already running. At the sync's source timeout the read is cut
// and the run fails with source_unavailable, naming the limit and what may
// hold it; the pages before it stay delivered, and the next run goes on
// from there without writing any record twice.
func TestAnUnansweredReadGivesUp(t *testing.T) {
	t.Parallel()
	tb := setup(t, 300, destination.CapVerify)
	p := tb.params(t, "id")
	p.LeaseTTL = 10 * time.Minute // the fake clock moves 2 minutes while the read waits
	p.Sync.PageSize = 100
	p.Sync.SourceTimeout = 2 * time.Minute
	src, done := runStalled(t, &p)
	tb.clock.Advance(2*time.Minute - time.Second)
	select {
	case res := <-done:
		t.Fatalf("the run ended before its source timeout: %+v, %v", res.run, res.err)
	case <-time.After(50 * time.Millisecond):
	}
	tb.clock.Advance(time.Second)
	res := <-done
	if got := failure.CodeOf(res.err); got != failure.SourceUnavailable {
		t.Fatalf("run after its read went unanswered for 2m: code %s (%v), want %s", got, res.err, failure.SourceUnavailable)
	}
	for _, want := range []string{"read a page: no answer within 2m0s", "a lock another session holds", "source.timeout"} {
		if !strings.Contains(res.err.Error(), want) {
			t.Errorf("error %q does not say %q", res.err, want)
		}
	}
	if res.run.State != store.RunFailed || res.run.Written > 100 {
		t.Fatalf("run: state %s, written %d; want failed with at most the first page written", res.run.State, res.run.Written)
	}

	// The lock is gone: the next run delivers the rest, nothing twice.
	p.Source = src.Source
	r2, err := Run(t.Context(), p)
	if err != nil || r2.State != store.RunSucceeded {
		t.Fatalf("next run: %+v, %v", r2, err)
	}
	if got := res.run.Written + r2.Written; got != 300 {
		t.Fatalf("written %d + %d, want 300 in all", res.run.Written, r2.Written)
	}
	if _, _, d := tb.dest.stats(); d != 0 {
		t.Fatalf("%d records written twice", d)
	}
}
