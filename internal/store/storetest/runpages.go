package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

func testRunPages(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	other := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)

	equal(t, "pages of a run with none", len(must(b.st.ListRunPages(ctx, run.ID, 0))(t)), 0)

	// Recorded out of order on purpose: the list is by page, oldest first.
	at := Start.Add(-time.Minute)
	p2 := store.RunPage{RunID: run.ID, Page: 2, Read: 100, Claimed: 40, Sent: 38, Replayed: 60, Rejected: 2, InDoubt: 3, Requests: 2}
	p1 := store.RunPage{RunID: run.ID, Page: 1, Read: 100, Claimed: 100, Sent: 100, Requests: 1, CheckpointedAt: at}
	noErr(t, b.st.RecordRunPage(ctx, p2))
	noErr(t, b.st.RecordRunPage(ctx, p1))
	noErr(t, b.st.RecordRunPage(ctx, store.RunPage{RunID: other.ID, Page: 1, Read: 7}))

	got := must(b.st.ListRunPages(ctx, run.ID, 0))(t)
	equal(t, "pages", len(got), 2)
	p2.CheckpointedAt = Start // zero is stamped with the store's clock
	for i, want := range []store.RunPage{p1, p2} {
		sameTime(t, fmt.Sprintf("page %d CheckpointedAt", want.Page), got[i].CheckpointedAt, want.CheckpointedAt)
		got[i].CheckpointedAt, want.CheckpointedAt = time.Time{}, time.Time{}
		if got[i] != want {
			t.Fatalf("ListRunPages[%d] = %+v, want %+v", i, got[i], want)
		}
	}

	// Limit keeps the oldest.
	limited := must(b.st.ListRunPages(ctx, run.ID, 1))(t)
	equal(t, "limit 1", len(limited), 1)
	equal(t, "limit 1 page", limited[0].Page, int64(1))

	// Recording a page again replaces it (a retried checkpoint).
	b.clk.Advance(time.Second)
	p1.Sent, p1.CheckpointedAt = 99, time.Time{}
	noErr(t, b.st.RecordRunPage(ctx, p1))
	got = must(b.st.ListRunPages(ctx, run.ID, 0))(t)
	equal(t, "pages after re-record", len(got), 2)
	equal(t, "re-recorded Sent", got[0].Sent, int64(99))
	sameTime(t, "re-recorded CheckpointedAt", got[0].CheckpointedAt, Start.Add(time.Second))

	// Other runs' pages stay apart.
	others := must(b.st.ListRunPages(ctx, other.ID, 0))(t)
	equal(t, "other run pages", len(others), 1)
	equal(t, "other run Read", others[0].Read, int64(7))

	// Bad arguments are refused, not stored.
	for _, bad := range []store.RunPage{
		{RunID: 0, Page: 1},
		{RunID: run.ID, Page: 0},
		{RunID: run.ID, Page: 3, Sent: -1},
	} {
		if err := b.st.RecordRunPage(ctx, bad); err == nil {
			t.Fatalf("RecordRunPage(%+v) = nil, want an error", bad)
		}
	}
	equal(t, "pages after bad records", len(must(b.st.ListRunPages(ctx, run.ID, 0))(t)), 2)
}

