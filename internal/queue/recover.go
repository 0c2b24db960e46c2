package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// recoverWorker works the recovery sweep.
type recoverWorker struct {
	river.WorkerDefaults[RecoverArgs]
	s *Service
}

// Work implements river.Worker.
func (w *recoverWorker) Work(ctx context.Context, _ *river.Job[RecoverArgs]) error {
	return w.s.sweep(ctx)
}

// expiryMargin is how long after a lease's expiry (on the lease store's
// clock) a sweep aimed at it runs: clocks of one deployment differ by a
// few milliseconds, and a sweep that comes early finds the lease live.
const expiryMargin = 250 * time.Millisecond

// sweep is one recovery sweep (Recover). When a run's lease is held, not
// renewed, and expires before the next periodic sweep would come (with a
// second to spare), it sweeps again right after that expiry: a worker that
// died on another machine, whose death only its lease's expiry tells, costs
// its lease's rest and not up to one more RecoveryInterval
// (docs/RELIABILITY.md#resume-after-a-kill).
func (s *Service) sweep(ctx context.Context) error {
	out, err := s.Recover(ctx)
	if err != nil || out.NextExpiry.IsZero() {
		return err
	}
	wait := out.NextExpiry.Sub(s.clock.Now()) + expiryMargin
	if wait >= s.recovery-time.Second {
		return nil // the periodic sweep comes first
	}
	fired := make(chan struct{})
	t := clock.AfterFunc(s.clock, max(wait, 0), func() { close(fired) })
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil // stopping: the next leader's sweep sees it
	case <-fired:
	}
	_, err = s.Recover(ctx)
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
	// Unfinished are runs of partitioned syncs closed failed
	// (partitions_unfinished): no partition job was left to finish them.
	Unfinished []int64
	// Completed are runs of partitioned syncs closed succeeded: every
	// partition had succeeded, but the last one could not record it.
	Completed []int64
	// NextExpiry is the earliest expiry (on the lease store's clock) of a
	// live lease that a running run holds: when it is not renewed, that run
	// is resumed by the first sweep after it (zero when none).
	NextExpiry time.Time
}

// noteExpiry keeps at, a live lease's expiry, if it is the earliest yet.
func (r *Recovered) noteExpiry(at time.Time) {
	if !at.IsZero() && (r.NextExpiry.IsZero() || at.Before(r.NextExpiry)) {
		r.NextExpiry = at
	}
}

