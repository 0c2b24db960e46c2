package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/store"
)

// runSyncWorker works RunSyncArgs jobs.
type runSyncWorker struct {
	river.WorkerDefaults[RunSyncArgs]
	s *Service
}

// Work runs the sync and maps the result for River (see jobResult).
func (w *runSyncWorker) Work(ctx context.Context, job *river.Job[RunSyncArgs]) error {
	return w.s.work(ctx, job.JobRow, heartbeatID(KindRunSync, job.Args.SyncID), func() error {
		return w.s.runSync(ctx, job.Args, job.Attempt)
	})
}

// work runs one attempt of job under its heartbeat beat and returns what
// River records of it: jobResult of run's result, unless a later attempt
// runs the job now (ownResult). That is asked once the heartbeat is
// stopped, last before River records the result: stopping it can take
// seconds when the lease store does not answer (its renewal's and
// release's timeouts), the very time a recovery sweep hands the job on
// (the heartbeat expired), and a result judged before that would set the
// later attempt's running job retryable under River's backoff (a cut-off
// worker's lost lease: 8 minutes without a run, 2026-12-06).
func (s *Service) work(ctx context.Context, job *rivertype.JobRow, beat string, run func() error) error {
	stop := sync.OnceFunc(s.heartbeat(ctx, beat, beatOwner(job)))
	defer stop() // a panic's too
	err := run()
	res := jobResult(job, err)
	if heldAfterHandOn(job, err) {
		res = river.JobSnooze(s.heldWait(snoozes(job)))
	}
	stop()
	return s.ownResult(ctx, job, res)
}

// heldAfterHandOn reports whether err is a run skipped because another run
// holds the sync's (the partition's) lease, in an attempt a recovery sweep
// handed the job to (its last error is rescueNote). The holder is most
// likely the attempt that was handed on, alive after all (a worker frozen,
// or slow to take its heartbeat, past a lease TTL): completed as skipped,
// the job left nothing to retry that attempt's failure, whose result is
// not its own to give any more (ownResult), and a partitioned run failed
// partitions_unfinished with a partition half written (CI, 2026-12-07).
// The job waits instead, without using an attempt, and runs once the
// holder is done: nothing, when it succeeded, but a pass over the rows
// already delivered. Each wait records a skipped run, so the waits double
// (heldWait); after heldSnoozes of them it completes as skipped.
func heldAfterHandOn(job *rivertype.JobRow, err error) bool {
	if failure.CodeOf(err) != failure.AlreadyRunning || len(job.Errors) == 0 || snoozes(job) >= heldSnoozes {
		return false
	}
	return job.Errors[len(job.Errors)-1].Error == rescueNote
}

// heldSnoozes bounds heldAfterHandOn's waits: about an hour at the default
// renewal interval.
const heldSnoozes = 36

// heldWaitMax caps heldWait.
const heldWaitMax = 2 * time.Minute

// heldWait is how long a job whose sync another run holds waits before it
// tries again, the n+1th time (heldAfterHandOn): the renewal interval (a
// live holder renews within it, a dead one's lease nears its end), doubled
// each time up to heldWaitMax, so that a long holder (a person's
// `oncesync run`) costs a few skipped runs, not hundreds.
func (s *Service) heldWait(n int) time.Duration {
	w := s.renewEvery()
	for range min(n, 16) {
		w *= 2
	}
	return min(w, max(heldWaitMax, s.cfg.Settings.LeaseTTL/3))
}

// ownResult is res, the result of attempt job.Attempt, unless a later
// attempt of the job has started meanwhile: a recovery handed the job on
// while this worker was frozen or cut off, and the later attempt runs it
// now. Its result is that attempt's to give. This one's error (a lost
// lease, most often) would set the job retryable under the attempt still
// running, whose own completion then changes nothing: the job waited out
// River's backoff (a minute and more) while every tick of its schedule was
// refused as its duplicate (make chaos pauses, 2026-12-05). So a stale
// attempt completes the job without an error; the later attempt's run keeps
// its lease and records its own outcome, and a retry it would have needed
// is the next tick's.
func (s *Service) ownResult(ctx context.Context, job *rivertype.JobRow, res error) error {
	if res == nil {
		return nil
	}
	cur, err := s.b.attempt(context.WithoutCancel(ctx), job.ID)
	if err != nil || cur <= job.Attempt {
		return res
	}
	s.log.Warn("a later attempt of this job runs it now; this attempt's outcome is left to it",
		"job", job.ID, "attempt", job.Attempt, "current_attempt", cur, "err", res)
	return nil
}

