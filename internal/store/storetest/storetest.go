// Package storetest is the acceptance suite every store.Store implementation
// passes (like River's riverdrivertest): call Run from the driver's tests.
//
// The suite is driver-neutral: it uses only the store.Store interface, compares
// errors with errors.Is, and keeps every time microsecond-aligned so a store
// with microsecond timestamps (PostgreSQL) passes as well as one with
// nanoseconds.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// OpenFunc returns a new, empty store private to t that reads the time from
// clk. It closes the store when t ends (t.Cleanup).
type OpenFunc func(t *testing.T, clk *clock.Fake) store.Store

// Start is the fake clock's initial time in every test.
var Start = time.Date(2025, 3, 14, 15, 9, 26, 535_897_000, time.UTC)

type bundle struct {
	ctx context.Context
	st  store.Store
	clk *clock.Fake
}

func setup(t *testing.T, open OpenFunc) *bundle {
	t.Helper()
	clk := clock.NewFake(Start)
	return &bundle{ctx: t.Context(), st: open(t, clk), clk: clk}
}

// Run runs the whole suite against the stores open returns.
func Run(t *testing.T, open OpenFunc) {
	t.Run("Syncs", func(t *testing.T) { t.Parallel(); testSyncs(t, open) })
	t.Run("SyncState", func(t *testing.T) { t.Parallel(); testSyncState(t, open) })
	t.Run("PutSyncs", func(t *testing.T) { t.Parallel(); testPutSyncs(t, open) })
	t.Run("PutSyncsConcurrent", func(t *testing.T) { t.Parallel(); testPutSyncsConcurrent(t, open) })
	t.Run("PausedSyncs", func(t *testing.T) { t.Parallel(); testPausedSyncs(t, open) })
	t.Run("Runs", func(t *testing.T) { t.Parallel(); testRuns(t, open) })
	t.Run("RunsByState", func(t *testing.T) { t.Parallel(); testRunsByState(t, open) })
	t.Run("Cursor", func(t *testing.T) { t.Parallel(); testCursor(t, open) })
	t.Run("PayloadBase", func(t *testing.T) { t.Parallel(); testPayloadBase(t, open) })
	t.Run("Fence", func(t *testing.T) { t.Parallel(); testFence(t, open) })
	t.Run("Lease", func(t *testing.T) { t.Parallel(); testLease(t, open) })
	t.Run("LeaseConcurrent", func(t *testing.T) { t.Parallel(); testLeaseConcurrent(t, open) })
	t.Run("Ledger", func(t *testing.T) { t.Parallel(); testLedger(t, open) })
	t.Run("LedgerFenced", func(t *testing.T) { t.Parallel(); testLedgerFenced(t, open) })
	t.Run("LedgerTouchPruneList", func(t *testing.T) { t.Parallel(); testLedgerTouchPruneList(t, open) })
	t.Run("LedgerConcurrentClaims", func(t *testing.T) { t.Parallel(); testLedgerConcurrentClaims(t, open) })
	t.Run("LedgerStates", func(t *testing.T) { t.Parallel(); testLedgerStates(t, open) })
	t.Run("Audit", func(t *testing.T) { t.Parallel(); testAudit(t, open) })
	t.Run("RunPages", func(t *testing.T) { t.Parallel(); testRunPages(t, open) })
	t.Run("RunPagesPrune", func(t *testing.T) { t.Parallel(); testRunPagesPrune(t, open) })
	t.Run("RunsPrune", func(t *testing.T) { t.Parallel(); testRunsPrune(t, open) })
	t.Run("Checkpoint", func(t *testing.T) { t.Parallel(); testCheckpoint(t, open) })
}

// ---- helpers ----

// must(f())(t) returns f's value, failing t if f returned an error.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		// Shaped like real keys (hex SHA-256 is 64 characters).
		out[i] = fmt.Sprintf("%s%0*d", prefix, 64-len(prefix), i)
	}
	return out
}

func acquire(t *testing.T, b *bundle, syncID, token string, ttl time.Duration) store.Lease {
	t.Helper()
	return must(b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{
		SyncID: syncID, Token: token, Holder: "host-" + token, RunID: 1, TTL: ttl,
	}))(t)
}

func auditActions(t *testing.T, b *bundle, syncID string) []string {
	t.Helper()
	entries := must(b.st.ListAudit(b.ctx, syncID, 0))(t)
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Action
	}
	return out
}

// ---- syncs ----