// Recover is lease-expiry recovery (docs/guide.md#running-on-a-schedule-serve-and-worker): it finds runs still running
// whose sync lease has expired or is gone (or, on this machine, is held by a
// dead process), marks them interrupted, and resumes their syncs at once from
// the saved cursor: the dead worker's job is made available again (River's
// own stuck-job rescue would wait RescueStuckJobsAfter), or a recovery job is
// queued when there is none. Runs younger than the lease TTL are left alone
// (they may be between recording the run and taking the lease). The same
// rule covers jobs of every kind, runs, coordinators and partitions: one
// running for longer than the lease TTL with no live lease, neither its
// heartbeat (heartbeat.go) nor its run's, is made available again, so a
// coordinator resumes its run and a partition job re-runs its partition.
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
	var coordinated []store.Run
	// diedHere are the syncs whose young run was found dead by its own
	// lease: their jobs are rescued below without waiting for the grace
	// either.
	diedHere := map[string]bool{}
	for _, r := range runs {
		l, err := s.inspector.LeaseGet(ctx, r.SyncID)
		if now.Sub(r.StartedAt) < grace {
			// The age rule waits out a run that may not have taken its
			// lease yet; one whose own lease a dead process of this
			// machine holds (lease.DeadHere) took it and died, and costs a
			// sweep, not a lease TTL (docs/RELIABILITY.md#resume-after-a-kill).
			if err != nil || l.RunID != r.ID || !lease.DeadHere(l.Holder, self) {
				if err == nil && l.RunID == r.ID && l.ExpiresAt.After(now) {
					// Its lease ends after its TTL of age: unless renewed,
					// it is old and dead then.
					out.noteExpiry(l.ExpiresAt)
				}
				continue
			}
			diedHere[r.SyncID] = true
		}
		if sc, ok := s.cfg.Sync(r.SyncID); ok && sc.Partitions > 1 {
			// A partitioned run holds no lease; its partitions do, and
			// close it; sweepCoordinated closes it when none is left. A run
			// holding the sync's own lease is a foreground `oncesync run`,
			// which works a partitioned sync unpartitioned: recovered below
			// like any run.
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				errs = append(errs, fmt.Errorf("recovery: lease of sync %s: %w", r.SyncID, err))
				continue
			}
			if err != nil || l.RunID != r.ID {
				coordinated = append(coordinated, r)
				continue
			}
		}
		live := false
		switch {
		case err == nil:
			live = lease.Live(l, now, self)
		case errors.Is(err, store.ErrNotFound):
		case errors.Is(err, lease.ErrQuarantined):
			// The lease store lost its data less than a TTL ago (docs/guide.md#the-store-and-the-leases):
			// the run's worker may still be writing. Neither live nor dead
			// until the quarantine ends; a later sweep decides.
			continue
		default:
			errs = append(errs, fmt.Errorf("recovery: lease of sync %s: %w", r.SyncID, err))
			continue
		}
		if live && l.RunID == r.ID {
			out.noteExpiry(l.ExpiresAt)
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
		// Its end: when its lease ran out (none of its writes outlives it,
		// docs/guide.md#the-store-and-the-leases), else now. Without one,
		// `runs` showed the run without a duration, forever.
		cur.FinishedAt = now
		if l.RunID == r.ID && l.ExpiresAt.Before(now) && l.ExpiresAt.After(cur.StartedAt) {
			cur.FinishedAt = l.ExpiresAt
		}
		// Only if still running: its worker may have recorded its end
		// since the re-read (the success of a run whose lease it had just
		// released was overwritten "interrupted": queue's
		// TestKilledCoordinatorAndPartitionRunAgain, CI 2026-12-07).
		if closed, err := s.st.CloseRun(ctx, cur); err != nil {
			errs = append(errs, fmt.Errorf("recovery: run %d: %w", r.ID, err))
			continue
		} else if !closed {
			continue
		}
		s.metrics.recovered.Inc()
		out.Runs = append(out.Runs, r.ID)
		// The closed run is interrupted, not failed (a dead worker is not
		// the sync's fault, and its work resumes at once), so it never
		// lengthens a streak; the breaker is evaluated anyway: a worker that
		// died between recording a failed run and evaluating the breaker
		// left that evaluation undone, and this is where it happens.
		if partition.Parent(r.SyncID) == r.SyncID {
			// A partition's run has no streak of its own (its sync's
			// coordinated run is evaluated when it ends): evaluated under
			// the partition's id, the breaker logged an ERROR "not found"
			// (an independent check, 2026-12-07).
			s.afterFailure(ctx, r.SyncID)
		}
		s.log.Warn("run's worker is gone; resuming the sync", "sync", r.SyncID, "run", r.ID)
		if !live {
			dead[r.SyncID] = true
		}
	}
	// Jobs of every run kind whose worker is gone are made available again
	// at once (River's own stuck-job rescue would wait RescueStuckJobsAfter):
	// a job running for longer than a lease TTL whose run was just found
	// dead, or that holds no live lease at all, neither its heartbeat nor its
	// run's (a worker killed before the job took one, or after its run ended
	// and before River marked the job completed). Uniqueness per sync (per
	// partition) would otherwise skip every later tick and "run now" as a
	// duplicate of the dead job.
	//
	// A young job of a sync in diedHere is rescued too: its run took the
	// sync's lease and died, so the job's attempt is the dead one (a later
	// attempt needs the job made available first, which marks that run
	// interrupted). So is a young job whose current attempt's heartbeat
	// (beatOwner) a dead process of this machine holds: its worker
	// died before its run took a lease, or while a coordinator or a
	// partition worked. listed bounds those: an attempt begun during this
	// sweep is left alone.
	listed := time.Now()
	horizon := listed.Add(-grace) // River's times are wall-clock times
	rescued := map[string]bool{}  // slots whose dead job was rescued
	var old, young []int64        // rescued, by the horizon each needs
	var kinds []string            // of out.Rescued, for the metric
	for _, kind := range []string{KindRunSync, KindRunPartitioned, KindRunPartition} {
		jobs, err := s.b.running(ctx, kind, recoverLimit)
		if err != nil {
			errs = append(errs, fmt.Errorf("recovery: list running %s jobs: %w", kind, err))
			continue
		}
		for _, j := range jobs {
			w, ok := workOf(j)
			if !ok || j.AttemptedAt == nil || !j.AttemptedAt.Before(listed) {
				continue
			}
			switch {
			case !j.AttemptedAt.Before(horizon):
				if !(kind == KindRunSync && diedHere[w.runLease]) && !s.beatDiedHere(ctx, w, j, self) {
					continue
				}
				young = append(young, j.ID)
			case (w.runLease != "" && dead[w.runLease]) || s.workerGone(ctx, w, now, self):
				old = append(old, j.ID)
			default:
				continue
			}
			out.Rescued = append(out.Rescued, j.ID)
			kinds = append(kinds, kind)
			rescued[w.slot] = true
		}
	}
	if err := errors.Join(s.b.rescue(ctx, old, horizon, rescueNote), s.b.rescue(ctx, young, listed, rescueNote)); err != nil {
		errs = append(errs, fmt.Errorf("recovery: rescue jobs: %w", err))
		out.Rescued = nil
		clear(rescued)
	}
	for i, id := range out.Rescued {
		s.metrics.rescued.WithLabelValues(kindLabel(kinds[i])).Inc()
		s.log.Warn("job's worker is gone; the job is available again", "job", id, "kind", kinds[i])
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
	if err := s.sweepCoordinated(ctx, coordinated, &out); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// activeJobStates are the states of a job that may still be worked.
var activeJobStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

// finishedJobStates are the states of a job that will never be worked again.
var finishedJobStates = []rivertype.JobState{
	rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded,
}

// allJobStates are both.
var allJobStates = append(slices.Clone(activeJobStates), finishedJobStates...)

// sweepCoordinated closes the runs of partitioned syncs (running, older than
// the lease TTL) that no partition job is left to close: a run's partitions
// close it themselves (the last success completes it, a permanent failure
// fails it), but not when their jobs end otherwise: discarded after their
// last retryable failure, cancelled by a person, never queued (the
// coordinator died between recording the run and queueing them) or gone
// from the queue. A run is left alone while any partition job of its sync
// from it or an earlier run (an earlier run's job may be working one of its
// partitions, its own having been skipped as a duplicate) is available,
// pending, scheduled, retryable or running, and a run none of whose
// partitions was queued while a coordinator job of its sync is (that
// coordinator resumes the run). Then every partition that
// succeeded after the run began completes it, as the last partition would
// have; otherwise it fails partitions_unfinished, with the partitions named
// in the detail, and the breaker is evaluated.
func (s *Service) sweepCoordinated(ctx context.Context, runs []store.Run, out *Recovered) error {
	var errs []error
	for _, r := range runs {
		active, err := s.b.jobsOf(ctx, KindRunPartition, r.SyncID, 0, activeJobStates, recoverLimit)
		if err != nil {
			errs = append(errs, fmt.Errorf("recovery: partition jobs of sync %s: %w", r.SyncID, err))
			continue
		}
		if slices.ContainsFunc(active, func(j *rivertype.JobRow) bool {
			a, ok := partitionArgs(j)
			return !ok || a.RunID <= r.ID // undecodable: when unsure, do nothing
		}) {
			continue
		}
		sc, _ := s.cfg.Sync(r.SyncID)
		own, err := s.b.jobsOf(ctx, KindRunPartition, r.SyncID, r.ID, finishedJobStates, recoverLimit)
		if err != nil {
			errs = append(errs, fmt.Errorf("recovery: partition jobs of run %d: %w", r.ID, err))
			continue
		}
		if len(own) == 0 {
			// No partition of the run was ever queued: its coordinator died
			// (or failed) first. A coordinator job of the sync still to be
			// worked (rescued above, or retrying) resumes the run.
			coord, err := s.b.jobsOf(ctx, KindRunPartitioned, r.SyncID, 0, activeJobStates, 1)
			if err != nil {
				errs = append(errs, fmt.Errorf("recovery: coordinator jobs of sync %s: %w", r.SyncID, err))
				continue
			}
			if len(coord) > 0 {
				continue
			}
		}
		n := sc.Partitions
		for _, j := range own {
			if a, ok := partitionArgs(j); ok && a.Partitions > 1 {
				n = a.Partitions // the run's own split, should the config have changed since
			}
		}
		// A partition whose lease is live is being worked, whatever its
		// jobs say: an attempt made available again while the one before
		// still ran completes its job as skipped (the partition is held),
		// and the partition still running closes the run itself.
		held := false
		for k := 1; k <= n && !held; k++ {
			held = s.leaseLive(ctx, partition.SyncID(r.SyncID, k), s.clock.Now(), lease.ThisProcess())
		}
		if held {
			continue
		}
		// Re-read: a partition may have closed the run since it was listed.
		cur, err := s.st.GetRun(ctx, r.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("recovery: run %d: %w", r.ID, err))
			continue
		}
		if cur.State != store.RunRunning {
			continue
		}
		parts, err := s.partitionOutcomes(ctx, r.SyncID, cur, n, own)
		if err != nil {
			errs = append(errs, fmt.Errorf("recovery: partitions of run %d: %w", r.ID, err))
			continue
		}
		// The run's figures are its partitions' runs' since it began
		// (failed attempts included), as when a partition closes it.
		total, err := partition.Sum(ctx, s.st, r.SyncID, cur.ID, n)
		if err != nil {
			errs = append(errs, fmt.Errorf("recovery: figures of run %d: %w", r.ID, err))
			continue
		}
		cur.Counters = total
		done := true
		for _, p := range parts {
			done = done && p.succeeded
		}
		// The barrier goes first, as when the last partition completes the
		// run (completeIfDone): a run recorded closed has none left.
		if s.barrier != nil {
			if err := s.barrier.Release(ctx, s.keys.Barrier(r.SyncID, r.ID), "run"+strconv.FormatInt(r.ID, 10)); err != nil {
				s.log.Warn("could not release the barrier of a closed partitioned run; it expires by itself", "sync", r.SyncID, "run", r.ID, "err", err)
			}
		}
		if done {
			if !s.finishCoordinated(ctx, cur, store.RunSucceeded, nil) {
				continue
			}
			out.Completed = append(out.Completed, r.ID)
			s.log.Warn("partitioned run closed by recovery: every partition had succeeded", "sync", r.SyncID, "run", r.ID)
		} else {
			detail := unfinishedDetail(parts)
			if !s.finishCoordinated(ctx, cur, store.RunFailed, failure.New(failure.PartitionsUnfinished, detail)) {
				continue
			}
			out.Unfinished = append(out.Unfinished, r.ID)
			s.log.Warn("partitioned run closed by recovery: no partition job is left to finish it", "sync", r.SyncID, "run", r.ID, "detail", detail)
		}
	}
	return errors.Join(errs...)
}

