package partition_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// TestTotals: a partitioned run's counters are the sum of every
// partition run since it began, including an attempt that failed after
// writing pages and the retry that wrote the rest; a partition whose newest
// run has not succeeded leaves the run open.
func TestTotals(t *testing.T) {
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
	add(partition.SyncID("s", 1), store.RunSucceeded, store.Counters{Read: 99, Written: 99})
	coord := add("s", store.RunRunning, store.Counters{})

	add(partition.SyncID("s", 1), store.RunSucceeded, store.Counters{Read: 50, Written: 50})
	add(partition.SyncID("s", 2), store.RunFailed, store.Counters{Read: 30, Written: 30})
	if _, done, err := partition.Totals(ctx, st, "s", coord.ID, 2); err != nil || done {
		t.Fatalf("partition 2's newest run failed: done %v, %v", done, err)
	}
	// The figures of a coordinated run that ends now (failed) are all its
	// partitions' runs', whatever they ended as.
	if sum, err := partition.Sum(ctx, st, "s", coord.ID, 2); err != nil || sum.Written != 80 {
		t.Fatalf("Sum: written %d, %v; want 80", sum.Written, err)
	}
	add(partition.SyncID("s", 2), store.RunSucceeded, store.Counters{Read: 20, Written: 20})
	total, done, err := partition.Totals(ctx, st, "s", coord.ID, 2)
	if err != nil || !done {
		t.Fatalf("done %v, %v", done, err)
	}
	if total.Read != 100 || total.Written != 100 {
		t.Fatalf("totals read %d written %d, want 100 and 100", total.Read, total.Written)
	}
	// A second job of partition 2 (queued by a recovery while the first
	// ran) met its lease and was skipped: newer than the success, it does
	// not hide it (the run ended partitions_unfinished with every record
	// written).
	add(partition.SyncID("s", 2), store.RunSkipped, store.Counters{})
	if total, done, err = partition.Totals(ctx, st, "s", coord.ID, 2); err != nil || !done || total.Written != 100 {
		t.Fatalf("after a skipped run: done %v, written %d, %v", done, total.Written, err)
	}
}

// TestOf: the split is a pure function of the identity text, every
// id lands in 1..n, and the rows spread evenly.
func TestOf(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 4, 7, 64} {
		counts := make([]int, n+1)
		for i := range 20000 {
			id := fmt.Sprint(i)
			k := partition.Of(id, n)
			if k < 1 || k > n || k != partition.Of(id, n) {
				t.Fatalf("Of(%q, %d) = %d", id, n, k)
			}
			counts[k]++
		}
		for k := 1; k <= n; k++ {
			if want := 20000 / n; counts[k] < want*8/10 || counts[k] > want*12/10 {
				t.Fatalf("n=%d: partition %d got %d of 20000", n, k, counts[k])
			}
		}
	}
	if partition.SyncID("s1", 3) != "s1#p3" {
		t.Fatal(partition.SyncID("s1", 3))
	}
}

// TestParent: a partition's id names its sync; other ids are their own.
func TestParent(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		partition.SyncID("crm", 3): "crm", "crm": "crm", "a#pb": "a#pb", "#p1": "#p1",
	} {
		if got := partition.Parent(in); got != want {
			t.Errorf("Parent(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIDs: a sync's own id, then its partitions'.
func TestIDs(t *testing.T) {
	t.Parallel()
	if got := fmt.Sprint(partition.IDs("s", 3)); got != "[s s#p1 s#p2 s#p3]" {
		t.Errorf("IDs(s, 3) = %s", got)
	}
	for _, n := range []int{0, 1} {
		if got := fmt.Sprint(partition.IDs("s", n)); got != "[s]" {
			t.Errorf("IDs(s, %d) = %s", n, got)
		}
	}
}
