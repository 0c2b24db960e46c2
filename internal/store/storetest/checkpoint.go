package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// checkpointState is what a checkpoint may change: a sync's cursor and lease,
// and a run with its pages.
type checkpointState struct {
	syncID string
	runID  int64
	cursor store.Cursor
	run    store.Run
	pages  []store.RunPage
	lease  store.Lease // zero if the sync has none
}

func snapshotCheckpoint(t *testing.T, b *bundle, syncID string, runID int64) checkpointState {
	t.Helper()
	l, err := b.st.LeaseGet(b.ctx, syncID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("LeaseGet: %v", err)
	}
	return checkpointState{
		syncID: syncID,
		runID:  runID,
		cursor: must(b.st.GetCursor(b.ctx, syncID))(t),
		run:    must(b.st.GetRun(b.ctx, runID))(t),
		pages:  must(b.st.ListRunPages(b.ctx, runID, 0))(t),
		lease:  l,
	}
}

// unchangedCheckpoint fails t unless the cursor, run, pages and lease are as
// before.
func unchangedCheckpoint(t *testing.T, b *bundle, what string, before checkpointState) {
	t.Helper()
	after := snapshotCheckpoint(t, b, before.syncID, before.runID)
	equal(t, what+": cursor Value", after.cursor.Value, before.cursor.Value)
	equal(t, what+": cursor Fence", after.cursor.Fence, before.cursor.Fence)
	equal(t, what+": cursor RunID", after.cursor.RunID, before.cursor.RunID)
	sameTime(t, what+": cursor UpdatedAt", after.cursor.UpdatedAt, before.cursor.UpdatedAt)
	if after.run != before.run {
		t.Fatalf("%s: run = %+v, want it unchanged: %+v", what, after.run, before.run)
	}
	equal(t, what+": pages", fmt.Sprint(after.pages), fmt.Sprint(before.pages))
	sameLease(t, what+": lease", after.lease, before.lease)
}

func sameLease(t *testing.T, what string, got, want store.Lease) {
	t.Helper()
	equal(t, what+" SyncID", got.SyncID, want.SyncID)
	equal(t, what+" Token", got.Token, want.Token)
	equal(t, what+" Fence", got.Fence, want.Fence)
	equal(t, what+" Holder", got.Holder, want.Holder)
	equal(t, what+" RunID", got.RunID, want.RunID)
	sameTime(t, what+" ExpiresAt", got.ExpiresAt, want.ExpiresAt)
}