func testSyncs(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	_, err := b.st.GetSync(ctx, "nope")
	wantErr(t, err, store.ErrNotFound)

	created := must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s1", Workspace: "acme", Definition: `{"v":1}`, By: "config a.yaml (host h, pid 1)"}))(t)
	equal(t, "ID", created.ID, "s1")
	equal(t, "Workspace", created.Workspace, "acme")
	equal(t, "Definition", created.Definition, `{"v":1}`)
	equal(t, "State", created.State, store.SyncActive)
	sameTime(t, "CreatedAt", created.CreatedAt, Start)
	sameTime(t, "ChangedAt", created.ChangedAt, Start)
	got := must(b.st.GetSync(ctx, "s1"))(t)
	if got != created {
		t.Fatalf("GetSync = %+v, want %+v", got, created)
	}
	equal(t, "audit after publish", strings.Join(auditActions(t, b, "s1"), ","), "publish")
	equal(t, "publish by", must(b.st.ListAudit(ctx, "s1", 0))(t)[0].By, "config a.yaml (host h, pid 1)")

	// Identical definition: nothing changes, nothing audited.
	b.clk.Advance(time.Minute)
	same := must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s1", Workspace: "acme", Definition: `{"v":1}`}))(t)
	sameTime(t, "ChangedAt after identical publish", same.ChangedAt, Start)
	equal(t, "audit after identical publish", strings.Join(auditActions(t, b, "s1"), ","), "publish")

	// Changed definition: ChangedAt moves, CreatedAt stays, audited.
	b.clk.Advance(time.Minute)
	changed := must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s1", Workspace: "acme", Definition: `{"v":2}`}))(t)
	equal(t, "Definition", changed.Definition, `{"v":2}`)
	sameTime(t, "ChangedAt after change", changed.ChangedAt, Start.Add(2*time.Minute))
	sameTime(t, "CreatedAt after change", changed.CreatedAt, Start)
	equal(t, "audit after change", strings.Join(auditActions(t, b, "s1"), ","), "publish,publish")
	got = must(b.st.GetSync(ctx, "s1"))(t)
	if got != changed {
		t.Fatalf("GetSync = %+v, want %+v", got, changed)
	}

	// Publishing keeps a pause.
	must(b.st.SetSyncState(ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncPaused, Reason: "person", By: "ann", Why: "x"}))(t)
	republished := must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s1", Workspace: "acme", Definition: `{"v":3}`}))(t)
	equal(t, "State after publish of a paused sync", republished.State, store.SyncPaused)

	must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s0", Workspace: "acme", Definition: `{}`}))(t)
	must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s2", Workspace: "beta", Definition: `{}`}))(t)
	list := must(b.st.ListSyncs(ctx))(t)
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	equal(t, "ListSyncs ids", strings.Join(ids, ","), "s0,s1,s2")
	equal(t, "ListSyncs[2].Workspace", list[2].Workspace, "beta")
}

func testSyncState(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	_, err := b.st.SetSyncState(ctx, store.SetSyncStateParams{ID: "ghost", State: store.SyncPaused, Reason: "person", By: "ann", Why: "x"})
	wantErr(t, err, store.ErrNotFound)
	if n := len(auditActions(t, b, "ghost")); n != 0 {
		t.Fatalf("a refused pause left %d audit entries", n)
	}

	must(b.st.PutSync(ctx, store.PutSyncParams{ID: "s1", Definition: `{}`}))(t)

	b.clk.Advance(time.Hour)
	paused := must(b.st.SetSyncState(ctx, store.SetSyncStateParams{
		ID: "s1", State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: "5 failures in a row",
	}))(t)
	equal(t, "State", paused.State, store.SyncPaused)
	equal(t, "PauseReason", paused.PauseReason, "breaker")
	equal(t, "PausedBy", paused.PausedBy, "oncesync")
	equal(t, "PausedWhy", paused.PausedWhy, "5 failures in a row")
	sameTime(t, "ChangedAt after pause (kept)", paused.ChangedAt, Start)
	got := must(b.st.GetSync(ctx, "s1"))(t)
	if got != paused {
		t.Fatalf("GetSync = %+v, want %+v", got, paused)
	}

	b.clk.Advance(time.Hour)
	resumed := must(b.st.SetSyncState(ctx, store.SetSyncStateParams{
		ID: "s1", State: store.SyncActive, By: "ann", Why: "fixed the api key",
	}))(t)
	equal(t, "State", resumed.State, store.SyncActive)
	equal(t, "PauseReason after resume", resumed.PauseReason, "")
	equal(t, "PausedBy after resume", resumed.PausedBy, "")
	sameTime(t, "ChangedAt after resume (re-armed)", resumed.ChangedAt, Start.Add(2*time.Hour))

	audit := must(b.st.ListAudit(ctx, "s1", 0))(t)
	if len(audit) != 3 {
		t.Fatalf("audit = %+v, want resume, pause, publish", audit)
	}
	equal(t, "audit[0].Action", audit[0].Action, "resume")
	equal(t, "audit[0].By", audit[0].By, "ann")
	equal(t, "audit[0].Why", audit[0].Why, "fixed the api key")
	sameTime(t, "audit[0].At", audit[0].At, Start.Add(2*time.Hour))
	equal(t, "audit[1].Action", audit[1].Action, "pause")
	equal(t, "audit[1].By", audit[1].By, "oncesync")
	equal(t, "audit[1].Why", audit[1].Why, "5 failures in a row")
	sameTime(t, "audit[1].At", audit[1].At, Start.Add(time.Hour))
	equal(t, "audit[2].Action", audit[2].Action, "publish")

	// A conditional change applies only from the state it names.
	_, err = b.st.SetSyncState(ctx, store.SetSyncStateParams{
		ID: "s1", State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: "again", From: store.SyncPaused,
	})
	wantErr(t, err, store.ErrStateChanged)
	if got := must(b.st.GetSync(ctx, "s1"))(t); got != resumed {
		t.Fatalf("a refused conditional pause changed the sync: %+v, want %+v", got, resumed)
	}
	if n := len(auditActions(t, b, "s1")); n != 3 {
		t.Fatalf("a refused conditional pause left an audit entry (%d entries)", n)
	}
	_, err = b.st.SetSyncState(ctx, store.SetSyncStateParams{ID: "ghost", State: store.SyncPaused, Reason: "breaker", From: store.SyncActive})
	wantErr(t, err, store.ErrNotFound)
	repaused := must(b.st.SetSyncState(ctx, store.SetSyncStateParams{
		ID: "s1", State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: "again", From: store.SyncActive,
	}))(t)
	equal(t, "State after a conditional pause", repaused.State, store.SyncPaused)
}

// ---- runs ----

