package queue

import (
	"context"

	"github.com/oncesync/oncesync/internal/store"
)

// runEnded tells the heartbeat URL of run's sync (docs/guide.md#telling-silence-from-outside) how the run
// ended: every path that records the end of a run of a configured sync
// calls it once (a worked run, a run recorded as failed before it could
// start, a partitioned run's coordinated end). Heartbeats go out in the
// background and never change the run's outcome; runs of a partition
// (partition.SyncID) are no configured sync's and send none.
func (s *Service) runEnded(ctx context.Context, run store.Run) {
	if s.heartbeats == nil || run.ID == 0 {
		return
	}
	sc, ok := s.cfg.Sync(run.SyncID)
	if !ok || sc.HeartbeatURL == "" {
		return
	}
	s.heartbeats.Beat(ctx, sc.ID, sc.HeartbeatURL, run)
}
