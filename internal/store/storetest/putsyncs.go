package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// auditWhys are a sync's audit reasons, newest first.
func auditWhys(t *testing.T, b *bundle, syncID string) string {
	t.Helper()
	entries := must(b.st.ListAudit(b.ctx, syncID, 0))(t)
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Action + ":" + e.Why
	}
	return strings.Join(out, ",")
}

// testPutSyncs: a batch publishes each definition as PutSync would (new and
// changed ones move ChangedAt and are audited, a workspace alone is saved
// without either, identical ones are not touched, a pause is kept), refuses
// an invalid batch whole, and crosses statement chunks.
func testPutSyncs(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	equal(t, "empty batch", must(b.st.PutSyncs(ctx, nil))(t), store.PutSyncsResult{})
	for _, bad := range [][]store.PutSyncParams{
		{{ID: "a", Definition: "{}"}, {ID: "", Definition: "{}"}},
		{{ID: "a", Definition: "{}"}, {ID: "b", Definition: "{}"}, {ID: "a", Definition: `{"v":2}`}},
	} {
		_, err := b.st.PutSyncs(ctx, bad)
		if err == nil {
			t.Fatalf("PutSyncs(%+v) = nil, want an error", bad)
		}
		for _, sentinel := range []error{store.ErrFenced, store.ErrNotFound, store.ErrUnavailable} {
			if errors.Is(err, sentinel) {
				t.Fatalf("PutSyncs(%+v) = %v, want an invalid-argument error", bad, err)
			}
		}
	}
	equal(t, "syncs after refused batches", len(must(b.st.ListSyncs(ctx))(t)), 0)

	// New syncs, given out of order.
	const by = "config /etc/oncesync.yaml (host h, pid 1)"
	res := must(b.st.PutSyncs(ctx, []store.PutSyncParams{
		{ID: "s3", Workspace: "acme", Definition: `{"v":3}`, By: by},
		{ID: "s1", Workspace: "acme", Definition: `{"v":1}`, By: by},
		{ID: "s2", Workspace: "beta", Definition: `{"v":2}`, By: by},
	}))(t)
	// Each publish names who published it.
	for _, e := range must(b.st.ListAudit(ctx, "s2", 0))(t) {
		equal(t, "s2 publish by", e.By, by)
	}
	equal(t, "first batch", res, store.PutSyncsResult{Created: 3})
	for _, id := range []string{"s1", "s2", "s3"} {
		got := must(b.st.GetSync(ctx, id))(t)
		equal(t, id+" State", got.State, store.SyncActive)
		sameTime(t, id+" CreatedAt", got.CreatedAt, Start)
		sameTime(t, id+" ChangedAt", got.ChangedAt, Start)
		equal(t, id+" audit", auditWhys(t, b, id), "publish:new sync")
	}
	equal(t, "s2 Workspace", must(b.st.GetSync(ctx, "s2"))(t).Workspace, "beta")

	// One batch of every case against what PutSync left: s1 paused and
	// identical, s2 changed, s3 moved to another workspace, s4 identical,
	// s5 new.
	must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s4", Workspace: "acme", Definition: `{"v":4}`}))(t)
	paused := must(b.st.SetSyncState(ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncPaused, Reason: "person", By: "ann", Why: "x"}))(t)
	b.clk.Advance(time.Minute)
	now := Start.Add(time.Minute)
	res = must(b.st.PutSyncs(ctx, []store.PutSyncParams{
		{ID: "s5", Workspace: "acme", Definition: `{"v":5}`},
		{ID: "s4", Workspace: "acme", Definition: `{"v":4}`},
		{ID: "s3", Workspace: "gamma", Definition: `{"v":3}`},
		{ID: "s2", Workspace: "beta", Definition: `{"v":22}`},
		{ID: "s1", Workspace: "acme", Definition: `{"v":1}`},
	}))(t)
	equal(t, "second batch", res, store.PutSyncsResult{Created: 1, Changed: 1, WorkspaceOnly: 1, Unchanged: 2})
	if got := must(b.st.GetSync(ctx, "s1"))(t); got != paused {
		t.Fatalf("identical paused s1 = %+v, want %+v", got, paused)
	}
	s2 := must(b.st.GetSync(ctx, "s2"))(t)
	equal(t, "s2 Definition", s2.Definition, `{"v":22}`)
	sameTime(t, "s2 ChangedAt", s2.ChangedAt, now)
	sameTime(t, "s2 CreatedAt", s2.CreatedAt, Start)
	equal(t, "s2 audit", auditWhys(t, b, "s2"), "publish:definition changed,publish:new sync")
	s3 := must(b.st.GetSync(ctx, "s3"))(t)
	equal(t, "s3 Workspace", s3.Workspace, "gamma")
	sameTime(t, "s3 ChangedAt (workspace alone)", s3.ChangedAt, Start)
	equal(t, "s3 audit", auditWhys(t, b, "s3"), "publish:new sync")
	sameTime(t, "s4 ChangedAt", must(b.st.GetSync(ctx, "s4"))(t).ChangedAt, Start)
	equal(t, "s4 audit", auditWhys(t, b, "s4"), "publish:new sync")
	s5 := must(b.st.GetSync(ctx, "s5"))(t)
	sameTime(t, "s5 CreatedAt", s5.CreatedAt, now)
	equal(t, "s5 audit", auditWhys(t, b, "s5"), "publish:new sync")

	// A changed definition of a paused sync keeps the pause, as PutSync.
	res = must(b.st.PutSyncs(ctx, []store.PutSyncParams{{ID: "s1", Workspace: "acme", Definition: `{"v":11}`}}))(t)
	equal(t, "paused changed", res, store.PutSyncsResult{Changed: 1})
	equal(t, "s1 State after a changed definition", must(b.st.GetSync(ctx, "s1"))(t).State, store.SyncPaused)

	// More definitions than one statement carries (the PostgreSQL store
	// writes chunks of a few thousand): all or nothing of each case counts.
	const many = 4321
	batch := make([]store.PutSyncParams, many)
	for i := range batch {
		batch[i] = store.PutSyncParams{ID: fmt.Sprintf("m%05d", i), Workspace: "acme", Definition: fmt.Sprintf(`{"n":%d}`, i)}
	}
	equal(t, "many new", must(b.st.PutSyncs(ctx, batch))(t), store.PutSyncsResult{Created: many})
	for i := 0; i < many; i += 1000 {
		batch[i].Definition += " "
	}
	batch[many-1].Workspace = "beta"
	equal(t, "many again", must(b.st.PutSyncs(ctx, batch))(t),
		store.PutSyncsResult{Changed: 5, WorkspaceOnly: 1, Unchanged: many - 6})
	equal(t, "syncs", len(must(b.st.ListSyncs(ctx))(t)), many+5)
	equal(t, "last of many", must(b.st.GetSync(ctx, fmt.Sprintf("m%05d", many-1)))(t).Workspace, "beta")
	equal(t, "m03000 audit", auditWhys(t, b, "m03000"), "publish:definition changed,publish:new sync")
}

