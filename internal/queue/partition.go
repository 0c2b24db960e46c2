package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// Partitioned syncs (docs/guide.md#the-checkpoint-barrier). A sync with partitions: N > 1 runs as one
// coordinator job and N partition jobs:
//
//   - the coordinator records the run (under the sync's id), computes the
//     source snapshot (PostgreSQL: the sync's version query; files: the
//     SHA-256 of the content), pins it in the run's checkpoint barrier with
//     Check, and enqueues the N partition jobs;
//   - each partition job, on any worker, is a run of its own under the id
//     partition.SyncID(sync, k), so it has its own lease, fence, cursor and
//     ledger; it reads the whole source and keeps the rows whose identity
//     hashes to it (partition.Of); before every claim it computes the source
//     snapshot again and verifies it against the barrier (Verify only: a
//     partition never pins a snapshot itself). A mismatch is retried with the
//     barrier's backoff; after the retries the partition is dead-lettered and
//     fails source_changed_during_run (not retried), and so does the run;
//   - the last partition to succeed marks the run succeeded with the sum of
//     the partitions' counters and releases the barrier.
//
// Every job holds a heartbeat while it works (heartbeat.go): a coordinator
// or a partition job whose worker died is rescued by lease-expiry recovery
// like a run's. The partitions are queued in one transaction, so a rescued
// (or retried) coordinator that finds a run of its sync with none queued
// resumes that run instead of recording another (unsplitRun).

// Job kinds of partitioned syncs.
const (
	// KindRunPartitioned is the coordinator of one run of a partitioned sync.
	KindRunPartitioned = "oncesync_run_partitioned"
	// KindRunPartition is one partition of a run of a partitioned sync.
	KindRunPartition = "oncesync_run_partition"
)

// RunPartitionedArgs is the coordinator of one run of a partitioned sync.
// Unique per sync like RunSyncArgs.
type RunPartitionedArgs struct {
	SyncID string `json:"sync_id" river:"unique"`
	Reason string `json:"reason"`
	// Config: RunSyncArgs.Config.
	Config string `json:"config,omitempty"`
}

// Kind implements river.JobArgs.
func (RunPartitionedArgs) Kind() string { return KindRunPartitioned }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RunPartitionedArgs) InsertOpts() river.InsertOpts { return RunSyncArgs{}.InsertOpts() }

// RunPartitionArgs is partition Partition (1-based) of Partitions of the
// run RunID of SyncID, whose barrier is Barrier (held by Token). Unique per
// (sync, partition) while one is pending, running or retrying.
type RunPartitionArgs struct {
	SyncID     string `json:"sync_id" river:"unique"`
	Partition  int    `json:"partition" river:"unique"`
	Partitions int    `json:"partitions"`
	RunID      int64  `json:"run_id"`
	Barrier    string `json:"barrier"`
	Token      string `json:"token"`
	// Snapshot is the one the coordinator pinned (recorded on dead letters).
	Snapshot string `json:"snapshot"`
	Reason   string `json:"reason"`
	// Config: RunSyncArgs.Config, the coordinator's (which matched the
	// job that queued the run).
	Config string `json:"config,omitempty"`
}

// Kind implements river.JobArgs.
func (RunPartitionArgs) Kind() string { return KindRunPartition }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RunPartitionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: MaxAttempts,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
				rivertype.JobStateRetryable, rivertype.JobStateScheduled,
			},
		},
	}
}

type runPartitionedWorker struct {
	river.WorkerDefaults[RunPartitionedArgs]
	s *Service
}

// Work pins the snapshot and enqueues the partitions.
func (w *runPartitionedWorker) Work(ctx context.Context, job *river.Job[RunPartitionedArgs]) error {
	return w.s.work(ctx, job.JobRow, heartbeatID(KindRunPartitioned, job.Args.SyncID), func() error {
		return w.s.coordinate(ctx, job.Args, job.Attempt)
	})
}

