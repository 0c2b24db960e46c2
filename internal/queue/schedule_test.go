package queue

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// countingStore counts the reads of sync state the leader makes.
type countingStore struct {
	store.Store
	gets, pausedReads atomic.Int64
}

func (c *countingStore) GetSync(ctx context.Context, id string) (store.Sync, error) {
	c.gets.Add(1)
	return c.Store.GetSync(ctx, id)
}

func (c *countingStore) ListPausedSyncs(ctx context.Context) ([]string, error) {
	c.pausedReads.Add(1)
	return c.Store.ListPausedSyncs(ctx)
}

// tick calls the periodic constructor of every sync of b's config, as the
// leader's tick does, and returns the ids it would queue.
func (b *bundle) tick(t *testing.T) []string {
	t.Helper()
	var out []string
	for i := range b.cfg.Syncs {
		sc := &b.cfg.Syncs[i]
		args, _ := b.svc.scheduledRun(sc)()
		if args == nil {
			continue
		}
		a, ok := args.(RunSyncArgs)
		if !ok || a.SyncID != sc.ID || a.Reason != ReasonSchedule {
			t.Fatalf("constructor of %s made %#v", sc.ID, args)
		}
		out = append(out, a.SyncID)
	}
	return out
}

func publishAll(t *testing.T, b *bundle) {
	t.Helper()
	var ps []store.PutSyncParams
	for _, sc := range b.cfg.Syncs {
		ps = append(ps, store.PutSyncParams{ID: sc.ID, Workspace: sc.Workspace, Definition: "{}"})
	}
	if _, err := b.st.PutSyncs(b.ctx, ps); err != nil {
		t.Fatal(err)
	}
}

// TestScheduledRunReadsPausedOncePerTick: a tick reads the paused syncs once,
// whatever the number of syncs, and never one sync at a time; the next
// tick reads again and sees a pause made in between.
func TestScheduledRunReadsPausedOncePerTick(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishAll(t, b)
	cs := &countingStore{Store: b.st}
	b.svc.st = cs

	if got := strings.Join(b.tick(t), ","); got != "a,b" {
		t.Fatalf("first tick queued %q, want a,b (broken records a failure)", got)
	}
	if n, g := cs.pausedReads.Load(), cs.gets.Load(); n != 1 || g != 0 {
		t.Fatalf("first tick: %d reads of the paused syncs and %d GetSync, want 1 and 0", n, g)
	}

	if _, err := b.st.SetSyncState(b.ctx, store.SetSyncStateParams{ID: "b", State: store.SyncPaused, By: "ann", Why: "x"}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(pausedTTL)
	if got := strings.Join(b.tick(t), ","); got != "a" {
		t.Fatalf("tick after pausing b queued %q, want a", got)
	}
	if n, g := cs.pausedReads.Load(), cs.gets.Load(); n != 2 || g != 0 {
		t.Fatalf("after two ticks: %d reads of the paused syncs and %d GetSync, want 2 and 0", n, g)
	}
}

// TestScheduledRunInvalidDefinition: a definition that does not build is
// recorded as a failed run at every tick, as before validation was cached:
// no job, code invalid_sync_definition, the breaker counting them and
// pausing the sync, whose later ticks are skipped.
func TestScheduledRunInvalidDefinition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishAll(t, b)
	broken := &b.cfg.Syncs[2]
	broken.BreakerFailures = 3

	for i := 1; i <= 3; i++ {
		if got := strings.Join(b.tick(t), ","); got != "a,b" {
			t.Fatalf("tick %d queued %q, want a,b", i, got)
		}
		runs, err := b.st.ListRuns(b.ctx, broken.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != i {
			t.Fatalf("after tick %d: %d runs of the broken sync, want %d", i, len(runs), i)
		}
		r := runs[0]
		if r.State != store.RunFailed || r.FailureCode != string(failure.InvalidSyncDefinition) || r.Attempt != 0 || r.FinishedAt.IsZero() {
			t.Fatalf("tick %d recorded %+v", i, r)
		}
		b.clk.Advance(pausedTTL)
	}
	row, err := b.st.GetSync(b.ctx, broken.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != store.SyncPaused || row.PauseReason != "breaker" {
		t.Fatalf("broken sync %s (%s) after 3 failed ticks, want paused by the breaker", row.State, row.PauseReason)
	}
	b.tick(t)
	if runs, err := b.st.ListRuns(b.ctx, broken.ID, 0); err != nil || len(runs) != 3 {
		t.Fatalf("a paused sync's tick recorded a run: %d runs, %v", len(runs), err)
	}
}

// TestScheduledRunValidatesOnce: a definition that built is not built again
// at later ticks (its worker builds it before its run), and the start-up
// validation builds every scheduled sync once, the broken one excepted.
func TestScheduledRunValidatesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	publishAll(t, b)
	for i := range b.cfg.Syncs {
		b.cfg.Syncs[i].Schedule = "* * * * *"
	}
	b.svc.startValidation(b.ctx)
	<-b.svc.ticker.validated
	b.svc.stopValidation(b.ctx)
	for id, want := range map[string]bool{"a": true, "b": true, "broken": false} {
		if got := b.svc.ticker.isValid(id); got != want {
			t.Fatalf("validated %s = %v, want %v", id, got, want)
		}
	}

	// a's definition no longer builds: its ticks still queue it (the
	// definition was checked at start; a config does not change while the
	// process runs), without a failed run at the tick.
	b.cfg.Syncs[0].Source = config.Source{Type: "parquet"}
	if got := strings.Join(b.tick(t), ","); got != "a,b" {
		t.Fatalf("tick queued %q, want a,b", got)
	}
	if runs, err := b.st.ListRuns(b.ctx, "a", 0); err != nil || len(runs) != 0 {
		t.Fatalf("the tick of a validated sync recorded %d runs, %v", len(runs), err)
	}
}