func testRuns(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	_, err := b.st.GetRun(ctx, 987654)
	wantErr(t, err, store.ErrNotFound)
	wantErr(t, b.st.UpdateRun(ctx, store.Run{ID: 987654, SyncID: "s1", State: store.RunRunning}), store.ErrNotFound)

	queued := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunQueued, Attempt: 1}))(t)
	if queued.ID == 0 {
		t.Fatal("InsertRun returned ID 0")
	}
	equal(t, "SyncID", queued.SyncID, "s1")
	equal(t, "State", queued.State, store.RunQueued)
	equal(t, "Attempt", queued.Attempt, 1)
	sameTime(t, "StartedAt", queued.StartedAt, Start)
	if !queued.FinishedAt.IsZero() {
		t.Fatalf("queued run FinishedAt = %v, want zero", queued.FinishedAt)
	}
	got := must(b.st.GetRun(ctx, queued.ID))(t)
	if got != queued {
		t.Fatalf("GetRun = %+v, want %+v", got, queued)
	}

	// An enqueue-time failure is recorded failed and finished at once.
	b.clk.Advance(time.Second)
	failed := must(b.st.InsertRun(ctx, store.InsertRunParams{
		SyncID: "s1", State: store.RunFailed, Attempt: 1, FailureCode: "invalid_sync_definition", Detail: "mapping: unknown column",
	}))(t)
	equal(t, "FailureCode", failed.FailureCode, "invalid_sync_definition")
	equal(t, "FailureDetail", failed.FailureDetail, "mapping: unknown column")
	sameTime(t, "failed FinishedAt", failed.FinishedAt, Start.Add(time.Second))

	// Update: running with a fence and counters.
	b.clk.Advance(time.Second)
	r := queued
	r.State = store.RunRunning
	r.Fence = 7
	r.Counters = store.Counters{Read: 1, Written: 2, Replayed: 3, Rejected: 4, InDoubt: 5, Settled: 6, Pages: 7, Requests: 8, Skipped: 9}
	noErr(t, b.st.UpdateRun(ctx, r))
	got = must(b.st.GetRun(ctx, r.ID))(t)
	if got != r {
		t.Fatalf("after update GetRun = %+v, want %+v", got, r)
	}

	// Finishing stamps FinishedAt once.
	b.clk.Advance(time.Second)
	r.State = store.RunSucceeded
	r.Counters.Pages = 9
	noErr(t, b.st.UpdateRun(ctx, r))
	got = must(b.st.GetRun(ctx, r.ID))(t)
	equal(t, "State", got.State, store.RunSucceeded)
	equal(t, "Pages", got.Pages, int64(9))
	sameTime(t, "FinishedAt", got.FinishedAt, Start.Add(3*time.Second))
	b.clk.Advance(time.Second)
	r.Counters.Requests = 10
	noErr(t, b.st.UpdateRun(ctx, r)) // FinishedAt still zero in r
	got = must(b.st.GetRun(ctx, r.ID))(t)
	sameTime(t, "FinishedAt after second update", got.FinishedAt, Start.Add(3*time.Second))
	equal(t, "Requests", got.Requests, int64(10))

	// CloseRun closes a running run, and leaves one that ended alone.
	wantErr(t, func() error {
		_, err := b.st.CloseRun(ctx, store.Run{ID: 987654, SyncID: "s1", State: store.RunInterrupted})
		return err
	}(), store.ErrNotFound)
	stale := r
	stale.State = store.RunInterrupted
	stale.FailureCode = "interrupted"
	if closed := must(b.st.CloseRun(ctx, stale))(t); closed {
		t.Fatal("CloseRun closed a run that had succeeded")
	}
	equal(t, "State after a refused CloseRun", must(b.st.GetRun(ctx, r.ID))(t).State, store.RunSucceeded)
	dead := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s2", State: store.RunRunning, Attempt: 1}))(t)
	dead.State = store.RunInterrupted
	dead.FailureCode = "interrupted"
	dead.FinishedAt = b.clk.Now()
	if closed := must(b.st.CloseRun(ctx, dead))(t); !closed {
		t.Fatal("CloseRun did not close a running run")
	}
	got = must(b.st.GetRun(ctx, dead.ID))(t)
	equal(t, "State after CloseRun", got.State, store.RunInterrupted)
	equal(t, "FailureCode after CloseRun", got.FailureCode, "interrupted")
	sameTime(t, "FinishedAt after CloseRun", got.FinishedAt, dead.FinishedAt)

	// Failure fields are saved.
	other := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s2", State: store.RunRunning, Attempt: 2}))(t)
	other.State = store.RunFailed
	other.FailureCode = "destination_unavailable"
	other.FailureDetail = "503 from destination"
	noErr(t, b.st.UpdateRun(ctx, other))
	got = must(b.st.GetRun(ctx, other.ID))(t)
	equal(t, "FailureCode", got.FailureCode, "destination_unavailable")
	equal(t, "FailureDetail", got.FailureDetail, "503 from destination")
	equal(t, "Attempt", got.Attempt, 2)

	// Interrupted is not final: no FinishedAt.
	third := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning}))(t)
	third.State = store.RunInterrupted
	noErr(t, b.st.UpdateRun(ctx, third))
	got = must(b.st.GetRun(ctx, third.ID))(t)
	if !got.FinishedAt.IsZero() {
		t.Fatalf("interrupted run FinishedAt = %v, want zero", got.FinishedAt)
	}

	// ListRuns: newest first, one sync only, limit.
	runs := must(b.st.ListRuns(ctx, "s1", 0))(t)
	var ids []int64
	for _, x := range runs {
		ids = append(ids, x.ID)
	}
	want := []int64{third.ID, failed.ID, queued.ID}
	equal(t, "ListRuns ids", fmt.Sprint(ids), fmt.Sprint(want))
	equal(t, "ListRuns[2].State", runs[2].State, store.RunSucceeded)
	limited := must(b.st.ListRuns(ctx, "s1", 2))(t)
	equal(t, "ListRuns limit 2", len(limited), 2)
	equal(t, "ListRuns limit 2 first", limited[0].ID, third.ID)
	equal(t, "ListRuns of unknown sync", len(must(b.st.ListRuns(ctx, "nope", 10))(t)), 0)
}

