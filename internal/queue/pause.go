package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// PauseCheck is how often a worker looks whether the sync of a run it is
// working was paused (docs/guide.md#running-on-a-schedule-serve-and-worker):
// one read of the sync's row per running job and interval.
const PauseCheck = 2 * time.Second

// pauseWatch is the drain of one run: closed at SIGTERM's drain (the
// service's) or once the run's sync is found paused, so that a pause stops
// a run in flight at its next page boundary, as SIGTERM does, instead of
// letting it write until its end.
type pauseWatch struct {
	drain chan struct{}
	stopc chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	paused *store.Sync
}

// watchPause starts the pause watch of a run of syncID; stop it when the run
// ended.
func (s *Service) watchPause(ctx context.Context, syncID string) *pauseWatch {
	w := &pauseWatch{drain: make(chan struct{}), stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			tick := make(chan struct{})
			t := clock.AfterFunc(s.clock, PauseCheck, func() { close(tick) })
			select {
			case <-s.drain:
				t.Stop()
				close(w.drain)
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-w.stopc:
				t.Stop()
				return
			case <-tick:
			}
			row, err := s.st.GetSync(ctx, syncID)
			if err == nil && row.State == store.SyncPaused {
				w.mu.Lock()
				w.paused = &row
				w.mu.Unlock()
				s.log.Info("sync paused during a run; the run stops at its next page boundary", "sync", syncID, "paused_by", row.PauseReason)
				close(w.drain)
				return
			}
		}
	}()
	return w
}

// stop ends the watch and waits for it.
func (w *pauseWatch) stop() {
	close(w.stopc)
	<-w.done
}

// pausedRow is the sync's row if the watch stopped the run for a pause.
func (w *pauseWatch) pausedRow() *store.Sync {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused
}

// pausedDetail is the detail of a run stopped (or a partitioned run closed)
// because its sync was paused.
func pausedDetail(row store.Sync) string {
	who := row.PauseReason
	if row.PausedBy != "" {
		who += " by " + row.PausedBy
	}
	if row.PausedWhy != "" {
		who += ": " + row.PausedWhy
	}
	return fmt.Sprintf("the sync was paused (%s) during the run, which stopped at a page boundary; resume the sync and its next run goes on from the checkpoint", who)
}

// detail is runner.Params.DrainDetail: why the watch stopped the run, ""
// when it did not or the drain was SIGTERM's.
func (w *pauseWatch) detail() string {
	if row := w.pausedRow(); row != nil {
		return pausedDetail(*row)
	}
	return ""
}