// testRunPagesPrune: PruneRunPages deletes the pages checkpointed before the
// cut, run by run, and stops at the first run left with a younger page (a
// long run delays the later runs' pruning); many pages go in several
// statements; the runs themselves stay.
func testRunPagesPrune(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	at := func(d time.Duration) time.Time { return Start.Add(-d) }
	page := func(run store.Run, n int64, ago time.Duration) store.RunPage {
		return store.RunPage{RunID: run.ID, Page: n, Read: 10, Claimed: 10, Sent: 10, Requests: 1, CheckpointedAt: at(ago)}
	}
	pages := func(run store.Run) int { t.Helper(); return len(must(b.st.ListRunPages(ctx, run.ID, 0))(t)) }

	equal(t, "pruned with no pages", must(b.st.PruneRunPages(ctx, Start))(t), int64(0))

	// Run a: two old pages. Run b (long): an old page and a young one. Run c:
	// an old page, after b. Run d: many old pages, written by one checkpoint.
	ra := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	rb := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	rc := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	rd := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	for _, p := range []store.RunPage{page(ra, 1, 10*time.Hour), page(ra, 2, 10*time.Hour), page(rb, 1, 9*time.Hour),
		page(rb, 2, time.Hour), page(rc, 1, 8*time.Hour)} {
		noErr(t, b.st.RecordRunPage(ctx, p))
	}
	const many = 12_345 // more than one statement deletes
	l := acquire(t, b, "s1", "tok-a", time.Minute)
	more := make([]store.RunPage, many)
	for i := range more {
		more[i] = page(rd, int64(i+1), 7*time.Hour)
	}
	r := rd
	r.Fence = l.Fence
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor:    store.SaveCursorParams{SyncID: "s1", Value: "c", Fence: l.Fence, RunID: rd.ID},
		Run:       r,
		MorePages: more,
	}))
	equal(t, "run d's pages before", pages(rd), many)

	// Cut 5 h ago: a's two go, b's old one goes, b's young one stops the walk.
	equal(t, "pruned at -5h", must(b.st.PruneRunPages(ctx, at(5*time.Hour)))(t), int64(3))
	equal(t, "run a's pages", pages(ra), 0)
	equal(t, "run b's pages", pages(rb), 1)
	equal(t, "run c's pages (behind b)", pages(rc), 1)
	equal(t, "run d's pages (behind b)", pages(rd), many)

	// Cut now: everything is older.
	equal(t, "pruned at now", must(b.st.PruneRunPages(ctx, Start))(t), int64(2+many))
	for _, r := range []store.Run{ra, rb, rc, rd} {
		equal(t, fmt.Sprintf("run %d's pages after", r.ID), pages(r), 0)
		equal(t, fmt.Sprintf("run %d kept", r.ID), must(b.st.GetRun(ctx, r.ID))(t).ID, r.ID)
	}
	equal(t, "pruned again", must(b.st.PruneRunPages(ctx, Start))(t), int64(0))
}

// testRunsPrune: PruneRuns deletes the runs that ended before the cut, with
// their pages, but keeps each sync's KeepRunsPerSync newest runs, its latest
// success (the dead-man's) and any run not ended, so that a sync on a short
// schedule does not add a row to runs every tick forever.
func testRunsPrune(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	insert := func(sync string, state store.RunState) store.Run {
		t.Helper()
		return must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: sync, State: state, Attempt: 1}))(t)
	}
	ok := insert("s1", store.RunSucceeded)
	running := insert("s1", store.RunRunning)
	failed := make([]store.Run, store.KeepRunsPerSync+3)
	for i := range failed {
		failed[i] = insert("s1", store.RunFailed)
	}
	noErr(t, b.st.RecordRunPage(ctx, store.RunPage{RunID: failed[0].ID, Page: 1, Read: 1, CheckpointedAt: Start}))
	few := []store.Run{insert("s2", store.RunFailed), insert("s2", store.RunFailed)}
	equal(t, "pruned at the runs' end", must(b.st.PruneRuns(ctx, Start))(t), int64(0))

	b.clk.Advance(10 * time.Hour)
	young := insert("s1", store.RunFailed)
	// s1 has KeepRunsPerSync+6 runs: the newest KeepRunsPerSync are young
	// and failed[4:]; of the older, ok (the last success) and running stay.
	equal(t, "pruned", must(b.st.PruneRuns(ctx, Start.Add(5*time.Hour)))(t), int64(4))
	for _, r := range failed[:4] {
		_, err := b.st.GetRun(ctx, r.ID)
		wantErr(t, err, store.ErrNotFound)
	}
	equal(t, "pruned run's pages", len(must(b.st.ListRunPages(ctx, failed[0].ID, 0))(t)), 0)
	for _, r := range append([]store.Run{ok, running, failed[4], young}, few...) {
		equal(t, fmt.Sprintf("run %d kept", r.ID), must(b.st.GetRun(ctx, r.ID))(t).ID, r.ID)
	}
	equal(t, "s1's runs", len(must(b.st.ListRuns(ctx, "s1", 0))(t)), store.KeepRunsPerSync+2)
	equal(t, "pruned again", must(b.st.PruneRuns(ctx, Start.Add(5*time.Hour)))(t), int64(0))
}
