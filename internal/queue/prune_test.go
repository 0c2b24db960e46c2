package queue

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/store"
)

// Finding 7 of issue 13: nothing called Store.LedgerPrune, so the ledger
// grew without bound.

// ledgerEntry records one finished ledger entry of syncID at the store's
// (fake) time.
func (b *bundle) ledgerEntry(t *testing.T, syncID, key string, state store.LedgerState) {
	t.Helper()
	if err := b.st.RaiseFence(b.ctx, syncID, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.st.LedgerClaim(b.ctx, store.LedgerClaimParams{SyncID: syncID, Fence: 1, RunID: 1, Keys: []string{key}}); err != nil {
		t.Fatal(err)
	}
	fin := store.LedgerFinish{Key: key, State: state, Result: "ref", Message: "refused"}
	if err := b.st.LedgerFinish(b.ctx, store.LedgerFinishParams{SyncID: syncID, Fence: 1, RunID: 1, Entries: []store.LedgerFinish{fin}}); err != nil {
		t.Fatal(err)
	}
}

// runPages records a finished run of syncID with n pages checkpointed at the
// store's (fake) time, and returns its id.
func (b *bundle) runPages(t *testing.T, syncID string, n int) int64 {
	t.Helper()
	r, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: syncID, State: store.RunSucceeded, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.st.RecordRunPage(b.ctx, store.RunPage{RunID: r.ID, Page: int64(i + 1), Read: 1, Sent: 1, Requests: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return r.ID
}

// ledgerHas reports whether syncID's ledger holds key.
func (b *bundle) ledgerHas(t *testing.T, syncID, key string) bool {
	t.Helper()
	got, err := b.st.LedgerGet(b.ctx, syncID, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	_, ok := got[key]
	return ok
}

// key is a delivery key (hex SHA-256 shaped) made of one repeated digit.
func key(c byte) string {
	k := make([]byte, 64)
	for i := range k {
		k[i] = c
	}
	return string(k)
}

// TestPruneLedger: the prune cuts at now minus the longest retention in
// use (sync b's 48 h override over the deployment's 1 h, which a and
// broken keep), removes the rejected entries older than that, keeps the
// fresher ones and every complete entry, and says what it did.
func TestPruneLedger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Syncs[1].LedgerRetention = 48 * time.Hour
	start := b.clk.Now()

	b.ledgerEntry(t, "a", key('1'), store.LedgerRejected) // 49 h old at the prune
	b.ledgerEntry(t, "b", key('2'), store.LedgerRejected) // 49 h old
	oldRun := b.runPages(t, "a", 3)                       // 49 h old
	b.clk.Advance(47 * time.Hour)
	newRun := b.runPages(t, "a", 2)                       // 2 h old
	b.ledgerEntry(t, "a", key('3'), store.LedgerRejected) // 2 h old: past a's own 1 h, within the 48 h applied
	b.ledgerEntry(t, "a", key('4'), store.LedgerComplete)
	b.clk.Advance(2 * time.Hour)
	b.ledgerEntry(t, "a", key('5'), store.LedgerRejected) // fresh
	b.ledgerEntry(t, "b", key('6'), store.LedgerComplete)

	got, err := b.svc.PruneLedger(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Retention != 48*time.Hour || !got.Before.Equal(start.Add(time.Hour)) || got.Entries != 2 || got.RunPages != 3 ||
		!slices.Equal(got.Shorter, []string{"a", "broken"}) {
		t.Fatalf("PruneLedger = %+v, want 2 entries and 3 run pages cut at %s with 48h (a and broken kept longer)", got, start.Add(time.Hour))
	}
	for _, r := range []struct {
		id    int64
		pages int
	}{{oldRun, 0}, {newRun, 2}} {
		if ps, err := b.st.ListRunPages(b.ctx, r.id, 0); err != nil || len(ps) != r.pages {
			t.Errorf("run %d after the prune: %d pages (%v), want %d", r.id, len(ps), err, r.pages)
		}
	}
	for _, e := range []struct {
		sync string
		key  string
		kept bool
	}{
		{"a", key('1'), false}, {"b", key('2'), false},
		{"a", key('3'), true}, {"a", key('4'), true}, {"a", key('5'), true}, {"b", key('6'), true},
	} {
		if has := b.ledgerHas(t, e.sync, e.key); has != e.kept {
			t.Errorf("entry %.8s of %s: kept %v, want %v", e.key, e.sync, has, e.kept)
		}
	}
	if v := counterValue(t, b.svc.metrics.pruned); v != 2 {
		t.Fatalf("oncesync_ledger_pruned_total = %v, want 2", v)
	}
	var m dto.Metric
	if err := b.svc.metrics.prunedAt.Write(&m); err != nil || m.GetGauge().GetValue() != float64(b.clk.Now().Unix()) {
		t.Fatalf("last prune at %v (%v), want %d", m.GetGauge().GetValue(), err, b.clk.Now().Unix())
	}
}

// TestPruneRuns: a sync on a short schedule adds a run every tick; the
// prune removes the runs that ended before the cut beyond the sync's
// store.KeepRunsPerSync newest, where they used to be kept for good (a
// soak of 14 syncs @every 5-10s added 107 runs a minute, 154,000 a day).
func TestPruneRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Settings.LedgerRetention = time.Hour
	old := make([]int64, store.KeepRunsPerSync+10)
	for i := range old {
		old[i] = b.runPages(t, "a", 0)
	}
	b.clk.Advance(2 * time.Hour)
	young := b.runPages(t, "a", 0)
	got, err := b.svc.PruneLedger(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Runs != 11 {
		t.Fatalf("PruneLedger removed %d runs, want the 11 beyond the newest %d", got.Runs, store.KeepRunsPerSync)
	}
	runs, err := b.st.ListRuns(b.ctx, "a", 0)
	if err != nil || len(runs) != store.KeepRunsPerSync || runs[0].ID != young || runs[len(runs)-1].ID != old[11] {
		t.Fatalf("runs of a after the prune: %d (%v), want the newest %d", len(runs), err, store.KeepRunsPerSync)
	}
}

// TestLedgerPruneJob: the leader queues the prune when it starts (and at
// minute 43 of every hour); a worker works it.
func TestLedgerPruneJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ledgerEntry(t, "a", key('1'), store.LedgerRejected)
	b.clk.Advance(2 * time.Hour) // past the 1 h retention
	b.ledgerEntry(t, "a", key('2'), store.LedgerRejected)

	if err := b.svc.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = b.svc.Shutdown(ctx)
	})
	rb := b.svc.b.(*riverBackend[*sql.Tx])
	eventually(t, 30*time.Second, "the prune job to complete", func() bool {
		res, err := rb.client.JobList(b.ctx, river.NewJobListParams().Kinds(KindPruneLedger).States(rivertype.JobStateCompleted))
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Jobs) == 1
	})
	if b.ledgerHas(t, "a", key('1')) || !b.ledgerHas(t, "a", key('2')) {
		t.Fatal("after the prune job: want the old rejected entry gone and the fresh one kept")
	}
}
