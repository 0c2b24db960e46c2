// Package queue runs syncs as River jobs (docs/guide.md#running-on-a-schedule-serve-and-worker): one job kind per run of a
// sync, cron schedules as River periodic jobs enqueued by the leader only,
// retries with a 60 s doubling backoff over 5 attempts, lease-expiry recovery
// of runs whose worker died, and the SIGTERM drain of every in-flight run.
//
// The queue lives next to the store: embedded mode (a sqlite:// store) keeps
// River's tables in a SQLite file beside the store's file (riversqlite), so
// several processes on one machine share the queue; a postgres:// store keeps
// them in the same database (riverpgxv5).
package queue

import (
	"math"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
)

// Job kinds.
const (
	// KindRunSync is one run of a sync.
	KindRunSync = "oncesync_run_sync"
	// KindRecover is the lease-expiry recovery sweep.
	KindRecover = "oncesync_recover"
)

// Reasons a run was enqueued.
const (
	ReasonSchedule = "schedule"
	ReasonManual   = "manual"
	ReasonRecovery = "recovery"
)

// Retry and shutdown timings (docs/guide.md#running-on-a-schedule-serve-and-worker).
const (
	// MaxAttempts is the number of attempts of a run before it is discarded.
	MaxAttempts = 5
	// BackoffBase is the wait after the first failed attempt; it doubles.
	BackoffBase = 60 * time.Second
	// BackoffJitter is the relative jitter of every backoff (±10 %).
	BackoffJitter = 0.10
	// StoreBackoffBase is the wait after a first failure of the store or
	// the lease (store_unavailable, lease_lost); it triples (10, 30, 90,
	// 270 s), never above the base of other failures.
	StoreBackoffBase = 10 * time.Second
	// DrainDeadline is the one shared deadline of every in-flight run to
	// checkpoint after SIGTERM; then their contexts are cancelled.
	DrainDeadline = 15 * time.Second
	// ExitDeadline is when the process exits after SIGTERM, whatever runs.
	ExitDeadline = 25 * time.Second
	// RecoveryInterval is how often the leader sweeps for dead runs.
	RecoveryInterval = 10 * time.Second
	// RescueStuckJobsAfter is River's own stuck-job rescue: a backstop far
	// above the longest run, never the first line (lease-expiry recovery is).
	RescueStuckJobsAfter = 24 * time.Hour
)

// RunSyncArgs is one run of a sync. Jobs are unique per sync while one is
// pending, scheduled, available, running or retryable: a schedule tick while
// the sync's previous run is still queued or retrying adds nothing.
type RunSyncArgs struct {
	SyncID string `json:"sync_id" river:"unique"`
	// Reason is why the run was enqueued: schedule, manual or recovery.
	Reason string `json:"reason"`
	// Resend writes every record again (runner.Params.Resend); ResendBefore
	// is the first run id the request came before, so that every attempt
	// of the job resumes the same resend (runner.Params.ResendBefore).
	Resend       bool  `json:"resend,omitempty"`
	ResendBefore int64 `json:"resend_before,omitempty"`
	// Config is the sync's fingerprint in the config of the process that
	// queued the run (drift.go); a worker whose config differs refuses it.
	Config string `json:"config,omitempty"`
}

// Kind implements river.JobArgs.
func (RunSyncArgs) Kind() string { return KindRunSync }

// QueueV2 is the River queue of jobs a worker of an oncesync older than
// 2026-12-05 would misread or not know: a resend (it ignores the resend
// fields, runs an ordinary run and completes the job) and the catch-up of
// lost ticks (it has no worker for it and discards it). Those workers poll
// only River's default queue, so during a rolling upgrade they never take
// these jobs; every worker from this version on polls both
// (docs/guide.md#upgrading-oncesync). A later job kind or argument that
// this version would misread goes to a queue of its own the same way.
// Uniqueness does not depend on the queue: a resend and an ordinary run of
// one sync are still one job.
const QueueV2 = "oncesync_v2"

