package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// Settlements (docs/guide.md#the-ledger-and-its-retention): how each write
// in doubt was settled, recorded with the marks that settle it.

func testLedgerSettled(t *testing.T, open OpenFunc) {
	t.Run("FinishAndCheckpoint", func(t *testing.T) { t.Parallel(); testSettledWritten(t, open) })
	t.Run("Fenced", func(t *testing.T) { t.Parallel(); testSettledFenced(t, open) })
	t.Run("Pruned", func(t *testing.T) { t.Parallel(); testSettledPruned(t, open) })
}

func settledOf(t *testing.T, b *bundle, syncID string, limit int) []string {
	t.Helper()
	es := must(b.st.LedgerSettled(b.ctx, syncID, limit))(t)
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s %s %s run %d", e.Key, e.Identity, e.How, e.RunID)
	}
	return out
}

// testSettledWritten: a finish and a checkpoint record their marks'
// settlements, listed newest first per sync; a key settled again keeps its
// latest; marks without one record nothing.
func testSettledWritten(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	l := acquire(t, b, "s1", "tok", time.Hour)
	ks := keys("st", 4)
	claimKeys(t, b, "s1", l.Fence, 7, ks)
	sameKeys(t, "settled before any", settledOf(t, b, "s1", 0))
	finishKeys(t, b, "s1", l.Fence, 7,
		store.LedgerFinish{Key: "slot-0", State: store.LedgerComplete, Result: "state"},
		store.LedgerFinish{Key: ks[0], State: store.LedgerReleased, Settled: &store.Settlement{Identity: "id-0", How: "landed"}},
		store.LedgerFinish{Key: ks[1], State: store.LedgerReleased})
	b.clk.Advance(time.Second)

	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	run.Fence = l.Fence
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-1", Fence: l.Fence, RunID: run.ID},
		Run:    run,
		Finish: []store.LedgerFinish{
			{Key: ks[2], State: store.LedgerAccepted, Result: "process", Settled: &store.Settlement{Identity: "id-2", How: "resent"}},
			{Key: ks[3], State: store.LedgerRejected, Message: "refused", Settled: &store.Settlement{Identity: "ün ~2", How: "resent"}},
		},
	}))
	got := settledOf(t, b, "s1", 0)
	want := []string{
		fmt.Sprintf("%s id-2 resent run %d", ks[2], run.ID),
		fmt.Sprintf("%s ün ~2 resent run %d", ks[3], run.ID),
		ks[0] + " id-0 landed run 7",
	}
	sameKeys(t, "settled", got, want...)
	sameKeys(t, "settled, limit 1", settledOf(t, b, "s1", 1), want[0])
	sameKeys(t, "another sync's settled", settledOf(t, b, "s2", 0))

	// The same key settled again by a later run keeps the latest.
	b.clk.Advance(time.Second)
	claimKeys(t, b, "s1", l.Fence, 9, ks[:1])
	finishKeys(t, b, "s1", l.Fence, 9,
		store.LedgerFinish{Key: ks[0], State: store.LedgerReleased, Settled: &store.Settlement{Identity: "id-0", How: "resent"}})
	sameKeys(t, "settled again", settledOf(t, b, "s1", 1), ks[0]+" id-0 resent run 9")
	equal(t, "settlements after a key settled twice", len(settledOf(t, b, "s1", 0)), 3)
	es := must(b.st.LedgerSettled(ctx, "s1", 1))(t)
	equal(t, "At of the latest", es[0].At, b.clk.Now())
}

// testSettledFenced: a finish or a checkpoint refused for a stale fence
// records no settlement either.
func testSettledFenced(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	old := acquire(t, b, "s1", "tok-old", time.Minute)
	ks := keys("sf", 2)
	claimKeys(t, b, "s1", old.Fence, 1, ks)
	b.clk.Advance(2 * time.Minute)
	acquire(t, b, "s1", "tok-new", time.Minute)
	wantErr(t, b.st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s1", Fence: old.Fence, RunID: 1, Entries: []store.LedgerFinish{
		{Key: ks[0], State: store.LedgerReleased, Settled: &store.Settlement{Identity: "a", How: "landed"}},
	}}), store.ErrFenced)
	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	run.Fence = old.Fence
	wantErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "p", Fence: old.Fence, RunID: run.ID},
		Run:    run,
		Finish: []store.LedgerFinish{{Key: ks[1], State: store.LedgerReleased, Settled: &store.Settlement{Identity: "b", How: "landed"}}},
	}), store.ErrFenced)
	sameKeys(t, "settled after fenced writes", settledOf(t, b, "s1", 0))
}

// testSettledPruned: a prune deletes the settlements recorded before its
// bound and keeps the later ones.
func testSettledPruned(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	l := acquire(t, b, "s1", "tok", 1000*time.Hour)
	ks := keys("sp", 2)
	claimKeys(t, b, "s1", l.Fence, 1, ks)
	finishKeys(t, b, "s1", l.Fence, 1,
		store.LedgerFinish{Key: ks[0], State: store.LedgerReleased, Settled: &store.Settlement{Identity: "old", How: "landed"}})
	b.clk.Advance(8 * 24 * time.Hour)
	finishKeys(t, b, "s1", l.Fence, 2,
		store.LedgerFinish{Key: ks[1], State: store.LedgerReleased, Settled: &store.Settlement{Identity: "new", How: "landed"}})
	must(b.st.LedgerPrune(ctx, b.clk.Now().Add(-7*24*time.Hour)))(t)
	sameKeys(t, "settled after the prune", settledOf(t, b, "s1", 0), ks[1]+" new landed run 2")
}
