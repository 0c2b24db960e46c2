package queue

import (
	"context"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// runEnded tells the heartbeat URL of run's sync (docs/guide.md#telling-silence-from-outside) how the run
// ended, and ends the dead-man silences a success ends: every path that
// records the end of a run of a configured sync
// calls it once (a worked run, a run recorded as failed before it could
// start, a partitioned run's coordinated end). Heartbeats go out in the
// background and never change the run's outcome; runs of a partition
// (partition.SyncID) are no configured sync's and send none.
func (s *Service) runEnded(ctx context.Context, run store.Run) {
	sc, ok := s.cfg.Sync(run.SyncID)
	if run.ID == 0 || !ok {
		return
	}
	if run.State == store.RunSucceeded && s.deadman != nil {
		// The silences this success ends get their resolution notices now,
		// not at the next hourly check.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := s.deadman.Resolve(rctx, sc.ID, sc.Workspace, run.FinishedAt); err != nil {
			s.log.Warn("could not end the sync's dead-man silence; the next check does", "sync", sc.ID, "err", err)
		}
		cancel()
	}
	if s.heartbeats != nil && sc.HeartbeatURL != "" {
		s.heartbeats.Beat(ctx, sc.ID, sc.HeartbeatURL, run)
	}
}