// testPutSyncsConcurrent: processes publishing one config at the same moment
// (serve and its workers) all succeed, and each new or changed definition is
// written and audited once.
func testPutSyncsConcurrent(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	const n, publishers = 300, 4
	batch := make([]store.PutSyncParams, n)
	for i := range batch {
		batch[i] = store.PutSyncParams{ID: fmt.Sprintf("c%03d", i), Workspace: "acme", Definition: `{"v":1}`}
	}
	publishAll := func(batch []store.PutSyncParams) store.PutSyncsResult {
		t.Helper()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total store.PutSyncsResult
			errs  []error
		)
		for range publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := b.st.PutSyncs(ctx, batch)
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
				total.Created += res.Created
				total.Changed += res.Changed
				total.WorkspaceOnly += res.WorkspaceOnly
				total.Unchanged += res.Unchanged
			}()
		}
		wg.Wait()
		noErr(t, errors.Join(errs...))
		return total
	}
	equal(t, "new, 4 publishers", publishAll(batch), store.PutSyncsResult{Created: n, Unchanged: (publishers - 1) * n})
	for i := range batch {
		batch[i].Definition = `{"v":2}`
	}
	equal(t, "changed, 4 publishers", publishAll(batch), store.PutSyncsResult{Changed: n, Unchanged: (publishers - 1) * n})
	equal(t, "c123 audit", auditWhys(t, b, "c123"), "publish:definition changed,publish:new sync")
}

// testPausedSyncs: ListPausedSyncs follows pauses and resumes.
func testPausedSyncs(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	equal(t, "no syncs", len(must(b.st.ListPausedSyncs(ctx))(t)), 0)
	must(b.st.PutSyncs(ctx, []store.PutSyncParams{{ID: "s1", Definition: "{}"}, {ID: "s2", Definition: "{}"}, {ID: "s3", Definition: "{}"}}))(t)
	equal(t, "none paused", len(must(b.st.ListPausedSyncs(ctx))(t)), 0)
	must(b.st.SetSyncState(ctx, store.SetSyncStateParams{ID: "s3", State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: "5 failures"}))(t)
	must(b.st.SetSyncState(ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncPaused, By: "ann", Why: "x"}))(t)
	equal(t, "paused", strings.Join(must(b.st.ListPausedSyncs(ctx))(t), ","), "s1,s3")
	must(b.st.SetSyncState(ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncActive, By: "ann", Why: "y"}))(t)
	equal(t, "after a resume", strings.Join(must(b.st.ListPausedSyncs(ctx))(t), ","), "s3")
}