type runPartitionWorker struct {
	river.WorkerDefaults[RunPartitionArgs]
	s *Service
}

// Work runs one partition.
func (w *runPartitionWorker) Work(ctx context.Context, job *river.Job[RunPartitionArgs]) error {
	return w.s.work(ctx, job.JobRow, heartbeatID(KindRunPartition, partition.SyncID(job.Args.SyncID, job.Args.Partition)), func() error {
		return w.s.runPartition(ctx, job.Args, job.Attempt, job.ID)
	})
}

// runArgsFor is the job of one run of sc: the coordinator for a partitioned
// sync, else RunSyncArgs; either carries sc's fingerprint in this process's
// config (drift.go).
func (s *Service) runArgsFor(sc *config.Sync, reason string) river.JobArgs {
	if sc.Partitions > 1 {
		return RunPartitionedArgs{SyncID: sc.ID, Reason: reason, Config: s.fingerprint(sc)}
	}
	return RunSyncArgs{SyncID: sc.ID, Reason: reason, Config: s.fingerprint(sc)}
}

// coordinate is the coordinator of a partitioned run (see the top of this
// file).
func (s *Service) coordinate(ctx context.Context, args RunPartitionedArgs, attempt int) error {
	sc, built, err := s.startJob(ctx, args.SyncID, args.Config, attempt, func(sc *config.Sync) error {
		if s.barrier == nil {
			return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("sync %s has partitions: %d, which needs redis (the checkpoint barrier lives there)", sc.ID, sc.Partitions))
		}
		return nil
	})
	if err != nil {
		return err
	}
	snap, err := partition.Snapshot(ctx, sc.Source.Type, built.Source, sc.Source.Timeout)
	_ = built.Close()
	if err != nil {
		s.recordFailure(ctx, sc.ID, attempt, err)
		return err
	}
	run, resumed, err := s.unsplitRun(ctx, sc)
	if err != nil {
		return failure.Wrap(failure.StoreUnavailable, err, "look for a run of sync %s left unsplit", sc.ID)
	}
	if !resumed {
		if ctx.Err() != nil {
			return failure.Wrap(failure.Interrupted, ctx.Err(), "the run was stopped before it started")
		}
		run, err = store.InsertRunDetached(ctx, s.st, store.InsertRunParams{SyncID: sc.ID, State: store.RunRunning, Attempt: attempt})
		if err != nil {
			return failure.Wrap(failure.StoreUnavailable, err, "record the run")
		}
	}
	key := s.keys.Barrier(sc.ID, run.ID)
	token := "run" + strconv.FormatInt(run.ID, 10)
	res, err := s.barrier.Check(ctx, key, token, snap, partition.BarrierTTL)
	if err == nil && resumed && res.Outcome == barrier.Mismatch && res.HolderToken == token {
		// The source changed since the dead coordinator pinned it, but no
		// partition of the run was queued, so nothing was written from
		// the old view: pin the current one.
		err = s.barrier.Advance(ctx, key, token, snap, partition.BarrierTTL)
		res.Outcome = barrier.Aligned
	}
	if err == nil && res.Outcome != barrier.Created && res.Outcome != barrier.Aligned {
		err = fmt.Errorf("barrier %s already holds snapshot %s", key, res.HolderSnapshot)
	}
	if err != nil {
		ferr := failure.Wrap(failure.StoreUnavailable, err, "pin the source snapshot of the run")
		s.finishCoordinated(ctx, run, store.RunFailed, ferr)
		return ferr
	}
	parts := make([]river.JobArgs, sc.Partitions)
	for k := 1; k <= sc.Partitions; k++ {
		parts[k-1] = RunPartitionArgs{
			SyncID: sc.ID, Partition: k, Partitions: sc.Partitions, RunID: run.ID,
			Barrier: key, Token: token, Snapshot: snap, Reason: args.Reason,
			Config: s.fingerprint(sc),
		}
	}
	// One transaction: a run has all of its partitions queued or none, so
	// a run with none is one its coordinator never split (unsplitRun).
	inserted, err := s.b.insertMany(ctx, parts)
	if err != nil {
		// The run stays running; this job's retry resumes it.
		return failure.Wrap(failure.StoreUnavailable, err, "queue the partitions of sync %s", sc.ID)
	}
	var dup int
	for _, r := range inserted {
		if r.UniqueSkippedAsDuplicate {
			dup++
		}
	}
	if dup == sc.Partitions {
		// Every partition of an earlier run is still queued or working.
		ferr := failure.New(failure.AlreadyRunning, runner.SentenceAlreadyRunning)
		s.finishCoordinated(ctx, run, store.RunSkipped, ferr)
		_ = s.barrier.Release(context.WithoutCancel(ctx), key, token)
		return ferr
	}
	if resumed {
		s.log.Warn("partitioned run resumed: its coordinator stopped before queueing the partitions", "sync", sc.ID, "run", run.ID)
	}
	s.log.Info("partitioned run started", "sync", sc.ID, "run", run.ID, "partitions", sc.Partitions, "snapshot", snap)
	return nil
}