func testRunsByState(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	equal(t, "no running runs", len(must(b.st.ListRunsByState(ctx, store.RunRunning, 0))(t)), 0)
	a := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunFailed, FailureCode: "store_unavailable"}))(t)
	c := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s2", State: store.RunRunning, Attempt: 2}))(t)
	d := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s3", State: store.RunRunning}))(t)
	d.State = store.RunInterrupted
	noErr(t, b.st.UpdateRun(ctx, d))

	ids := func(runs []store.Run) string {
		var out []int64
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return fmt.Sprint(out)
	}
	running := must(b.st.ListRunsByState(ctx, store.RunRunning, 0))(t)
	equal(t, "running, oldest first, every sync", ids(running), fmt.Sprint([]int64{a.ID, c.ID}))
	equal(t, "running[1].Attempt", running[1].Attempt, 2)
	equal(t, "running[1].SyncID", running[1].SyncID, "s2")
	equal(t, "limit 1", ids(must(b.st.ListRunsByState(ctx, store.RunRunning, 1))(t)), fmt.Sprint([]int64{a.ID}))
	equal(t, "interrupted", ids(must(b.st.ListRunsByState(ctx, store.RunInterrupted, 0))(t)), fmt.Sprint([]int64{d.ID}))
	equal(t, "none succeeded", len(must(b.st.ListRunsByState(ctx, store.RunSucceeded, 10))(t)), 0)
}

// ---- cursor and fences ----

// testPayloadBase: the first print recorded for a sync stays its base,
// whatever is asked later; each sync has its own, "" included.
func testPayloadBase(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	if base, found, err := b.st.GetPayloadBase(ctx, "s1"); err != nil || found || base != "" {
		t.Fatalf("GetPayloadBase before any = %q, %v, %v; want none", base, found, err)
	}
	equal(t, "first base of s1", must(b.st.PayloadBase(ctx, "s1", "list_ids=2"))(t), "list_ids=2")
	if base, found, err := b.st.GetPayloadBase(ctx, "s1"); err != nil || !found || base != "list_ids=2" {
		t.Fatalf("GetPayloadBase = %q, %v, %v; want list_ids=2", base, found, err)
	}
	equal(t, "s1 asked with other settings", must(b.st.PayloadBase(ctx, "s1", "list_ids=2,7"))(t), "list_ids=2")
	equal(t, "s1 asked with none", must(b.st.PayloadBase(ctx, "s1", ""))(t), "list_ids=2")
	equal(t, "first base of s2 (none)", must(b.st.PayloadBase(ctx, "s2", ""))(t), "")
	equal(t, "s2 asked with settings", must(b.st.PayloadBase(ctx, "s2", "list_ids=9"))(t), "")
	// Concurrent first asks agree on one base.
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = b.st.PayloadBase(ctx, "s3", fmt.Sprintf("list_ids=%d", i)) })
	}
	wg.Wait()
	for i := range got {
		noErr(t, errs[i])
		equal(t, fmt.Sprintf("concurrent ask %d", i), got[i], got[0])
	}
}

func testCursor(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	c := must(b.st.GetCursor(ctx, "s1"))(t)
	equal(t, "Value of unsaved cursor", c.Value, "")
	equal(t, "Fence of unsaved cursor", c.Fence, int64(0))
	if !c.UpdatedAt.IsZero() {
		t.Fatalf("UpdatedAt of unsaved cursor = %v", c.UpdatedAt)
	}

	old := acquire(t, b, "s1", "tok-a", 30*time.Second)
	equal(t, "first fence", old.Fence, int64(1))
	b.clk.Advance(time.Second)
	noErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "page-2", Fence: old.Fence, RunID: 11}))
	c = must(b.st.GetCursor(ctx, "s1"))(t)
	want := store.Cursor{SyncID: "s1", Value: "page-2", Fence: 1, RunID: 11, UpdatedAt: Start.Add(time.Second)}
	equal(t, "Value", c.Value, want.Value)
	equal(t, "Fence", c.Fence, want.Fence)
	equal(t, "RunID", c.RunID, want.RunID)
	sameTime(t, "UpdatedAt", c.UpdatedAt, want.UpdatedAt)

	// The old holder stalls past its TTL; a new run takes the lease (fence 2).
	b.clk.Advance(time.Minute)
	newer := acquire(t, b, "s1", "tok-b", 30*time.Second)
	equal(t, "second fence", newer.Fence, int64(2))

	// The old holder wakes up and tries to checkpoint: refused, nothing written,
	// even though the new holder has not written anything yet.
	err := b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "page-3", Fence: old.Fence, RunID: 11})
	wantErr(t, err, store.ErrFenced)
	c = must(b.st.GetCursor(ctx, "s1"))(t)
	equal(t, "Value after refused write", c.Value, "page-2")
	equal(t, "Fence after refused write", c.Fence, int64(1))

	b.clk.Advance(time.Second)
	noErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "page-3", Fence: newer.Fence, RunID: 12}))
	c = must(b.st.GetCursor(ctx, "s1"))(t)
	equal(t, "Value", c.Value, "page-3")
	equal(t, "RunID", c.RunID, int64(12))
	sameTime(t, "UpdatedAt", c.UpdatedAt, Start.Add(time.Minute+2*time.Second))

	// Back to the start of the source is a write like any other.
	noErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "", Fence: newer.Fence, RunID: 12}))
	equal(t, "Value reset", must(b.st.GetCursor(ctx, "s1"))(t).Value, "")

	// Cursors are per sync.
	equal(t, "other sync's cursor", must(b.st.GetCursor(ctx, "s2"))(t).Value, "")
}