// testCheckpoint: Checkpoint writes the cursor, the run and the page in one
// transaction, all of it or none of it.
func testCheckpoint(t *testing.T, open OpenFunc) {
	t.Run("Lease", func(t *testing.T) { t.Parallel(); testCheckpointLease(t, open) })
	t.Run("Finish", func(t *testing.T) { t.Parallel(); testCheckpointFinish(t, open) })
	b := setup(t, open)
	ctx := b.ctx

	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	other := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	l := acquire(t, b, "s1", "tok-a", time.Minute)
	equal(t, "fence", l.Fence, int64(1))

	// snapshot is what a checkpoint may change; every refused checkpoint
	// below must leave it exactly as it was.
	snapshot := func() checkpointState { t.Helper(); return snapshotCheckpoint(t, b, "s1", run.ID) }
	unchanged := func(what string, before checkpointState) {
		t.Helper()
		unchangedCheckpoint(t, b, what, before)
	}

	// (a) All three parts are written; a zero CheckpointedAt is stamped now.
	b.clk.Advance(time.Second)
	r := run
	r.Fence = l.Fence
	r.Counters = store.Counters{Read: 100, Written: 98, Rejected: 2, Pages: 1, Requests: 2}
	p1 := store.RunPage{RunID: run.ID, Page: 1, Read: 100, Claimed: 100, Sent: 98, Rejected: 2, Requests: 2}
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-2", Payload: "p1", Fence: l.Fence, RunID: run.ID},
		Run:    r,
		Page:   &p1,
	}))
	c := must(b.st.GetCursor(ctx, "s1"))(t)
	equal(t, "cursor Value", c.Value, "page-2")
	equal(t, "cursor Payload", c.Payload, "p1")
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
	// Without Lease the lease is left alone (not renewed).
	sameLease(t, "lease after a checkpoint without Lease", must(b.st.LeaseGet(ctx, "s1"))(t), l)

	// A second page: the run's totals move on, the page is added, and a given
	// CheckpointedAt is kept.
	b.clk.Advance(time.Second)
	r.Counters = store.Counters{Read: 150, Written: 148, Rejected: 2, Pages: 2, Requests: 3}
	p2 := store.RunPage{RunID: run.ID, Page: 2, Read: 50, Claimed: 50, Sent: 50, Requests: 1, CheckpointedAt: Start.Add(-time.Hour)}
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-3", Payload: "p2", Fence: l.Fence, RunID: run.ID},
		Run:    r,
		Page:   &p2,
	}))
	equal(t, "cursor Value after page 2", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-3")
	equal(t, "cursor Payload after page 2", must(b.st.GetCursor(ctx, "s1"))(t).Payload, "p2")
	equal(t, "run Read after page 2", must(b.st.GetRun(ctx, run.ID))(t).Read, int64(150))
	pages = must(b.st.ListRunPages(ctx, run.ID, 0))(t)
	equal(t, "pages after page 2", len(pages), 2)
	equal(t, "page 2 Read", pages[1].Read, int64(50))
	sameTime(t, "page 2 CheckpointedAt", pages[1].CheckpointedAt, Start.Add(-time.Hour))

	// MorePages replace earlier pages' rows in the same transaction (a page
	// whose accepted records were settled later).
	p1.Sent, p1.Rejected = 99, 1
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor:    store.SaveCursorParams{SyncID: "s1", Value: "page-3", Fence: l.Fence, RunID: run.ID},
		Run:       r,
		MorePages: []store.RunPage{p1},
	}))
	pages = must(b.st.ListRunPages(ctx, run.ID, 0))(t)
	equal(t, "pages after MorePages", len(pages), 2)
	equal(t, "page 1 Sent after MorePages", pages[0].Sent, int64(99))
	equal(t, "page 1 Rejected after MorePages", pages[0].Rejected, int64(1))
	equal(t, "page 2 Sent after MorePages", pages[1].Sent, int64(50))
	bad := p2
	bad.Read = -1
	if err := b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor:    store.SaveCursorParams{SyncID: "s1", Value: "page-x", Fence: l.Fence, RunID: run.ID},
		Run:       r,
		MorePages: []store.RunPage{bad},
	}); err == nil {
		t.Fatal("Checkpoint with an invalid page in MorePages = nil, want an error")
	}
	equal(t, "cursor after a refused MorePages", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-3")

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

// testCheckpointLease: a checkpoint with Lease set renews the sync's lease in
// its transaction, exactly as LeaseRenew would, and when the lease is lost
// (expired, taken, taken over, superseded, released) writes nothing at all.
func testCheckpointLease(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	const ttl = 30 * time.Second

	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	a := acquire(t, b, "s1", "tok-a", ttl)
	equal(t, "fence of tok-a", a.Fence, int64(1))
	snapshot := func() checkpointState { t.Helper(); return snapshotCheckpoint(t, b, "s1", run.ID) }
	page := int64(0)
	// checkpoint is page+1's checkpoint under fence, renewing token's lease.
	checkpoint := func(value string, fence int64, token string) error {
		r := must(b.st.GetRun(ctx, run.ID))(t)
		r.Fence = fence
		r.Counters.Read += 10
		r.Counters.Pages++
		return b.st.Checkpoint(ctx, store.CheckpointParams{
			Cursor: store.SaveCursorParams{SyncID: "s1", Value: value, Fence: fence, RunID: run.ID},
			Run:    r,
			Page:   &store.RunPage{RunID: run.ID, Page: page + 1, Read: 10},
			Lease:  &store.CheckpointLease{Token: token, TTL: ttl},
		})
	}
	// written checks that the checkpoint of value was written in full and
	// the lease of token extended to now+ttl, nothing else about it changed.
	written := func(what, value string, before checkpointState) {
		t.Helper()
		page++
		c := must(b.st.GetCursor(ctx, "s1"))(t)
		equal(t, what+": cursor Value", c.Value, value)
		sameTime(t, what+": cursor UpdatedAt", c.UpdatedAt, b.clk.Now())
		got := must(b.st.GetRun(ctx, run.ID))(t)
		equal(t, what+": run Read", got.Read, before.run.Read+10)
		equal(t, what+": run Pages", got.Pages, before.run.Pages+1)
		pages := must(b.st.ListRunPages(ctx, run.ID, 0))(t)
		equal(t, what+": pages", len(pages), len(before.pages)+1)
		equal(t, what+": last page", pages[len(pages)-1].Page, page)
		want := before.lease
		want.ExpiresAt = b.clk.Now().Add(ttl)
		sameLease(t, what+": lease", must(b.st.LeaseGet(ctx, "s1"))(t), want)
	}

	// (a) The holder's checkpoint is written and renews its lease from now.
	b.clk.Advance(10 * time.Second)
	before := snapshot()
	noErr(t, checkpoint("page-2", a.Fence, "tok-a"))
	written("checkpoint renewing the lease", "page-2", before)

	// The renewal is real: past the acquired expiry (Start+30s) but before
	// the renewed one (Start+40s), the lease is still tok-a's.
	b.clk.Advance(25 * time.Second)
	_, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "tok-x", Holder: "host-x", TTL: ttl})
	wantErr(t, err, store.ErrLeaseHeld)
	before = snapshot()
	noErr(t, checkpoint("page-3", a.Fence, "tok-a"))
	written("second checkpoint renewing the lease", "page-3", before)

	// Invalid lease arguments are refused before anything is written.
	before = snapshot()
	for _, bad := range []store.CheckpointLease{{Token: "", TTL: ttl}, {Token: "tok-a", TTL: 0}, {Token: "tok-a", TTL: -time.Second}} {
		r := before.run
		r.Counters.Read++
		err := b.st.Checkpoint(ctx, store.CheckpointParams{
			Cursor: store.SaveCursorParams{SyncID: "s1", Value: "bad-lease", Fence: a.Fence, RunID: run.ID},
			Run:    r,
			Page:   &store.RunPage{RunID: run.ID, Page: page + 1, Read: 1},
			Lease:  &bad,
		})
		if err == nil {
			t.Fatalf("Checkpoint with lease %+v = nil, want an error", bad)
		}
		for _, sentinel := range []error{store.ErrLeaseLost, store.ErrFenced, store.ErrNotFound, store.ErrUnavailable} {
			if errors.Is(err, sentinel) {
				t.Fatalf("Checkpoint with lease %+v = %v, want an invalid-argument error", bad, err)
			}
		}
		unchangedCheckpoint(t, b, fmt.Sprintf("checkpoint with lease %+v", bad), before)
	}

	// (c) Expired (by the store's clock), nobody took it: ErrLeaseLost and
	// nothing written, although the checkpoint's fence is still current.
	b.clk.Advance(ttl + time.Millisecond)
	before = snapshot()
	wantErr(t, checkpoint("expired", a.Fence, "tok-a"), store.ErrLeaseLost)
	unchangedCheckpoint(t, b, "checkpoint of an expired lease", before)

	// (b) Taken by tok-b after the expiry (fence 2): tok-a's checkpoint is
	// refused with ErrLeaseLost (the lease goes before the fence), nothing
	// is written and tok-b's lease is untouched.
	bl := acquire(t, b, "s1", "tok-b", ttl)
	equal(t, "fence of tok-b", bl.Fence, int64(2))
	b.clk.Advance(time.Second)
	before = snapshot()
	sameLease(t, "tok-b's lease", before.lease, bl)
	wantErr(t, checkpoint("taken", a.Fence, "tok-a"), store.ErrLeaseLost)
	unchangedCheckpoint(t, b, "checkpoint of a taken lease", before)
	// Even under the current fence, a checkpoint renewing a lease its token
	// does not hold writes nothing: only the lease refuses it.
	wantErr(t, checkpoint("taken, current fence", bl.Fence, "tok-a"), store.ErrLeaseLost)
	unchangedCheckpoint(t, b, "checkpoint of a taken lease under the current fence", before)

	// tok-b's own checkpoint goes through and renews tok-b's lease.
	noErr(t, checkpoint("page-4", bl.Fence, "tok-b"))
	written("checkpoint of tok-b", "page-4", before)

	// (b) Taken over (TakeOver, live lease) by tok-c (fence 3): tok-b's
	// checkpoint is refused, under its own fence or the current one.
	cl := must(b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "tok-c", Holder: "host-c", RunID: 7, TTL: ttl, TakeOver: "tok-b"}))(t)
	equal(t, "fence of tok-c", cl.Fence, int64(3))
	b.clk.Advance(time.Second)
	before = snapshot()
	sameLease(t, "tok-c's lease", before.lease, cl)
	wantErr(t, checkpoint("taken over", bl.Fence, "tok-b"), store.ErrLeaseLost)
	unchangedCheckpoint(t, b, "checkpoint of a lease taken over", before)
	wantErr(t, checkpoint("taken over, current fence", cl.Fence, "tok-b"), store.ErrLeaseLost)
	unchangedCheckpoint(t, b, "checkpoint of a lease taken over, under the current fence", before)

	// A newer fence registered elsewhere (Redis mode) supersedes tok-c's
	// lease: its checkpoint is refused even under that newer fence.
	noErr(t, b.st.RaiseFence(ctx, "s1", cl.Fence+1))
	before = snapshot()
	wantErr(t, checkpoint("superseded", cl.Fence+1, "tok-c"), store.ErrLeaseLost)
	unchangedCheckpoint(t, b, "checkpoint of a superseded lease", before)

	// Released: refused, nothing written.
	noErr(t, b.st.LeaseRelease(ctx, "s1", "tok-c"))
	before = snapshot()
	wantErr(t, checkpoint("released", cl.Fence+1, "tok-c"), store.ErrLeaseLost)
	unchangedCheckpoint(t, b, "checkpoint of a released lease", before)

	// (d) Without Lease the same checkpoint is written (fenced only) and no
	// lease is created.
	r := before.run
	r.Counters.Read += 10
	noErr(t, b.st.Checkpoint(ctx, store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "no-lease", Fence: cl.Fence + 1, RunID: run.ID},
		Run:    r,
	}))
	equal(t, "cursor Value without a lease", must(b.st.GetCursor(ctx, "s1"))(t).Value, "no-lease")
	_, err = b.st.LeaseGet(ctx, "s1")
	wantErr(t, err, store.ErrNotFound)
}