// unsplitRun returns the newest run of sc whose coordinator stopped (killed,
// or failed to queue them) before queueing its partitions: running, older
// than a lease TTL (younger runs may be a foreground run about to take the
// sync's lease), no partition job of it in the queue, and not a foreground
// `oncesync run` (which holds the sync's own lease). The coordinator resumes
// it instead of recording another: the run began once, and the recovery
// sweep leaves it open for the coordinator (sweepCoordinated).
func (s *Service) unsplitRun(ctx context.Context, sc *config.Sync) (store.Run, bool, error) {
	runs, err := s.st.ListRuns(ctx, sc.ID, 20)
	if err != nil {
		return store.Run{}, false, err
	}
	now := s.clock.Now()
	for _, r := range runs { // newest first
		if r.State != store.RunRunning || now.Sub(r.StartedAt) < s.cfg.Settings.LeaseTTL {
			continue
		}
		jobs, err := s.b.jobsOf(ctx, KindRunPartition, sc.ID, r.ID, allJobStates, 1)
		if err != nil {
			return store.Run{}, false, err
		}
		if len(jobs) > 0 {
			continue
		}
		l, err := s.inspector.LeaseGet(ctx, sc.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Run{}, false, err
		}
		if (err != nil || l.RunID == r.ID) && s.leaseLive(ctx, sc.ID, now, lease.ThisProcess()) {
			continue // a foreground run, alive (when unsure, it is)
		}
		return r, true, nil
	}
	return store.Run{}, false, nil
}