func testFence(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	// Redis-lease mode: fences come from Redis and are registered with RaiseFence.
	noErr(t, b.st.RaiseFence(ctx, "s1", 3))
	noErr(t, b.st.RaiseFence(ctx, "s1", 3)) // same fence again: fine
	noErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "c3", Fence: 3, RunID: 1}))

	// The new holder (fence 4) raises the fence before writing anything: the
	// old holder (fence 3) can no longer write.
	noErr(t, b.st.RaiseFence(ctx, "s1", 4))
	wantErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "zombie", Fence: 3, RunID: 1}), store.ErrFenced)
	wantErr(t, b.st.RaiseFence(ctx, "s1", 3), store.ErrFenced)
	wantErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: 3, RunID: 1, Keys: keys("z", 3)}), store.ErrFenced)
	equal(t, "cursor after zombie write", must(b.st.GetCursor(ctx, "s1"))(t).Value, "c3")

	// An accepted write registers its fence: after a write under 6, 5 is stale.
	noErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "c6", Fence: 6, RunID: 2}))
	wantErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s1", Value: "c5", Fence: 5, RunID: 2}), store.ErrFenced)
	equal(t, "cursor", must(b.st.GetCursor(ctx, "s1"))(t).Value, "c6")

	// A lease grant takes the next fence above the registered one.
	l := acquire(t, b, "s1", "tok", time.Minute)
	equal(t, "fence after raise", l.Fence, int64(7))

	// Fences are per sync.
	noErr(t, b.st.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s2", Value: "x", Fence: 1, RunID: 3}))
	equal(t, "other sync's first grant", acquire(t, b, "s3", "tok", time.Minute).Fence, int64(1))
}

// ---- leases ----

func testLease(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	const ttl = 30 * time.Second

	_, err := b.st.LeaseGet(ctx, "s1")
	wantErr(t, err, store.ErrNotFound)

	a := must(b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "tok-a", Holder: "host-a/boot-1/pid-100", RunID: 42, TTL: ttl}))(t)
	equal(t, "FreeFor of a first grant (unknown)", a.FreeFor, time.Duration(0))
	want := store.Lease{SyncID: "s1", Token: "tok-a", Fence: 1, Holder: "host-a/boot-1/pid-100", RunID: 42, ExpiresAt: Start.Add(ttl)}
	equal(t, "Token", a.Token, want.Token)
	equal(t, "Fence", a.Fence, want.Fence)
	equal(t, "Holder", a.Holder, want.Holder)
	equal(t, "RunID", a.RunID, want.RunID)
	sameTime(t, "ExpiresAt", a.ExpiresAt, want.ExpiresAt)
	got := must(b.st.LeaseGet(ctx, "s1"))(t)
	equal(t, "LeaseGet.Token", got.Token, "tok-a")
	equal(t, "LeaseGet.Fence", got.Fence, int64(1))
	sameTime(t, "LeaseGet.ExpiresAt", got.ExpiresAt, Start.Add(ttl))

	// A live lease is held: the error names the holder and nothing changes.
	b.clk.Advance(ttl - time.Millisecond)
	_, err = b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "tok-b", Holder: "host-b", RunID: 43, TTL: ttl})
	wantErr(t, err, store.ErrLeaseHeld)
	if !strings.Contains(err.Error(), "host-a/boot-1/pid-100") {
		t.Fatalf("ErrLeaseHeld message %q does not name the holder", err)
	}
	// A wrong TakeOver token does not help.
	_, err = b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "tok-b", Holder: "host-b", TTL: ttl, TakeOver: "tok-x"})
	wantErr(t, err, store.ErrLeaseHeld)
	equal(t, "token after refusals", must(b.st.LeaseGet(ctx, "s1"))(t).Token, "tok-a")

	// Renew before expiry extends from now.
	renewed := must(b.st.LeaseRenew(ctx, "s1", "tok-a", ttl))(t)
	sameTime(t, "renewed ExpiresAt", renewed.ExpiresAt, b.clk.Now().Add(ttl))
	equal(t, "renewed Fence", renewed.Fence, int64(1))
	_, err = b.st.LeaseRenew(ctx, "s1", "tok-b", ttl)
	wantErr(t, err, store.ErrLeaseLost)

	// Expired (by the store's clock): an expired lease cannot be renewed, even
	// if nobody took it, and anyone may take it with the next fence.
	b.clk.Advance(ttl + time.Millisecond)
	_, err = b.st.LeaseRenew(ctx, "s1", "tok-a", ttl)
	wantErr(t, err, store.ErrLeaseLost)
	b.clk.Advance(4 * time.Second)
	bl := must(b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "tok-b", Holder: "host-b", RunID: 43, TTL: ttl}))(t)
	equal(t, "fence after expiry takeover", bl.Fence, int64(2))
	// It had been free since tok-a's renewed lease expired.
	equal(t, "FreeFor after expiry", bl.FreeFor, 4*time.Second+time.Millisecond)
	equal(t, "RunID", bl.RunID, int64(43))
	_, err = b.st.LeaseRenew(ctx, "s1", "tok-a", ttl)
	wantErr(t, err, store.ErrLeaseLost)

	// TakeOver: a live lease whose holder is known dead is taken at once.
	cl := must(b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "tok-c", Holder: "host-c", TTL: ttl, TakeOver: "tok-b"}))(t)
	equal(t, "fence after takeover", cl.Fence, int64(3))
	equal(t, "FreeFor after a takeover", cl.FreeFor, time.Duration(0))
	_, err = b.st.LeaseRenew(ctx, "s1", "tok-b", ttl)
	wantErr(t, err, store.ErrLeaseLost)

	// Release by a non-holder is a no-op; by the holder frees the lease.
	noErr(t, b.st.LeaseRelease(ctx, "s1", "tok-b"))
	equal(t, "token after foreign release", must(b.st.LeaseGet(ctx, "s1"))(t).Token, "tok-c")
	noErr(t, b.st.LeaseRelease(ctx, "s1", "tok-c"))
	_, err = b.st.LeaseGet(ctx, "s1")
	wantErr(t, err, store.ErrNotFound)
	_, err = b.st.LeaseRenew(ctx, "s1", "tok-c", ttl)
	wantErr(t, err, store.ErrLeaseLost)
	noErr(t, b.st.LeaseRelease(ctx, "s1", "tok-c")) // twice: still fine

	// The fence never goes back: the next grant after a release is higher.
	b.clk.Advance(time.Minute)
	dl := acquire(t, b, "s1", "tok-d", ttl)
	equal(t, "fence after release", dl.Fence, int64(4))
	equal(t, "FreeFor after a release (unknown)", dl.FreeFor, time.Duration(0))
	// Each sync has its own lease and fence.
	equal(t, "other sync's fence", acquire(t, b, "s2", "tok-d", ttl).Fence, int64(1))

	// A lease superseded by a registered newer fence (Redis mode) is lost.
	noErr(t, b.st.RaiseFence(ctx, "s2", 5))
	_, err = b.st.LeaseRenew(ctx, "s2", "tok-d", ttl)
	wantErr(t, err, store.ErrLeaseLost)
}