// partitionArgs decodes a partition job's arguments.
func partitionArgs(j *rivertype.JobRow) (RunPartitionArgs, bool) {
	var a RunPartitionArgs
	if err := json.Unmarshal(j.EncodedArgs, &a); err != nil || a.Partition < 1 {
		return a, false
	}
	return a, true
}

// partitionOutcome is how one partition of a run ended.
type partitionOutcome struct {
	k         int
	succeeded bool
	// job is the state of the run's newest job of the partition ("" when
	// it has none in the queue), attempts its attempts.
	job      rivertype.JobState
	attempts int
	// code is the failure code of the partition's newest run, if it failed
	// after the run began.
	code string
}

// partitionOutcomes reads how each of the n partitions of the coordinated
// run coord ended: succeeded when the partition's newest run is a success
// started after coord (as completeIfDone decides) or one by hand that held
// the partition when coord began and ended after, else with its job's final state (from
// own, the run's finished partition jobs) and its last failure code.
// rescueNote is the error the recovery records on a job it hands back
// (the attempt's worker died): retryPolicy does not count such attempts.
const rescueNote = "lease-expiry recovery: the job's worker is gone; resumed from the saved cursor"

func (s *Service) partitionOutcomes(ctx context.Context, syncID string, coord store.Run, n int, own []*rivertype.JobRow) ([]partitionOutcome, error) {
	runID := coord.ID
	out := make([]partitionOutcome, n)
	for i := range out {
		out[i].k = i + 1
	}
	for _, j := range own { // newest first: keep the first per partition
		if a, ok := partitionArgs(j); ok && a.Partition <= n && out[a.Partition-1].job == "" {
			out[a.Partition-1].job, out[a.Partition-1].attempts = j.State, j.Attempt
		}
	}
	for i := range out {
		runs, err := s.st.ListRuns(ctx, partition.SyncID(syncID, out[i].k), 20)
		if err != nil {
			return nil, err
		}
		last, ok := partition.Newest(runs)
		if !ok {
			continue
		}
		if last.ID < runID {
			// A run by hand that held the partition when the run began
			// (its job met the lease and was skipped) and succeeded since
			// covers it (docs/guide.md#commands); its figures are its own
			// run's, not the coordinated run's.
			out[i].succeeded = last.State == store.RunSucceeded && !last.FinishedAt.Before(coord.StartedAt)
			continue
		}
		switch last.State {
		case store.RunSucceeded:
			out[i].succeeded = true
		case store.RunFailed:
			out[i].code = last.FailureCode
		}
	}
	return out, nil
}