// runPartition runs one partition of a partitioned run.
func (s *Service) runPartition(ctx context.Context, args RunPartitionArgs, attempt int, jobID int64) error {
	sc, ok := s.cfg.Sync(args.SyncID)
	if !ok {
		return s.partitionEnded(ctx, args, s.missingSync(fmt.Sprintf("partitioned sync %q", args.SyncID)))
	}
	if args.Partitions < 2 || args.Partition < 1 || args.Partition > args.Partitions {
		return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("partition %d/%d of sync %q is not a partition", args.Partition, args.Partitions, args.SyncID))
	}
	if err := s.checkDrift(sc, args.Config); err != nil {
		return s.partitionEnded(ctx, args, err)
	}
	switch row, err := s.st.GetSync(ctx, sc.ID); {
	case err == nil && row.State == store.SyncPaused:
		// A paused sync's partitions do not start: the run they belong to
		// ends interrupted, and the first run after a resume goes on from
		// every partition's checkpoint.
		if run, err := s.st.GetRun(ctx, args.RunID); err == nil && run.State == store.RunRunning {
			s.finishCoordinated(ctx, run, store.RunInterrupted, failure.New(failure.Interrupted, pausedDetail(row)))
		}
		s.log.Info("sync is paused; partition not started", "sync", sc.ID, "partition", args.Partition)
		return errSyncPaused
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return failure.Wrap(failure.StoreUnavailable, err, "read sync %s", sc.ID)
	}
	if s.barrier == nil {
		return failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("sync %s is partitioned, which needs redis", sc.ID))
	}
	built, err := app.Build(s.cfg, sc, s.buildOptions(sc))
	if err != nil {
		return s.partitionEnded(ctx, args, buildFailure(err))
	}
	defer built.Close()
	partSync := built.Sync
	partSync.ID = partition.SyncID(sc.ID, args.Partition)
	payload, _ := json.Marshal(args)
	token := "p" + strconv.Itoa(args.Partition) + "-job" + strconv.FormatInt(jobID, 10)
	pw := s.watchPause(ctx, sc.ID)
	run, runErr := runner.Run(ctx, runner.Params{
		Store:        s.st,
		Leases:       s.leases,
		Source:       built.Source,
		Destination:  built.Destination,
		Clock:        s.clock,
		Logger:       s.log.With("reason", args.Reason, "attempt", attempt, "partition", args.Partition, "coordinator_run", args.RunID),
		Sync:         partSync,
		Secrets:      s.cfg.SecretValues(),
		LeaseTTL:     s.cfg.Settings.LeaseTTL,
		LeaseRenew:   s.cfg.Settings.LeaseRenew,
		InDoubtGrace: s.cfg.Settings.InDoubtGrace,
		Attempt:      attempt,
		Drain:        pw.drain,
		DrainDetail:  pw.detail,
		Filter:       partition.Filter(sc.Source.Identity, args.Partition, args.Partitions),
		Slice:        source.Slice{Identity: sc.Source.Identity, K: args.Partition, N: args.Partitions},
		BeforeWrite: func(ctx context.Context) error {
			snap, err := partition.Snapshot(ctx, sc.Source.Type, built.Source, sc.Source.Timeout)
			if err != nil {
				return err
			}
			_, err = s.barrier.Wait(ctx, barrier.WaitParams{
				Key: args.Barrier, Token: token, Snapshot: snap, VerifyOnly: true,
				// A barrier lost with Redis (a restart without persistence)
				// is restored to the coordinator's pin, which the job
				// carries: the run goes on only where the source still
				// matches it.
				Pin: pinOf(args), TTL: partition.BarrierTTL,
				DeadLetters: s.deadLetters,
				Entry: barrier.DeadLetter{
					SyncID: sc.ID, RunID: args.RunID, Partition: args.Partition,
					Reason: barrier.ReasonSourceChanged, Payload: string(payload),
				},
				Sleep: s.build.Sleep,
				Clock: s.clock,
			})
			if errors.Is(err, barrier.ErrDeadLettered) {
				return failure.Wrap(failure.SourceChangedDuringRun, err,
					"the source changed since partition %d's run pinned its snapshot; nothing was written from the changed view and the partition was dead-lettered", args.Partition)
			}
			return err
		},
	})
	pw.stop()
	s.metrics.runFinished(partSync.ID, run, runErr)
	return s.partitionEnded(ctx, args, runErr)
}

// pinOf is the coordinator's pin a partition job carries (nil for a job
// queued without one).
func pinOf(args RunPartitionArgs) *barrier.Pin {
	if args.Token == "" || args.Snapshot == "" {
		return nil
	}
	return &barrier.Pin{Token: args.Token, Snapshot: args.Snapshot}
}