// testCheckpointFinish: a checkpoint's Finish records the page's outcomes in
// the checkpoint's transaction, as LedgerFinish would, and a refused
// checkpoint records none of them.
func testCheckpointFinish(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	l := acquire(t, b, "s1", "tok-a", time.Minute)
	keys := []string{"k1", "k2", "k3"}
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l.Fence, RunID: run.ID, Keys: keys}))
	r := run
	r.Fence = l.Fence
	r.Counters = store.Counters{Read: 3, Written: 2, Rejected: 1, Pages: 1, Requests: 1}
	cp := store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-2", Fence: l.Fence, RunID: run.ID},
		Run:    r,
		Page:   &store.RunPage{RunID: run.ID, Page: 1, Read: 3, Claimed: 3, Sent: 2, Rejected: 1, Requests: 1},
		Finish: []store.LedgerFinish{
			{Key: "k1", State: store.LedgerComplete, Result: "r1"},
			{Key: "k2", State: store.LedgerRejected, Message: "bad email"},
		},
	}

	// Refused (an unknown run): the outcomes are not recorded either.
	ghost := cp
	ghost.Run.ID = 987654
	ghost.Cursor.RunID = ghost.Run.ID
	ghost.Page = nil
	wantErr(t, b.st.Checkpoint(ctx, ghost), store.ErrNotFound)
	got := must(b.st.LedgerGet(ctx, "s1", keys))(t)
	for _, k := range keys {
		equal(t, k+" state after a refused checkpoint", got[k].State, store.LedgerPending)
	}
	equal(t, "cursor after a refused checkpoint", must(b.st.GetCursor(ctx, "s1"))(t).Value, "")

	// Invalid outcomes refuse the whole checkpoint.
	bad := cp
	bad.Finish = []store.LedgerFinish{{Key: "k1", State: store.LedgerPending}}
	if err := b.st.Checkpoint(ctx, bad); err == nil || errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("checkpoint finishing k1 as pending = %v, want an invalid-argument error", err)
	}
	equal(t, "cursor after an invalid finish", must(b.st.GetCursor(ctx, "s1"))(t).Value, "")

	// Accepted: outcomes, cursor and run together.
	b.clk.Advance(time.Second)
	noErr(t, b.st.Checkpoint(ctx, cp))
	got = must(b.st.LedgerGet(ctx, "s1", keys))(t)
	equal(t, "k1 state", got["k1"].State, store.LedgerComplete)
	equal(t, "k1 result", got["k1"].Result, "r1")
	equal(t, "k1 fence", got["k1"].Fence, l.Fence)
	equal(t, "k1 run", got["k1"].RunID, run.ID)
	equal(t, "k1 attempts (its claim's)", got["k1"].Attempts, 1)
	sameTime(t, "k1 completed", got["k1"].CompletedAt, Start.Add(time.Second))
	equal(t, "k2 state", got["k2"].State, store.LedgerRejected)
	equal(t, "k2 message", got["k2"].Message, "bad email")
	equal(t, "k3 state (not in Finish)", got["k3"].State, store.LedgerPending)
	equal(t, "cursor", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-2")
	equal(t, "run Written", must(b.st.GetRun(ctx, run.ID))(t).Written, int64(2))

	// Fenced: a newer holder's fence refuses the outcomes with the cursor.
	noErr(t, b.st.RaiseFence(ctx, "s1", l.Fence+1))
	zombie := cp
	zombie.Cursor.Value = "zombie"
	zombie.Page = nil
	zombie.Finish = []store.LedgerFinish{{Key: "k3", State: store.LedgerComplete, Result: "r3"}}
	wantErr(t, b.st.Checkpoint(ctx, zombie), store.ErrFenced)
	equal(t, "k3 state after a fenced checkpoint", must(b.st.LedgerGet(ctx, "s1", []string{"k3"}))(t)["k3"].State, store.LedgerPending)
	equal(t, "cursor after a fenced checkpoint", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-2")
}
