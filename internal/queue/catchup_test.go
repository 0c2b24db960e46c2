package queue

import (
	"slices"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// TestCatchUpLostTicks: a serve that becomes the leader after a sync's
// tick passed with no serve leading (a restart across 02:00, a leader that
// died just before it) queues that sync's run at once; before, the next
// tick was computed from the leader's start and a daily sync skipped a day.
// A sync that ran since its last tick, one published after it, a paused
// one and an `@every` one are left to their next tick.
func TestCatchUpLostTicks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Syncs = b.cfg.Syncs[:2] // a and b
	b.cfg.Syncs = append(b.cfg.Syncs, b.cfg.Syncs[0], b.cfg.Syncs[0], b.cfg.Syncs[0])
	for i, id := range []string{"a", "b", "paused", "every", "young"} {
		b.cfg.Syncs[i].ID = id
		b.cfg.Syncs[i].Schedule = "0 2 * * *"
	}
	b.cfg.Syncs[3].Schedule = "@every 24h"
	// Published the day before; serve went down at 01:50 and came back at 10:00.
	b.clk.Set(time.Date(2025, 5, 31, 12, 0, 0, 0, time.UTC))
	var ps []store.PutSyncParams
	for _, sc := range b.cfg.Syncs[:4] {
		ps = append(ps, store.PutSyncParams{ID: sc.ID, Workspace: sc.Workspace, Definition: "{}"})
	}
	if _, err := b.st.PutSyncs(b.ctx, ps); err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.SetSyncState(b.ctx, store.SetSyncStateParams{ID: "paused", State: store.SyncPaused, By: "ann", Why: "x"}); err != nil {
		t.Fatal(err)
	}
	// b ran after today's 02:00 tick (a run by hand, say).
	b.clk.Set(time.Date(2025, 6, 1, 2, 30, 0, 0, time.UTC))
	if _, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: "b", State: store.RunSucceeded}); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC))
	if _, err := b.st.PutSyncs(b.ctx, []store.PutSyncParams{{ID: "young", Workspace: "w", Definition: "{}"}}); err != nil {
		t.Fatal(err)
	}

	ids, err := b.svc.CatchUp(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("caught up %v, want [a]", ids)
	}
	q := b.queued(t)
	if len(q) != 1 || q["a"].Reason != ReasonSchedule {
		t.Fatalf("queued %+v, want a run of a", q)
	}
	// Again at once: the run is queued, nothing more.
	if _, err := b.svc.CatchUp(b.ctx); err != nil {
		t.Fatal(err)
	}
	if q := b.queued(t); len(q) != 1 {
		t.Fatalf("queued %+v after a second catch-up, want the one run of a", q)
	}
}

// TestCatchUpEverySchedule: an `@every D` schedule counts from the leader's
// start, so a serve restarted more often than D (a deploy every hour under
// `@every 6h`) never ran its sync. The catch-up queues a sync with no run
// for D; one that ran within D, or was published within D, waits.
func TestCatchUpEverySchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Syncs = append(b.cfg.Syncs[:1], b.cfg.Syncs[0], b.cfg.Syncs[0])
	for i, id := range []string{"late", "ran", "young"} {
		b.cfg.Syncs[i].ID = id
		b.cfg.Syncs[i].Schedule = "@every 6h"
	}
	b.clk.Set(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	if _, err := b.st.PutSyncs(b.ctx, []store.PutSyncParams{{ID: "late", Workspace: "w", Definition: "{}"}, {ID: "ran", Workspace: "w", Definition: "{}"}}); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(time.Date(2025, 6, 1, 3, 0, 0, 0, time.UTC))
	for _, id := range []string{"late", "ran"} {
		if _, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: id, State: store.RunSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	b.clk.Set(time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC))
	if _, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: "ran", State: store.RunSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.PutSyncs(b.ctx, []store.PutSyncParams{{ID: "young", Workspace: "w", Definition: "{}"}}); err != nil {
		t.Fatal(err)
	}
	// Every serve since 03:00 was restarted within 6 h of its start.
	b.clk.Set(time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC))
	ids, err := b.svc.CatchUp(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"late"}) {
		t.Fatalf("caught up %v, want [late]", ids)
	}
	if q := b.queued(t); len(q) != 1 || q["late"].Reason != ReasonSchedule {
		t.Fatalf("queued %+v, want a run of late", q)
	}
}