// partitionEnded closes the coordinated run when the partition's outcome
// settles it: a failure that will not be retried fails the run with its
// code; a success completes it when every partition has succeeded.
func (s *Service) partitionEnded(ctx context.Context, args RunPartitionArgs, runErr error) error {
	switch code := failure.CodeOf(runErr); {
	case runErr == nil:
		s.completeIfDone(ctx, args)
	case code == failure.AlreadyRunning, code == failure.Interrupted, failure.Retryable(runErr):
		// Retried (or resumed) by the queue; the run goes on.
	default:
		if run, err := s.st.GetRun(ctx, args.RunID); err == nil && run.State == store.RunRunning {
			s.finishCoordinated(ctx, run, store.RunFailed, runErr)
		}
	}
	s.recount(ctx, args)
	return runErr
}

// recount brings the figures of a coordinated run that ended without
// success up to its partitions' runs: those still working when it failed
// (a source that changed mid-run parks each partition in turn) end after
// it, and their pages were written too.
func (s *Service) recount(ctx context.Context, args RunPartitionArgs) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	run, err := s.st.GetRun(ctx, args.RunID)
	if err != nil || run.State == store.RunRunning || run.State == store.RunSucceeded {
		return
	}
	total, err := partition.Sum(ctx, s.st, args.SyncID, args.RunID, args.Partitions)
	if err != nil || total == run.Counters {
		return
	}
	run.Counters = total
	if err := s.st.UpdateRun(ctx, run); err != nil {
		s.log.Warn("could not record a partitioned run's figures", "sync", args.SyncID, "run", args.RunID, "err", err)
	}
}

// completeIfDone marks the coordinated run succeeded, with the sum of its
// partitions' counters, once the newest run of every partition is a success
// started after it, after releasing the barrier. Two partitions finishing
// at once may both do it: the outcome is the same.
func (s *Service) completeIfDone(ctx context.Context, args RunPartitionArgs) {
	run, err := s.st.GetRun(ctx, args.RunID)
	if err != nil || run.State != store.RunRunning {
		return
	}
	total, done, err := partition.Totals(ctx, s.st, args.SyncID, args.RunID, args.Partitions)
	if err != nil || !done {
		return
	}
	run.Counters = total
	// Released first, so that a run recorded succeeded has no barrier left
	// (unless Redis refused the release): recorded first, a reader of the
	// run's end could find its barrier still there (make chaos
	// redis-partitioned, 2026-12-06).
	if err := s.barrier.Release(context.WithoutCancel(ctx), args.Barrier, args.Token); err != nil {
		s.log.Warn("could not release the barrier of a finished partitioned run; it expires by itself", "sync", args.SyncID, "run", args.RunID, "err", err)
	}
	s.finishCoordinated(ctx, run, store.RunSucceeded, nil)
}

// finishCoordinated records the end of a partitioned run and, when it
// failed, evaluates the sync's breaker. False when it had ended already.
func (s *Service) finishCoordinated(ctx context.Context, run store.Run, state store.RunState, err error) bool {
	run.State = state
	run.FinishedAt = s.clock.Now()
	if err != nil {
		err = failure.OutOfFiles(err)
		run.FailureCode = string(failure.CodeOf(err))
		run.FailureDetail = failure.Detail(err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if sc, ok := s.cfg.Sync(run.SyncID); ok && state != store.RunSucceeded && run.Counters == (store.Counters{}) {
		// Its partitions may have written pages before it ended: the run's
		// figures are theirs, as a successful run's are (it said 0 read, 0
		// written beside 800 records delivered).
		if total, serr := partition.Sum(sctx, s.st, run.SyncID, run.ID, sc.Partitions); serr == nil {
			run.Counters = total
		}
	}
	// The first end recorded stands: a partition's failure and another's
	// completing the run, or a sweep, may race to it.
	if closed, uerr := s.st.CloseRun(sctx, run); uerr != nil {
		s.log.Error("could not record the end of a partitioned run", "sync", run.SyncID, "run", run.ID, "err", uerr)
		return false
	} else if !closed {
		return false
	}
	s.metrics.runEnded(run.SyncID, state)
	if state == store.RunFailed {
		s.afterFailure(sctx, run.SyncID)
	}
	s.runEnded(sctx, run)
	return true
}