func testLeaseConcurrent(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []store.Lease
		errs    []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{
				SyncID: "s1", Token: fmt.Sprintf("tok-%d", i), Holder: fmt.Sprintf("worker-%d", i), TTL: time.Minute,
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			winners = append(winners, l)
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d winners (%+v), want exactly 1", len(winners), winners)
	}
	for _, err := range errs {
		wantErr(t, err, store.ErrLeaseHeld)
	}
	equal(t, "winner fence", winners[0].Fence, int64(1))
	equal(t, "stored token", must(b.st.LeaseGet(b.ctx, "s1"))(t).Token, winners[0].Token)
}

// ---- ledger ----

func testLedger(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	empty := must(b.st.LedgerGet(ctx, "s1", nil))(t)
	equal(t, "LedgerGet(nil)", len(empty), 0)

	l1 := acquire(t, b, "s1", "tok-1", time.Minute)
	ks := keys("k", 6)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l1.Fence, RunID: 101, Keys: ks[:5]}))
	got := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	equal(t, "entries after claim", len(got), 5)
	if _, ok := got[ks[5]]; ok {
		t.Fatal("an unclaimed key came back from LedgerGet")
	}
	e := got[ks[0]]
	equal(t, "Key", e.Key, ks[0])
	equal(t, "State", e.State, store.LedgerPending)
	equal(t, "Fence", e.Fence, l1.Fence)
	equal(t, "RunID", e.RunID, int64(101))
	equal(t, "Attempts", e.Attempts, 1)
	sameTime(t, "ClaimedAt", e.ClaimedAt, Start)
	sameTime(t, "SeenAt", e.SeenAt, Start)
	if !e.CompletedAt.IsZero() {
		t.Fatalf("pending CompletedAt = %v", e.CompletedAt)
	}

	// Keys are per sync.
	equal(t, "other sync's entries", len(must(b.st.LedgerGet(ctx, "s2", ks))(t)), 0)

	// Finish: complete, rejected, in_doubt; k3 and k4 stay pending.
	b.clk.Advance(time.Second)
	finishAt := b.clk.Now()
	noErr(t, b.st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s1", Fence: l1.Fence, RunID: 101, Entries: []store.LedgerFinish{
		{Key: ks[0], State: store.LedgerComplete, Result: "contact:17"},
		{Key: ks[1], State: store.LedgerRejected, Message: "invalid phone number"},
		{Key: ks[2], State: store.LedgerInDoubt},
	}}))
	got = must(b.st.LedgerGet(ctx, "s1", ks[:3]))(t)
	c := got[ks[0]]
	equal(t, "complete State", c.State, store.LedgerComplete)
	equal(t, "complete Result", c.Result, "contact:17")
	equal(t, "complete Attempts", c.Attempts, 1)
	sameTime(t, "complete CompletedAt", c.CompletedAt, finishAt)
	sameTime(t, "complete ClaimedAt (kept)", c.ClaimedAt, Start)
	sameTime(t, "complete SeenAt", c.SeenAt, finishAt)
	r := got[ks[1]]
	equal(t, "rejected State", r.State, store.LedgerRejected)
	equal(t, "rejected Message", r.Message, "invalid phone number")
	if !r.CompletedAt.IsZero() {
		t.Fatalf("rejected CompletedAt = %v, want zero", r.CompletedAt)
	}
	equal(t, "in_doubt State", got[ks[2]].State, store.LedgerInDoubt)

	// Claim again under the same fence: complete and in_doubt untouched,
	// rejected and pending re-claimed with attempts+1, absent inserted.
	b.clk.Advance(time.Second)
	reclaimAt := b.clk.Now()
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l1.Fence, RunID: 102, Keys: ks}))
	after := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	if after[ks[0]] != c {
		t.Fatalf("complete entry changed by a claim: %+v -> %+v", c, after[ks[0]])
	}
	if after[ks[2]] != got[ks[2]] {
		t.Fatalf("in_doubt entry changed by a claim: %+v -> %+v", got[ks[2]], after[ks[2]])
	}
	rc := after[ks[1]]
	equal(t, "re-claimed rejected State", rc.State, store.LedgerPending)
	equal(t, "re-claimed rejected Attempts", rc.Attempts, 2)
	equal(t, "re-claimed rejected RunID", rc.RunID, int64(102))
	equal(t, "re-claimed rejected Message", rc.Message, "")
	sameTime(t, "re-claimed rejected ClaimedAt", rc.ClaimedAt, reclaimAt)
	equal(t, "re-claimed pending Attempts", after[ks[3]].Attempts, 2)
	equal(t, "new key Attempts", after[ks[5]].Attempts, 1)
	equal(t, "new key State", after[ks[5]].State, store.LedgerPending)

	// A new lease holder (higher fence) re-claims pending entries of the old one.
	b.clk.Advance(2 * time.Minute)
	l2 := acquire(t, b, "s1", "tok-2", time.Minute)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l2.Fence, RunID: 103, Keys: ks[3:4]}))
	p := must(b.st.LedgerGet(ctx, "s1", ks[3:4]))(t)[ks[3]]
	equal(t, "re-claimed Fence", p.Fence, l2.Fence)
	equal(t, "re-claimed Attempts", p.Attempts, 3)
	equal(t, "re-claimed RunID", p.RunID, int64(103))

	// Finishing a pending key from another run's claim, and an in_doubt one
	// settled as complete.
	noErr(t, b.st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s1", Fence: l2.Fence, RunID: 103, Entries: []store.LedgerFinish{
		{Key: ks[3], State: store.LedgerComplete, Result: "contact:20"},
		{Key: ks[2], State: store.LedgerComplete, Result: "contact:19"},
	}}))
	fin := must(b.st.LedgerGet(ctx, "s1", ks[2:4]))(t)
	equal(t, "settled State", fin[ks[2]].State, store.LedgerComplete)
	equal(t, "settled Result", fin[ks[2]].Result, "contact:19")
	equal(t, "finished Fence", fin[ks[3]].Fence, l2.Fence)

	// Duplicate keys in one call are fine.
	dup := keys("dup", 2)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l2.Fence, RunID: 103, Keys: []string{dup[0], dup[0], dup[1]}}))
	dg := must(b.st.LedgerGet(ctx, "s1", []string{dup[0], dup[1], dup[0]}))(t)
	equal(t, "entries of duplicated keys", len(dg), 2)

	// A page larger than any driver's parameter chunk.
	big := keys("big", 2500)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l2.Fence, RunID: 104, Keys: big}))
	fins := make([]store.LedgerFinish, len(big))
	for i, k := range big {
		fins[i] = store.LedgerFinish{Key: k, State: store.LedgerComplete, Result: fmt.Sprint("id-", i)}
	}
	noErr(t, b.st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s1", Fence: l2.Fence, RunID: 104, Entries: fins}))
	bg := must(b.st.LedgerGet(ctx, "s1", big))(t)
	equal(t, "big page entries", len(bg), len(big))
	equal(t, "big page last result", bg[big[2499]].Result, "id-2499")
	equal(t, "big page last state", bg[big[2499]].State, store.LedgerComplete)
}