// jobResult maps a run's result to what River does with its job:
//   - success, a skipped run (another run owned the sync; the run row says
//     skipped) and a paused sync: nil, the job completes. A paused sync's
//     job records no run at all: the pause (by a person or the circuit
//     breaker) is on the sync's page, and a stream of skipped rows would
//     only bury the run that caused it; the schedule keeps enqueuing and
//     every such job completes the same way until the sync is resumed;
//   - interrupted (drained on shutdown, or cancelled): snoozed 0, available
//     again at once to any worker, without using an attempt;
//   - the lease store lost its data and grants no lease for a while (
//     docs/guide.md#the-store-and-the-leases): snoozed until the quarantine ends, without using an attempt (a
//     quarantine of one TTL would otherwise eat the retries of partitions
//     with a short backoff, and of every job with a long TTL);
//   - the lease store could not be asked for the sync's lease (this
//     process cut off from Redis, or Redis down): snoozed a moment, up to
//     handOnSnoozes times a job, without using an attempt, so another
//     process can take the job (nothing was claimed or written). A
//     process cut off from Redis alone otherwise failed every job it took
//     and put each sync behind a minute and more of backoff while the
//     other workers idled (an independent check, 2026-12-06); once the
//     snoozes are used up (Redis down for everyone), a retry as below;
//   - a retryable failure: the error, River retries with Backoff;
//   - a permanent failure: cancelled, never retried.
func jobResult(job *rivertype.JobRow, err error) error {
	if err == nil || errors.Is(err, errSyncPaused) {
		return nil
	}
	var qe *lease.QuarantineError
	if errors.As(err, &qe) {
		return river.JobSnooze(quarantineWait(qe, time.Now()))
	}
	switch code := failure.CodeOf(err); {
	case code == failure.AlreadyRunning:
		return nil
	case code == failure.Interrupted:
		return river.JobSnooze(0)
	case errors.Is(err, runner.ErrLeaseNotTaken) && snoozes(job) < handOnSnoozes:
		return river.JobSnooze(handOnWait)
	case failure.Retryable(err):
		return err
	default:
		return river.JobCancel(err)
	}
}

// handOnSnoozes and handOnWait bound how a job whose lease could not be
// asked for waits for another process (jobResult): a second each time (then
// River's scheduler makes it available to every process), ten times in its
// life. The process that failed may take it again as often as any other:
// with three, one of four syncs still waited out a minute's backoff in two
// minutes of a worker cut off from Redis beside a healthy serve
// (docs/RELIABILITY.md); ten such draws in a row are rare, and a Redis down for
// every process costs about a minute of snoozes before the backoff.
const (
	handOnSnoozes = 10
	handOnWait    = time.Second
)

// snoozes is how many times River snoozed job (its metadata's "snoozes").
func snoozes(job *rivertype.JobRow) int {
	if job == nil || len(job.Metadata) == 0 {
		return 0
	}
	var md struct {
		Snoozes int `json:"snoozes"`
	}
	if json.Unmarshal(job.Metadata, &md) != nil {
		return handOnSnoozes // unreadable: no more snoozes, never endless ones
	}
	return md.Snoozes
}

// quarantineWait is how long a job waits out a lease store's quarantine:
// until its end (by Redis's clock, which this one may differ from), plus a
// little, and never less than a moment nor more than a long lease TTL.
func quarantineWait(qe *lease.QuarantineError, now time.Time) time.Duration {
	const least, most = 250 * time.Millisecond, 15 * time.Minute
	if qe.Until.IsZero() {
		return time.Second
	}
	return min(max(qe.Until.Sub(now)+least, least), most)
}

