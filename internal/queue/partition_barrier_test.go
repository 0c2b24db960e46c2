package queue_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

// TestPartitionedBarrierLostMidRun: the run's barrier vanishes from Redis
// part-way (as in a Redis restart without persistence, issue 6). The
// partitions restore it from the coordinator's pin their jobs carry, the
// source being unchanged, and the run completes: every row once, no dead
// letter. Before, every partition was dead-lettered source_changed_during_run
// though nothing had changed.
func TestPartitionedBarrierLostMidRun(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(testRedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { _ = rc.Close() })
	var (
		b       *partitionBundle
		writes  atomic.Int64
		dropped atomic.Int64 // the barrier's run id once deleted
	)
	b = setupPartitioned(t, func(*http.Request) {
		if writes.Add(1) != 5 {
			return
		}
		// Synchronous: no partition writes again before the key is gone.
		runs, err := b.st.ListRuns(context.Background(), b.syncID, 1)
		if err != nil || len(runs) == 0 {
			t.Errorf("the coordinated run: %v %v", runs, err)
			return
		}
		n, err := rc.Del(context.Background(), rediskey.Default().Barrier(b.syncID, runs[0].ID)).Result()
		if err != nil || n != 1 {
			t.Errorf("delete the barrier: %d, %v", n, err)
			return
		}
		dropped.Store(runs[0].ID)
	})
	fin := b.run(t)
	if dropped.Load() != fin.ID {
		t.Fatalf("the barrier of run %d was not deleted mid-run (deleted: %d)", fin.ID, dropped.Load())
	}
	if fin.State != store.RunSucceeded || fin.Written != partitionRows {
		t.Fatalf("run: %+v", fin)
	}
	st := b.fake.Stats()
	if st.Contacts != partitionRows || st.ContactsWritten != partitionRows || st.DuplicateWrites != 0 {
		t.Fatalf("fake: want %d contacts written once; got %+v", partitionRows, st)
	}
	if dl, err := b.st.(barrier.DeadLetters).ListDeadLetters(t.Context(), barrier.ListDeadLettersParams{SyncID: b.syncID}); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters %+v, %v", dl, err)
	}
	// The last partition releases the restored barrier, right after it
	// recorded the run succeeded (completeIfDone).
	waitFor(t, 10*time.Second, "the restored barrier to be released", func() bool {
		return rc.Exists(t.Context(), rediskey.Default().Barrier(b.syncID, fin.ID)).Val() == 0
	})
}
