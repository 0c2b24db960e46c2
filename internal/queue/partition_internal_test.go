package queue

import (
	"path/filepath"
	"testing"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// TestPartitionTotals: a partitioned run's counters are the sum of every
// partition run since it began, including an attempt that failed after
// writing pages and the retry that wrote the rest; a partition whose newest
// run has not succeeded leaves the run open.
func TestPartitionTotals(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: filepath.Join(t.TempDir(), "oncesync.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	add := func(syncID string, state store.RunState, c store.Counters) store.Run {
		t.Helper()
		r, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: syncID, State: store.RunRunning})
		if err != nil {
			t.Fatal(err)
		}
		r.State, r.Counters = state, c
		if err := st.UpdateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// A run of partition 1 before the coordinated run does not count.
	add(PartitionSyncID("s", 1), store.RunSucceeded, store.Counters{Read: 99, Written: 99})
	coord := add("s", store.RunRunning, store.Counters{})
	args := RunPartitionArgs{SyncID: "s", RunID: coord.ID, Partitions: 2}

	add(PartitionSyncID("s", 1), store.RunSucceeded, store.Counters{Read: 50, Written: 50})
	add(PartitionSyncID("s", 2), store.RunFailed, store.Counters{Read: 30, Written: 30})
	if _, done, err := partitionTotals(ctx, st, args); err != nil || done {
		t.Fatalf("partition 2's newest run failed: done %v, %v", done, err)
	}
	add(PartitionSyncID("s", 2), store.RunSucceeded, store.Counters{Read: 20, Written: 20})
	total, done, err := partitionTotals(ctx, st, args)
	if err != nil || !done {
		t.Fatalf("done %v, %v", done, err)
	}
	if total.Read != 100 || total.Written != 100 {
		t.Fatalf("totals read %d written %d, want 100 and 100", total.Read, total.Written)
	}
}
