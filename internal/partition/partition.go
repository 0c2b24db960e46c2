// Package partition is what a partitioned sync is made of, apart from the
// jobs that run it (internal/queue): the id each partition keeps its lease,
// cursor, ledger and runs under, the split of records between partitions,
// the source snapshot a run pins in its checkpoint barrier, and the run's
// counters summed from its partitions' runs
// (docs/guide.md#the-checkpoint-barrier).
package partition

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// BarrierTTL is the TTL of a partitioned run's barrier. Nobody renews it
// while the partitions work, so it outlasts any run; the last partition
// releases it.
const BarrierTTL = 24 * time.Hour

// SyncID is the id under which partition k (1-based) of syncID keeps its
// lease, fence, cursor, ledger and runs: "<sync>#p<k>". Sync ids never hold
// "#", so it names no configured sync.
func SyncID(syncID string, k int) string {
	return syncID + "#p" + strconv.Itoa(k)
}

// IDs are the ids a sync of n partitions keeps ledger entries under: its
// own, then each partition's (n <= 1: its own only).
func IDs(syncID string, n int) []string {
	ids := []string{syncID}
	for k := 1; n > 1 && k <= n; k++ {
		ids = append(ids, SyncID(syncID, k))
	}
	return ids
}

// Parent is the sync a partition's id belongs to (SyncID's inverse); any
// other id is its own.
func Parent(id string) string {
	if i := strings.LastIndex(id, "#p"); i > 0 {
		if _, err := strconv.Atoi(id[i+2:]); err == nil {
			return id[:i]
		}
	}
	return id
}

// Of returns the partition (1-based, of n) of a record whose identity is
// id: FNV-1a 64 of the identity text, mod n. It depends on nothing but its
// arguments, so every worker splits the rows alike.
func Of(id string, n int) int {
	if n <= 1 {
		return 1
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, id)
	return int(h.Sum64()%uint64(n)) + 1
}

// Filter keeps the records of partition k of n, by the identity column. A
// row without identity is kept by partition 1, whose run then fails on it
// like an unpartitioned run would.
func Filter(identity string, k, n int) func(source.Record) bool {
	return func(rec source.Record) bool {
		id, err := mapping.Identity(rec, identity)
		return Of(id, n) == k || err != nil && k == 1
	}
}

// Snapshot is the snapshot a partitioned run pins: the hash of what the
// source's Snapshot says of its data (a file's SHA-256, a version query's
// result) and its ID, read within limit (the sync's source.timeout: a
// version query waiting on a lock fails instead of holding the run). Errors
// carry a failure code.
func Snapshot(ctx context.Context, sourceType string, src source.Source, limit time.Duration) (string, error) {
	sn, ok := src.(source.Snapshotter)
	if !ok {
		return "", failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("source type %s cannot be partitioned: it has no snapshot", sourceType))
	}
	var inputs map[string]any
	err := source.ReadWithin(ctx, clock.Real{}, limit, src.ID(), "read the source's version", func(ctx context.Context) (err error) {
		inputs, err = sn.Snapshot(ctx)
		return err
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return "", failure.Wrap(failure.Interrupted, err, "stopped while taking the source snapshot")
	case errors.Is(err, source.ErrAuth):
		return "", failure.Wrap(failure.SourceAuth, err, "the source refused the credentials while taking its snapshot")
	case errors.Is(err, source.ErrInvalid):
		return "", failure.Wrap(failure.SourceQueryInvalid, err, "the source's version query failed")
	case err != nil:
		return "", failure.Wrap(failure.SourceUnavailable, err, "could not read the source to take its snapshot")
	}
	inputs["source"] = src.ID()
	snap, err := barrier.Snapshot(inputs)
	if err != nil {
		return "", failure.Wrap(failure.Internal, err, "hash the source snapshot")
	}
	return snap, nil
}

// runsListed bounds the partition runs Totals reads: a partition job has
// at most a handful of attempts, each one run.
const runsListed = 100

// Newest is the newest of runs (newest first) that did something: a run
// skipped because another one held the partition's lease (a second job of
// the partition, queued by a recovery while the first ran) is newer than
// the run it met, and must not hide how that one ended. ok is false when
// there is none.
func Newest(runs []store.Run) (store.Run, bool) {
	r, ok := store.NewestRan(runs)
	return r, ok && r.State != store.RunSkipped
}

// Runs is the part of the store Totals reads.
type Runs interface {
	ListRuns(ctx context.Context, syncID string, limit int) ([]store.Run, error)
}

// Totals sums the counters of every run of the n partitions of syncID
// started since the coordinated run runID, and reports whether each
// partition's newest run succeeded. Every run counts, not only the newest:
// a partition attempt that failed after writing pages (a lost lease, a
// store timeout) is followed by one that resumes at its cursor and writes
// only the rest.
func Totals(ctx context.Context, st Runs, syncID string, runID int64, n int) (store.Counters, bool, error) {
	return sum(ctx, st, syncID, runID, n, true)
}

// Sum is Totals whatever the partitions' runs ended as: the figures of a
// coordinated run that failed or was stopped, whose partitions wrote pages
// before it ended.
func Sum(ctx context.Context, st Runs, syncID string, runID int64, n int) (store.Counters, error) {
	total, _, err := sum(ctx, st, syncID, runID, n, false)
	return total, err
}

// SoFar gives each running coordinated run of runs (a sync of n
// partitions' runs) the figures its partitions' runs have checkpointed so
// far (Sum): a coordinated run's own are written at its end, and showed 0
// until then.
func SoFar(ctx context.Context, st Runs, runs []store.Run, n int) ([]store.Run, error) {
	for i, r := range runs {
		if n <= 1 || r.State != store.RunRunning {
			continue
		}
		c, err := Sum(ctx, st, r.SyncID, r.ID, n)
		if err != nil {
			return nil, err
		}
		runs[i].Counters = c
	}
	return runs, nil
}

func sum(ctx context.Context, st Runs, syncID string, runID int64, n int, onlyDone bool) (store.Counters, bool, error) {
	var total store.Counters
	for k := 1; k <= n; k++ {
		runs, err := st.ListRuns(ctx, SyncID(syncID, k), runsListed)
		if err != nil {
			return store.Counters{}, false, err
		}
		if last, ok := Newest(runs); onlyDone && (!ok || last.ID < runID || last.State != store.RunSucceeded) {
			return store.Counters{}, false, nil
		}
		for _, r := range runs { // newest first
			if r.ID < runID {
				break
			}
			total.Add(r.Counters)
		}
	}
	return total, true, nil
}
