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