func testLedgerFenced(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	old := acquire(t, b, "s1", "tok-old", time.Minute)
	ks := keys("f", 4)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: old.Fence, RunID: 1, Keys: ks[:2]}))
	before := must(b.st.LedgerGet(ctx, "s1", ks))(t)

	// The old holder stalls; a new one takes over but has written nothing yet.
	b.clk.Advance(2 * time.Minute)
	nw := acquire(t, b, "s1", "tok-new", time.Minute)

	// Stale claim: refused as a whole, new keys not inserted, old ones untouched.
	err := b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: old.Fence, RunID: 1, Keys: ks})
	wantErr(t, err, store.ErrFenced)
	// Stale finish: refused, entries stay pending.
	err = b.st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s1", Fence: old.Fence, RunID: 1, Entries: []store.LedgerFinish{
		{Key: ks[0], State: store.LedgerComplete, Result: "zombie"},
		{Key: ks[3], State: store.LedgerComplete, Result: "zombie"},
	}})
	wantErr(t, err, store.ErrFenced)
	after := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	equal(t, "entries after refused writes", len(after), len(before))
	for k, e := range before {
		if after[k] != e {
			t.Fatalf("entry %s changed by a refused write: %+v -> %+v", k, e, after[k])
		}
	}

	// The new holder claims the old holder's pending keys (its writer died
	// between the call and the mark: in doubt for the runner to resolve).
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: nw.Fence, RunID: 2, Keys: ks}))
	got := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	equal(t, "entries", len(got), 4)
	equal(t, "re-claimed Fence", got[ks[0]].Fence, nw.Fence)
	equal(t, "re-claimed Attempts", got[ks[0]].Attempts, 2)
	equal(t, "new key Attempts", got[ks[3]].Attempts, 1)
}

