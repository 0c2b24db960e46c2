package deadman

import (
	"context"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/robfig/cron/v3"

	"github.com/oncesync/oncesync/internal/config"
)

// JobKind is the River job kind of the dead-man check.
const JobKind = "oncesync_deadman_check"

// Schedule is the check's cron schedule: every hour at minute 13 (docs/guide.md#telling-silence-from-outside),
// in the leader's local time zone like the syncs' schedules.
const Schedule = "13 * * * *"

// JobTimeout bounds one check (it reads one query and sends a few alerts;
// the queue's own default is no timeout at all).
const JobTimeout = 5 * time.Minute

// JobArgs is one dead-man check.
type JobArgs struct{}

// Kind implements river.JobArgs.
func (JobArgs) Kind() string { return JobKind }

// InsertOpts implements river.JobArgsWithInsertOpts: at most one check per
// hour (a leader elected mid-hour does not add a second one), retried twice
// when the store is down.
func (JobArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: 3,
		UniqueOpts: river.UniqueOpts{
			ByPeriod: time.Hour,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStateCompleted, rivertype.JobStatePending,
				rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled,
			},
		},
	}
}

// Worker works JobArgs with a Checker.
type Worker struct {
	river.WorkerDefaults[JobArgs]
	checker *Checker
}

// NewWorker returns the worker of checker.
func NewWorker(checker *Checker) *Worker { return &Worker{checker: checker} }

// Work implements river.Worker: one Check.
func (w *Worker) Work(ctx context.Context, _ *river.Job[JobArgs]) error {
	_, err := w.checker.Check(ctx)
	return err
}

// Timeout implements river.Worker.
func (w *Worker) Timeout(*river.Job[JobArgs]) time.Duration { return JobTimeout }

// Register adds the dead-man worker to workers. Every process that works
// the queue may register it; only the leader enqueues the job (PeriodicJob).
func Register(workers *river.Workers, checker *Checker) {
	river.AddWorker(workers, NewWorker(checker))
}

// CronSchedule is Schedule parsed (standard 5-field cron).
func CronSchedule() cron.Schedule {
	s, err := config.ParseSchedule(Schedule)
	if err != nil { // a constant: cannot happen
		panic("deadman: bad schedule " + Schedule + ": " + err.Error())
	}
	return s
}

// PeriodicJob is the check's River periodic job, for river.Config.PeriodicJobs
// of a client whose leader election is enabled: River enqueues periodic jobs
// on the elected leader only.
//
// Its ticks, unlike a check queued by hand, are not refused by a completed
// check of the same hour: after the wall clock stepped back, the hours it
// replays were checked already, and the check must go on (the markers keep
// alerts to one per incident whatever the number of checks). A tick is
// still refused while a check of its hour waits or runs.
//
// queue is the River queue the checks go to ("" for River's default): one
// that runs cannot fill, or a check waits behind runs that never end.
func PeriodicJob(queue string) *river.PeriodicJob {
	return river.NewPeriodicJob(CronSchedule(),
		func() (river.JobArgs, *river.InsertOpts) {
			return JobArgs{}, &river.InsertOpts{Queue: queue, UniqueOpts: tickUnique()}
		},
		&river.PeriodicJobOpts{ID: JobKind})
}

// tickUnique is JobArgs' uniqueness without the completed state.
func tickUnique() river.UniqueOpts {
	u := JobArgs{}.InsertOpts().UniqueOpts
	u.ByState = slices.DeleteFunc(slices.Clone(u.ByState), func(s rivertype.JobState) bool { return s == rivertype.JobStateCompleted })
	return u
}