// startJob is the start every run job shares: the sync's definition, the
// same as the one of the process that queued the job (queued, its
// fingerprint: drift.go; check, when set, refuses one this job cannot run),
// not paused, assembled.
// A failure is recorded as the sync's; a paused sync returns errSyncPaused.
func (s *Service) startJob(ctx context.Context, syncID, queued string, attempt int, check func(*config.Sync) error) (*config.Sync, *app.Built, error) {
	sc, ok := s.cfg.Sync(syncID)
	if !ok {
		err := s.missingSync(fmt.Sprintf("sync %q", syncID))
		s.recordFailure(ctx, syncID, attempt, err)
		return nil, nil, err
	}
	if err := s.checkDrift(sc, queued); err != nil {
		s.recordFailure(ctx, sc.ID, attempt, err)
		return nil, nil, err
	}
	if check != nil {
		if err := check(sc); err != nil {
			s.recordFailure(ctx, sc.ID, attempt, err)
			return nil, nil, err
		}
	}
	row, err := s.st.GetSync(ctx, sc.ID)
	switch {
	case err == nil && row.State == store.SyncPaused:
		s.log.Info("sync is paused; run not started", "sync", sc.ID)
		return nil, nil, errSyncPaused
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, nil, failure.Wrap(failure.StoreUnavailable, err, "read sync %s", sc.ID)
	}
	built, err := app.Build(s.cfg, sc, s.buildOptions(sc))
	if err != nil {
		ferr := buildFailure(err)
		s.recordFailure(ctx, sc.ID, attempt, ferr)
		return nil, nil, ferr
	}
	return sc, built, nil
}

// runSync executes one run of args.SyncID.
func (s *Service) runSync(ctx context.Context, args RunSyncArgs, attempt int) error {
	_, built, err := s.startJob(ctx, args.SyncID, args.Config, attempt, nil)
	if err != nil {
		return err
	}
	defer built.Close()
	pw := s.watchPause(ctx, args.SyncID)
	run, runErr := runner.Run(ctx, runner.Params{
		Store:        s.st,
		Leases:       s.leases,
		Source:       built.Source,
		Destination:  built.Destination,
		Clock:        s.clock,
		Logger:       s.log.With("reason", args.Reason, "attempt", attempt, "resend", args.Resend),
		Sync:         built.Sync,
		Secrets:      s.cfg.SecretValues(),
		Resend:       args.Resend,
		ResendBefore: args.ResendBefore,
		LeaseTTL:     s.cfg.Settings.LeaseTTL,
		LeaseRenew:   s.cfg.Settings.LeaseRenew,
		InDoubtGrace: s.cfg.Settings.InDoubtGrace,
		Attempt:      attempt,
		Drain:        pw.drain,
		DrainDetail:  pw.detail,
		// The breaker after every failed run (docs/guide.md#guardrails), as a foreground run.
		AfterFailure: func(ctx context.Context, r store.Run) { s.afterFailure(ctx, r.SyncID) },
	})
	pw.stop()
	s.metrics.runFinished(built.Sync.ID, run, runErr)
	s.runEnded(ctx, run)
	return runErr
}

// insertRecorder counts inserted runs and records a failed run for every run
// whose job could not be inserted, whoever inserted it (a schedule on the
// leader, Enqueue, recovery): docs/guide.md#running-on-a-schedule-serve-and-worker's enqueue-time failures.
type insertRecorder struct {
	river.JobInsertMiddlewareDefaults
	s *Service
}

// InsertMany implements rivertype.JobInsertMiddleware.
func (m *insertRecorder) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	res, err := doInner(ctx)
	if err != nil {
		for _, p := range params {
			if args, ok := runArgs(p.Kind, p.Args, p.EncodedArgs); ok {
				m.s.recordFailure(ctx, args.SyncID, 0, failure.Wrap(failure.StoreUnavailable, err, "the run could not be queued"))
			}
		}
		return res, &recordedError{err: err}
	}
	for _, r := range res {
		if r == nil || r.Job == nil || r.UniqueSkippedAsDuplicate {
			continue
		}
		if args, ok := runArgs(r.Job.Kind, nil, r.Job.EncodedArgs); ok {
			m.s.metrics.enqueued.WithLabelValues(args.Reason).Inc()
		}
	}
	return res, nil
}

// runArgs extracts RunSyncArgs from a job of a run of a sync: KindRunSync,
// or KindRunPartitioned (the coordinator of a partitioned run).
func runArgs(kind string, args any, encoded []byte) (RunSyncArgs, bool) {
	if kind != KindRunSync && kind != KindRunPartitioned {
		return RunSyncArgs{}, false
	}
	switch a := args.(type) {
	case RunSyncArgs:
		return a, true
	case RunPartitionedArgs:
		return RunSyncArgs{SyncID: a.SyncID, Reason: a.Reason, Config: a.Config}, true
	}
	var a RunSyncArgs
	if err := json.Unmarshal(encoded, &a); err != nil || a.SyncID == "" {
		return RunSyncArgs{}, false
	}
	return a, true
}

// recordedError marks an insert failure already recorded as a failed run.
type recordedError struct{ err error }

func (e *recordedError) Error() string { return e.err.Error() }
func (e *recordedError) Unwrap() error { return e.err }