func testLedgerTouchPruneList(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	f1 := acquire(t, b, "s1", "tok", time.Hour).Fence
	f2 := acquire(t, b, "s2", "tok", time.Hour).Fence

	ks := keys("p", 6)
	finish := func(syncID string, fence int64, key string, state store.LedgerState) {
		t.Helper()
		noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: syncID, Fence: fence, RunID: 1, Keys: []string{key}}))
		if state != store.LedgerPending {
			noErr(t, b.st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: syncID, Fence: fence, RunID: 1, Entries: []store.LedgerFinish{
				{Key: key, State: state, Result: "r-" + key[len(key)-1:], Message: "m-" + key[len(key)-1:]},
			}}))
		}
		b.clk.Advance(time.Second)
	}
	finish("s1", f1, ks[0], store.LedgerComplete)
	finish("s1", f1, ks[1], store.LedgerRejected)
	finish("s1", f1, ks[2], store.LedgerPending)
	finish("s1", f1, ks[3], store.LedgerInDoubt)
	finish("s1", f1, ks[4], store.LedgerComplete)
	finish("s1", f1, ks[5], store.LedgerRejected)
	finish("s2", f2, ks[0], store.LedgerComplete)
	finish("s2", f2, ks[1], store.LedgerInDoubt)

	// List: per sync and state, most recently claimed first, limit.
	rej := must(b.st.LedgerList(ctx, "s1", store.LedgerRejected, 0))(t)
	equal(t, "rejected count", len(rej), 2)
	equal(t, "rejected[0]", rej[0].Key, ks[5])
	equal(t, "rejected[1]", rej[1].Key, ks[1])
	equal(t, "rejected[0].Message", rej[0].Message, "m-5")
	equal(t, "rejected limit 1", len(must(b.st.LedgerList(ctx, "s1", store.LedgerRejected, 1))(t)), 1)
	doubt := must(b.st.LedgerList(ctx, "s1", store.LedgerInDoubt, 10))(t)
	equal(t, "in_doubt count", len(doubt), 1)
	equal(t, "in_doubt key", doubt[0].Key, ks[3])
	equal(t, "s2 in_doubt count", len(must(b.st.LedgerList(ctx, "s2", store.LedgerInDoubt, 10))(t)), 1)

	// A week later a replay confirms ks[0] (complete) and ks[5] (rejected)
	// of s1: touch moves their SeenAt only.
	b.clk.Advance(7 * 24 * time.Hour)
	touchAt := b.clk.Now()
	noErr(t, b.st.LedgerTouch(ctx, "s1", []string{ks[0], ks[5], "absent-key"}))
	got := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	sameTime(t, "touched SeenAt", got[ks[0]].SeenAt, touchAt)
	sameTime(t, "touched rejected SeenAt", got[ks[5]].SeenAt, touchAt)
	if got[ks[4]].SeenAt.Equal(touchAt) {
		t.Fatal("an untouched key's SeenAt moved")
	}
	if must(b.st.LedgerGet(ctx, "s2", ks[:1]))(t)[ks[0]].SeenAt.Equal(touchAt) {
		t.Fatal("touch moved another sync's key")
	}

	// Prune: rejected and in_doubt entries not seen since before go, of
	// every sync; complete (however old: a slot's last delivered state),
	// pending and recently seen entries stay.
	n := must(b.st.LedgerPrune(ctx, touchAt.Add(-time.Hour)))(t)
	equal(t, "pruned", n, int64(3)) // s1: ks1, ks3; s2: ks1
	left := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	for _, k := range []string{ks[0], ks[2], ks[4], ks[5]} {
		if _, ok := left[k]; !ok {
			t.Fatalf("prune deleted %s (state kept)", k)
		}
	}
	equal(t, "s1 entries left", len(left), 4)
	left2 := must(b.st.LedgerGet(ctx, "s2", ks))(t)
	equal(t, "s2 entries left", len(left2), 1)
	equal(t, "s2 remaining state", left2[ks[0]].State, store.LedgerComplete)
	equal(t, "prune again", must(b.st.LedgerPrune(ctx, touchAt.Add(-time.Hour)))(t), int64(0))
}

func testLedgerConcurrentClaims(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	fence := acquire(t, b, "s1", "tok", time.Hour).Fence
	const workers = 8
	shared := keys("c", 200)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := make(chan struct{})
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			own := keys(fmt.Sprintf("w%d-", i), 50)
			errs <- b.st.LedgerClaim(b.ctx, store.LedgerClaimParams{
				SyncID: "s1", Fence: fence, RunID: int64(i), Keys: append(append([]string{}, shared...), own...),
			})
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		noErr(t, err)
	}
	got := must(b.st.LedgerGet(b.ctx, "s1", shared))(t)
	equal(t, "shared entries", len(got), len(shared))
	for k, e := range got {
		if e.Attempts != workers {
			t.Fatalf("key %s: attempts %d, want %d (a claim was lost or torn)", k, e.Attempts, workers)
		}
	}
	for i := range workers {
		own := must(b.st.LedgerGet(b.ctx, "s1", keys(fmt.Sprintf("w%d-", i), 50)))(t)
		equal(t, fmt.Sprintf("worker %d entries", i), len(own), 50)
	}
}

// ---- audit ----

func testAudit(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx

	noErr(t, b.st.InsertAudit(ctx, store.AuditEntry{SyncID: "s1", Action: "circuit_breaker_tripped", By: "oncesync", Why: "5 failed runs"}))
	b.clk.Advance(time.Second)
	at := Start.Add(-time.Hour)
	noErr(t, b.st.InsertAudit(ctx, store.AuditEntry{At: at, SyncID: "s1", Action: "settle", By: "ann", Why: "checked in brevo"}))
	noErr(t, b.st.InsertAudit(ctx, store.AuditEntry{SyncID: "s2", Action: "pause", By: "bob"}))

	list := must(b.st.ListAudit(ctx, "s1", 0))(t)
	equal(t, "s1 entries", len(list), 2)
	equal(t, "newest first", list[0].Action, "settle")
	sameTime(t, "explicit At kept", list[0].At, at)
	equal(t, "By", list[0].By, "ann")
	equal(t, "Why", list[0].Why, "checked in brevo")
	equal(t, "SyncID", list[0].SyncID, "s1")
	equal(t, "oldest", list[1].Action, "circuit_breaker_tripped")
	sameTime(t, "zero At stamped now", list[1].At, Start)
	if list[0].ID <= list[1].ID {
		t.Fatalf("audit IDs not increasing: %d then %d", list[1].ID, list[0].ID)
	}
	equal(t, "limit 1", len(must(b.st.ListAudit(ctx, "s1", 1))(t)), 1)
	equal(t, "s2 entries", len(must(b.st.ListAudit(ctx, "s2", 0))(t)), 1)
}
