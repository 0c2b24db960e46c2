package cli

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// TestRunsShowPartitionFiguresSoFar: `oncesync runs` of a partitioned sync
// showed its running run's figures as 0 until the run ended (its
// partitions' runs hold them); they are the partitions' so far.
func TestRunsShowPartitionFiguresSoFar(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	old, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: "split", State: store.RunSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	// An earlier run's partition run: not this run's.
	if _, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: partition.SyncID("split", 1), State: store.RunSucceeded}); err != nil {
		t.Fatal(err)
	}
	coord, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: "split", State: store.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	for k, read := range map[int]int64{1: 500, 2: 250} {
		r, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: partition.SyncID("split", k), State: store.RunRunning})
		if err != nil {
			t.Fatal(err)
		}
		r.Read, r.Written = read, read-10
		if err := st.UpdateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.ListRuns(ctx, "split", 10)
	if err != nil {
		t.Fatal(err)
	}
	runs, err = partition.SoFar(ctx, st, runs, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		switch r.ID {
		case coord.ID:
			if r.Read != 750 || r.Written != 730 {
				t.Errorf("the running run shows read %d, written %d; want its partitions' 750 and 730", r.Read, r.Written)
			}
		case old.ID:
			if r.Read != 0 {
				t.Errorf("a finished run's figures changed: read %d", r.Read)
			}
		}
	}
}