// QueueControl is the River queue of the jobs that watch the runs: the
// recovery sweep, the ledger prune and the dead-man check. Each process
// works it in ControlWorkers slots of its own, beside the runs' --workers:
// on the runs' queue, runs whose source never answered (a stalled pipe, a
// query sleeping forever) held every slot, and the sweep and serve's own
// dead-man check waited behind them for good (an independent check,
// 2026-12-06). A worker older than this queue does not poll it; the
// leader, which queues these jobs, does.
const QueueControl = "oncesync_control"

// ControlWorkers is how many QueueControl jobs a process works at once.
const ControlWorkers = 2

// InsertOpts implements river.JobArgsWithInsertOpts.
func (a RunSyncArgs) InsertOpts() river.InsertOpts {
	queue := river.QueueDefault
	if a.Resend {
		queue = QueueV2
	}
	return river.InsertOpts{
		Queue:       queue,
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

// RecoverArgs is the lease-expiry recovery sweep (docs/guide.md#running-on-a-schedule-serve-and-worker).
type RecoverArgs struct{}

// Kind implements river.JobArgs.
func (RecoverArgs) Kind() string { return KindRecover }

// InsertOpts implements river.JobArgsWithInsertOpts: one sweep at a time, and
// a failed sweep is not retried (the next one comes within RecoveryInterval).
func (RecoverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueControl,
		MaxAttempts: 1,
		UniqueOpts: river.UniqueOpts{
			ByArgs: true,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
				rivertype.JobStateScheduled,
			},
		},
	}
}

// Backoff is the wait before the attempt after attempt (1-based): base
// after the first, doubling (with the default base of 60 s: 60, 120, 240,
// 480 s), each ±10 % by rnd, which returns a value in [0, 1). A base <= 0 is
// BackoffBase.
func Backoff(attempt int, base time.Duration, rnd func() float64) time.Duration {
	if base <= 0 {
		base = BackoffBase
	}
	return grow(attempt, base, 2, 20, rnd)
}

// grow is base multiplied by factor once per attempt after the first (at
// most maxSteps times), ±BackoffJitter by rnd.
func grow(attempt int, base time.Duration, factor float64, maxSteps int, rnd func() float64) time.Duration {
	d := float64(base) * math.Pow(factor, float64(min(max(attempt, 1)-1, maxSteps)))
	return time.Duration(d * (1 + BackoffJitter*(2*rnd()-1)))
}

// retryPolicy is River's ClientRetryPolicy from Backoff.
type retryPolicy struct {
	clock clock.Clock
	base  time.Duration
	rnd   func() float64
}

// NextRetry implements river.ClientRetryPolicy. The backoff follows the
// job's failed attempts: an attempt whose worker died and that the
// recovery handed back (rescueNote) is no failure of the sync's, so it
// does not lengthen the wait (a sync whose workers were killed twice waited
// 4 and then 8 minutes after its next failures: an independent check,
// 2026-12-06).
//
// A run that failed because the store or the lease store did not serve it
// (the runner's storeFailure) wrote nothing it cannot resume from its
// checkpoint, and such an outage is most often a restart or a failover of
// seconds: its retry comes after StoreBackoffBase, tripling. With the minute of other
// failures, a store restarted in a second held a sync back 56 to 92 s (an
// independent check, 2026-12-07).
func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	n := failedAttempts(job)
	if storeFailed(job) {
		base := p.base
		if base <= 0 {
			base = BackoffBase
		}
		return p.clock.Now().Add(grow(n, min(base, StoreBackoffBase), 3, 12, p.rnd))
	}
	return p.clock.Now().Add(Backoff(n, p.base, p.rnd))
}

// storeFailed reports whether job's last attempt failed with
// store_unavailable or lease_lost (its error, as River recorded it, starts
// with the code).
func storeFailed(job *rivertype.JobRow) bool {
	if len(job.Errors) == 0 {
		return false
	}
	code, _, _ := strings.Cut(job.Errors[len(job.Errors)-1].Error, ":")
	return code == string(failure.StoreUnavailable) || code == string(failure.LeaseLost)
}

// failedAttempts is job's attempts less those the recovery handed back.
func failedAttempts(job *rivertype.JobRow) int {
	n := job.Attempt
	for _, e := range job.Errors {
		if e.Error == rescueNote {
			n--
		}
	}
	return max(n, 1)
}