// unfinishedDetail names the partitions that did not finish, grouped by how
// their jobs ended, and the partitions' last failure codes.
func unfinishedDetail(parts []partitionOutcome) string {
	groups := map[string][]int{}
	var order []string
	codes := map[string]bool{}
	var codeList []string
	succeeded := 0
	for _, p := range parts {
		if p.succeeded {
			succeeded++
			continue
		}
		var how string
		switch p.job {
		case "":
			how = "no job left in the queue"
		case rivertype.JobStateDiscarded:
			how = "job discarded after its last attempt"
		case rivertype.JobStateCancelled:
			how = "job cancelled"
		default: // completed without a success of its own (skipped: another run held the partition)
			how = "job ended without a successful run"
		}
		if _, ok := groups[how]; !ok {
			order = append(order, how)
		}
		groups[how] = append(groups[how], p.k)
		if p.code != "" && !codes[p.code] {
			codes[p.code] = true
			codeList = append(codeList, p.code)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d partitions succeeded; ", succeeded, len(parts))
	for i, how := range order {
		if i > 0 {
			b.WriteString("; ")
		}
		ks := groups[how]
		word := "partition"
		if len(ks) > 1 {
			word = "partitions"
		}
		strs := make([]string, len(ks))
		for i, k := range ks {
			strs[i] = strconv.Itoa(k)
		}
		fmt.Fprintf(&b, "%s %s: %s", word, strings.Join(strs, ", "), how)
	}
	if len(codeList) > 0 {
		fmt.Fprintf(&b, "; their last runs failed with %s", strings.Join(codeList, ", "))
	}
	return b.String()
}

// leaseLive reports whether someone alive holds the sync's lease; when the
// lease cannot be read, or the lease store lost it less than a TTL ago
// (lease.ErrQuarantined), it answers true (when unsure, do nothing).
func (s *Service) leaseLive(ctx context.Context, syncID string, now time.Time, self lease.Process) bool {
	l, err := s.inspector.LeaseGet(ctx, syncID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		return true
	}
	return lease.Live(l, now, self)
}
