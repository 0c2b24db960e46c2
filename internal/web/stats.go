package web

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/store"
)

// SyncStats are the figures the overview shows for one sync.
type SyncStats struct {
	Sync store.Sync
	// LastRun is the newest run (zero ID: none).
	LastRun store.Run
	// LastSuccessAt is when the latest succeeded run finished (zero: none
	// within the runs looked at), as `oncesync status`, the dead-man check
	// and oncesync_sync_last_success_timestamp_seconds have it.
	LastSuccessAt time.Time
	// LastFailure is the newest failed run (zero ID: none within the window).
	LastFailure store.Run
	// FailureStreak is the circuit breaker's streak (breaker.Compute):
	// failures owned by the sync's owner since its last success and its
	// changed_at. OperatorFailures are the operator's failures in that span,
	// which the breaker does not count (docs/guide.md#guardrails).
	FailureStreak    int
	OperatorFailures int
	// Running: a run of the sync is running now.
	Running bool
}

// StatsSource answers the overview's figures for every sync in one call. A
// store that can answer them in one query may implement it; StoreStats does
// it with existing store methods.
type StatsSource interface {
	SyncStats(ctx context.Context) ([]SyncStats, error)
}

// StoreStats reads the figures with ListSyncs and ListRuns per sync (a few
// concurrent readers). Window is how many runs per sync are read (default
// 50): a last success or streak older than that is not seen.
type StoreStats struct {
	Store       store.Store
	Window      int
	Concurrency int
}

// SyncStats implements StatsSource.
func (st StoreStats) SyncStats(ctx context.Context) ([]SyncStats, error) {
	syncs, err := st.Store.ListSyncs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list syncs: %w", err)
	}
	window := st.Window
	if window <= 0 {
		window = 50
	}
	workers := st.Concurrency
	if workers <= 0 {
		workers = 4
	}
	out := make([]SyncStats, len(syncs))
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		errMu sync.Mutex
		first error
	)
	for range min(workers, len(syncs)) {
		wg.Go(func() {
			for i := range next {
				runs, err := st.Store.ListRuns(ctx, syncs[i].ID, window)
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = fmt.Errorf("list runs of %s: %w", syncs[i].ID, err)
					}
					errMu.Unlock()
					continue
				}
				out[i] = statsFromRuns(syncs[i], runs)
			}
		})
	}
	for i := range syncs {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// statsFromRuns computes a sync's figures from its runs, newest first.
func statsFromRuns(s store.Sync, runs []store.Run) SyncStats {
	out := SyncStats{Sync: s}
	out.LastRun, _ = store.NewestRan(runs)
	k := breaker.Compute(s, runs) // the streak the breaker and `oncesync status` see
	out.FailureStreak, out.OperatorFailures = k.Failures, k.Operator
	for _, r := range runs {
		switch r.State {
		case store.RunRunning:
			out.Running = true
		case store.RunSucceeded:
			if out.LastSuccessAt.IsZero() {
				out.LastSuccessAt = r.FinishedAt
				if out.LastSuccessAt.IsZero() {
					out.LastSuccessAt = r.StartedAt
				}
			}
		case store.RunFailed:
			if out.LastFailure.ID == 0 {
				out.LastFailure = r
			}
		}
		if !out.LastSuccessAt.IsZero() && out.LastFailure.ID != 0 {
			break
		}
	}
	return out
}

// Failing reports whether failures of either owner followed the last
// success (the overview's "failing").
func (st SyncStats) Failing() bool { return st.FailureStreak > 0 || st.OperatorFailures > 0 }

// sortStats orders by workspace, then sync id.
func sortStats(ss []SyncStats) {
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].Sync.Workspace != ss[j].Sync.Workspace {
			return ss[i].Sync.Workspace < ss[j].Sync.Workspace
		}
		return ss[i].Sync.ID < ss[j].Sync.ID
	})
}
