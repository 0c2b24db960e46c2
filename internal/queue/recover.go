package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
)

// recoverWorker works the recovery sweep.
type recoverWorker struct {
	river.WorkerDefaults[RecoverArgs]
	s *Service
}

// Work implements river.Worker.
func (w *recoverWorker) Work(ctx context.Context, _ *river.Job[RecoverArgs]) error {
	_, err := w.s.Recover(ctx)
	return err
}

// recoverLimit bounds the runs and jobs looked at by one sweep.
const recoverLimit = 1000

// detailRecovered is the stored detail of a run recovered after its worker died.
const detailRecovered = "its worker stopped without a checkpoint and its lease expired; lease-expiry recovery resumed the sync from the saved cursor"

// Recovered says what one sweep did.
type Recovered struct {
	// Runs are the runs marked interrupted.
	Runs []int64
	// Rescued are the River jobs of dead workers made available again.
	Rescued []int64
	// Enqueued are the syncs given a new recovery job (their dead run had no
	// job: a foreground `oncesync run`, or its job is already gone).
	Enqueued []string
}

// Recover is lease-expiry recovery (SPEC §6): it finds runs still running
// whose sync lease has expired or is gone (or, on this machine, is held by a
// dead process), marks them interrupted, and resumes their syncs at once from
// the saved cursor: the dead worker's job is made available again (River's
// own stuck-job rescue would wait RescueStuckJobsAfter), or a recovery job is
// queued when there is none. Runs younger than the lease TTL are left alone
// (they may be between recording the run and taking the lease).
func (s *Service) Recover(ctx context.Context) (Recovered, error) {
	var out Recovered
	now := s.clock.Now()
	grace := s.cfg.Settings.LeaseTTL
	runs, err := s.st.ListRunsByState(ctx, store.RunRunning, recoverLimit)
	if err != nil {
		return out, fmt.Errorf("recovery: list running runs: %w", err)
	}
	self := lease.ThisProcess()
	dead := map[string]bool{}
	var errs []error
	for _, r := range runs {
		if now.Sub(r.StartedAt) < grace {
			continue
		}
		if sc, ok := s.cfg.Sync(r.SyncID); ok && sc.Partitions > 1 {
			continue // a partitioned run holds no lease; its partitions do, and close it
		}
		l, err := s.inspector.LeaseGet(ctx, r.SyncID)
		live := false
		switch {
		case err == nil:
			live = l.ExpiresAt.After(now)
			if holder, ok := lease.ParseProcess(l.Holder); live && ok && self.SameMachine(holder) && !holder.Alive() {
				live = false
			}
		case errors.Is(err, store.ErrNotFound):
		default:
			errs = append(errs, fmt.Errorf("recovery: lease of sync %s: %w", r.SyncID, err))
			continue
		}
		if live && l.RunID == r.ID {
			continue // alive and well
		}
		// Re-read: the run may have finished since it was listed.
		cur, err := s.st.GetRun(ctx, r.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("recovery: run %d: %w", r.ID, err))
			continue
		}
		if cur.State != store.RunRunning {
			continue
		}
		cur.State = store.RunInterrupted
		cur.FailureCode = string(failure.Interrupted)
		cur.FailureDetail = detailRecovered
		if err := s.st.UpdateRun(ctx, cur); err != nil {
			errs = append(errs, fmt.Errorf("recovery: run %d: %w", r.ID, err))
			continue
		}
		s.metrics.recovered.Inc()
		out.Runs = append(out.Runs, r.ID)
		// The closed run is interrupted, not failed (a dead worker is not
		// the sync's fault, and its work resumes at once), so it never
		// lengthens a streak; the breaker is evaluated anyway: a worker that
		// died between recording a failed run and evaluating the breaker
		// left that evaluation undone, and this is where it happens.
		s.afterFailure(ctx, r.SyncID)
		s.log.Warn("run's worker is gone; resuming the sync", "sync", r.SyncID, "run", r.ID)
		if !live {
			dead[r.SyncID] = true
		}
	}
	jobs, err := s.b.running(ctx, KindRunSync, recoverLimit)
	if err != nil {
		return out, errors.Join(append(errs, fmt.Errorf("recovery: list running jobs: %w", err))...)
	}
	horizon := time.Now().Add(-grace) // River's times are wall-clock times
	rescued := map[string]bool{}
	for _, j := range jobs {
		a, ok := runArgs(j.Kind, nil, j.EncodedArgs)
		if !ok || j.AttemptedAt == nil || !j.AttemptedAt.Before(horizon) {
			continue
		}
		// A job still running whose sync has no live lease lost its worker:
		// mid-run (dead[...]), or after its run finished and before River
		// marked the job completed. Uniqueness per sync would block every
		// later schedule tick until River's own rescue a day later.
		if dead[a.SyncID] || !s.leaseLive(ctx, a.SyncID, now, self) {
			out.Rescued = append(out.Rescued, j.ID)
			rescued[a.SyncID] = true
		}
	}
	// A partition's runs are recorded under PartitionSyncID: its job is
	// rescued like a run's (it is not re-enqueued: it names no sync).
	parts, err := s.b.running(ctx, KindRunPartition, recoverLimit)
	if err != nil {
		errs = append(errs, fmt.Errorf("recovery: list running partition jobs: %w", err))
	}
	for _, j := range parts {
		var a RunPartitionArgs
		if json.Unmarshal(j.EncodedArgs, &a) != nil {
			continue
		}
		if id := PartitionSyncID(a.SyncID, a.Partition); dead[id] && j.AttemptedAt != nil && j.AttemptedAt.Before(horizon) {
			out.Rescued = append(out.Rescued, j.ID)
			rescued[id] = true
		}
	}
	if err := s.b.rescue(ctx, out.Rescued, horizon, "lease-expiry recovery: the worker died mid-run; resumed from the saved cursor"); err != nil {
		errs = append(errs, fmt.Errorf("recovery: rescue jobs: %w", err))
		out.Rescued = nil
		clear(rescued)
	}
	for syncID := range dead {
		if rescued[syncID] {
			continue
		}
		if _, ok := s.cfg.Sync(syncID); !ok {
			continue // not ours to run (another config's sync)
		}
		if _, err := s.Enqueue(ctx, syncID, ReasonRecovery); err != nil {
			errs = append(errs, fmt.Errorf("recovery: enqueue sync %s: %w", syncID, err))
			continue
		}
		out.Enqueued = append(out.Enqueued, syncID)
	}
	return out, errors.Join(errs...)
}

// leaseLive reports whether someone alive holds the sync's lease; when the
// lease cannot be read it answers true (when unsure, do nothing).
func (s *Service) leaseLive(ctx context.Context, syncID string, now time.Time, self lease.Process) bool {
	l, err := s.inspector.LeaseGet(ctx, syncID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		return true
	}
	if !l.ExpiresAt.After(now) {
		return false
	}
	if holder, ok := lease.ParseProcess(l.Holder); ok && self.SameMachine(holder) && !holder.Alive() {
		return false
	}
	return true
}
