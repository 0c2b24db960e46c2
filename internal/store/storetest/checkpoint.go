package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// testCheckpoint: Checkpoint writes the cursor, the run and the page in one
// transaction, all of it or none of it.
func testCheckpoint(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	other := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	l := acquire(t, b, "s1", "tok-a", time.Minute)
	equal(t, "fence", l.Fence, int64(1))

	// state is what a checkpoint may change; every refused checkpoint below
	// must leave it exactly as it was.
	type state struct {
		cursor store.Cursor
		run    store.Run
		pages  []store.RunPage
	}
	snapshot := func() state {
		t.Helper()
		return state{
			cursor: must(b.st.GetCursor(ctx, "s1"))(t),
			run:    must(b.st.GetRun(ctx, run.ID))(t),
			pages:  must(b.st.ListRunPages(ctx, run.ID, 0))(t),
		}
	}
	unchanged := func(what string, before state) {
		t.Helper()
		after := snapshot()
		equal(t, what+": cursor Value", after.cursor.Value, before.cursor.Value)
		equal(t, what+": cursor Fence", after.cursor.Fence, before.cursor.Fence)
		equal(t, what+": cursor RunID", after.cursor.RunID, before.cursor.RunID)
		sameTime(t, what+": cursor UpdatedAt", after.cursor.UpdatedAt, before.cursor.UpdatedAt)
		if after.run != before.run {
			t.Fatalf("%s: run = %+v, want it unchanged: %+v", what, after.run, before.run)
		}
		equal(t, what+": pages", fmt.Sprint(after.pages), fmt.Sprint(before.pages))
	}

	// (a) All three parts are written; a zero CheckpointedAt is stamped now.
	b.clk.Advance(time.Second)
	r := run
	r.Fence = l.Fence
	r.Counters = store.Counters{Read: 100, Written: 98, Rejected: 2, Pages: 1, Requests: 2}
	p1 := store.RunPage{RunID: run.ID, Page: 1, Read: 100, Claimed: 100, Sent: 98, Rejected: 2, Requests: 2}
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-2", Fence: l.Fence, RunID: run.ID},
		Run:    r,
		Page:   &p1,
	}))
	c := must(b.st.GetCursor(ctx, "s1"))(t)
	equal(t, "cursor Value", c.Value, "page-2")
	equal(t, "cursor Fence", c.Fence, l.Fence)
	equal(t, "cursor RunID", c.RunID, run.ID)
	sameTime(t, "cursor UpdatedAt", c.UpdatedAt, Start.Add(time.Second))
	if got := must(b.st.GetRun(ctx, run.ID))(t); got != r {
		t.Fatalf("run after checkpoint = %+v, want %+v", got, r)
	}
	pages := must(b.st.ListRunPages(ctx, run.ID, 0))(t)
	equal(t, "pages after checkpoint", len(pages), 1)
	sameTime(t, "page CheckpointedAt", pages[0].CheckpointedAt, Start.Add(time.Second))
	pages[0].CheckpointedAt = time.Time{}
	if pages[0] != p1 {
		t.Fatalf("page after checkpoint = %+v, want %+v", pages[0], p1)
	}
	equal(t, "other run's pages", len(must(b.st.ListRunPages(ctx, other.ID, 0))(t)), 0)

	// A second page: the run's totals move on, the page is added, and a given
	// CheckpointedAt is kept.
	b.clk.Advance(time.Second)
	r.Counters = store.Counters{Read: 150, Written: 148, Rejected: 2, Pages: 2, Requests: 3}
	p2 := store.RunPage{RunID: run.ID, Page: 2, Read: 50, Claimed: 50, Sent: 50, Requests: 1, CheckpointedAt: Start.Add(-time.Hour)}
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-3", Fence: l.Fence, RunID: run.ID},
		Run:    r,
		Page:   &p2,
	}))
	equal(t, "cursor Value after page 2", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-3")
	equal(t, "run Read after page 2", must(b.st.GetRun(ctx, run.ID))(t).Read, int64(150))
	pages = must(b.st.ListRunPages(ctx, run.ID, 0))(t)
	equal(t, "pages after page 2", len(pages), 2)
	equal(t, "page 2 Read", pages[1].Read, int64(50))
	sameTime(t, "page 2 CheckpointedAt", pages[1].CheckpointedAt, Start.Add(-time.Hour))

	// (d) No page: cursor and run only.
	b.clk.Advance(time.Second)
	r.Counters.Requests = 4
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-4", Fence: l.Fence, RunID: run.ID},
		Run:    r,
	}))
	c = must(b.st.GetCursor(ctx, "s1"))(t)
	equal(t, "cursor Value without a page", c.Value, "page-4")
	sameTime(t, "cursor UpdatedAt without a page", c.UpdatedAt, Start.Add(3*time.Second))
	equal(t, "run Requests without a page", must(b.st.GetRun(ctx, run.ID))(t).Requests, int64(4))
	equal(t, "pages without a page", len(must(b.st.ListRunPages(ctx, run.ID, 0))(t)), 2)

	// (b) A newer holder registers fence 2: the old holder's checkpoint is
	// refused with ErrFenced and writes none of its three parts.
	before := snapshot()
	noErr(t, b.st.RaiseFence(ctx, "s1", l.Fence+1))
	b.clk.Advance(time.Second)
	zombie := r
	zombie.Counters = store.Counters{Read: 999, Written: 999, Pages: 3, Requests: 9}
	p3 := store.RunPage{RunID: run.ID, Page: 3, Read: 849, Sent: 849, Requests: 5}
	err := b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "zombie", Fence: l.Fence, RunID: run.ID},
		Run:    zombie,
		Page:   &p3,
	})
	wantErr(t, err, store.ErrFenced)
	unchanged("fenced checkpoint", before)

	// (c) An unknown run: ErrNotFound, and the cursor did not move although
	// its fence (2, the registered one) is current.
	newer := l.Fence + 1
	ghost := r
	ghost.ID = 987654
	ghostPage := store.RunPage{RunID: ghost.ID, Page: 1, Read: 1}
	err = b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "ghost", Fence: newer, RunID: ghost.ID},
		Run:    ghost,
		Page:   &ghostPage,
	})
	wantErr(t, err, store.ErrNotFound)
	unchanged("checkpoint of an unknown run", before)
	equal(t, "unknown run's pages", len(must(b.st.ListRunPages(ctx, ghost.ID, 0))(t)), 0)

	// Nor did its fence stay registered: a refused checkpoint under fence 3
	// leaves fence 2 current.
	err = b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "ghost", Fence: newer + 1, RunID: ghost.ID},
		Run:    ghost,
	})
	wantErr(t, err, store.ErrNotFound)
	unchanged("checkpoint of an unknown run under a higher fence", before)
	noErr(t, b.st.RaiseFence(ctx, "s1", newer))

	// (e) Invalid arguments are refused (neither fenced nor not found) with
	// nothing written, even when every other part is valid.
	good := store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "bad", Fence: newer, RunID: run.ID},
		Run:    r,
		Page:   &store.RunPage{RunID: run.ID, Page: 3, Read: 1},
	}
	badRun := r
	badRun.State = "bogus"
	for _, tc := range []struct {
		name string
		edit func(p *store.CheckpointParams)
	}{
		{"page run id 0", func(p *store.CheckpointParams) { p.Page = &store.RunPage{RunID: 0, Page: 3} }},
		{"page number 0", func(p *store.CheckpointParams) { p.Page = &store.RunPage{RunID: run.ID, Page: 0} }},
		{"negative page count", func(p *store.CheckpointParams) { p.Page = &store.RunPage{RunID: run.ID, Page: 3, Sent: -1} }},
		{"run state", func(p *store.CheckpointParams) { p.Run = badRun }},
		{"empty sync id", func(p *store.CheckpointParams) { p.Cursor.SyncID = "" }},
		{"fence 0", func(p *store.CheckpointParams) { p.Cursor.Fence = 0 }},
	} {
		p := good
		tc.edit(&p)
		err := b.st.Checkpoint(ctx, p)
		if err == nil {
			t.Fatalf("Checkpoint with an invalid %s = nil, want an error", tc.name)
		}
		for _, sentinel := range []error{store.ErrFenced, store.ErrNotFound, store.ErrUnavailable} {
			if errors.Is(err, sentinel) {
				t.Fatalf("Checkpoint with an invalid %s = %v, want an invalid-argument error", tc.name, err)
			}
		}
		unchanged("checkpoint with an invalid "+tc.name, before)
	}

	// The new holder checkpoints under the registered fence: accepted.
	b.clk.Advance(time.Second)
	noErr(t, b.st.Checkpoint(ctx, good))
	c = must(b.st.GetCursor(ctx, "s1"))(t)
	equal(t, "cursor Value of the new holder", c.Value, "bad")
	equal(t, "cursor Fence of the new holder", c.Fence, newer)
	equal(t, "pages of the new holder", len(must(b.st.ListRunPages(ctx, run.ID, 0))(t)), 3)
}
