package queue

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/robfig/cron/v3"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// A leader computes its syncs' next ticks from the moment it starts to
// lead: a tick that fell while no serve led (a restart, a leader that died
// just before it and the election that followed) was lost, and a daily
// sync went 48 h without a run. A serve that becomes the leader therefore
// runs, once, every scheduled sync whose last tick passed with no run of
// it since (docs/guide.md#running-on-a-schedule-serve-and-worker), and
// again every hour, for a tick lost any other way.

// KindCatchUp is the catch-up of lost ticks.
const KindCatchUp = "oncesync_catch_up"

// CatchUpEvery is how often the catch-up runs besides a leader's start.
const CatchUpEvery = time.Hour

// CatchUpArgs is one catch-up.
type CatchUpArgs struct{}

// Kind implements river.JobArgs.
func (CatchUpArgs) Kind() string { return KindCatchUp }

// InsertOpts implements river.JobArgsWithInsertOpts: one at a time, not
// retried (the next one comes within the hour), on QueueV2 (older workers
// would discard it).
func (CatchUpArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueV2, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

func (s *Service) catchUpPeriodicJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(CatchUpEvery),
		func() (river.JobArgs, *river.InsertOpts) { return CatchUpArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}

type catchUpWorker struct {
	river.WorkerDefaults[CatchUpArgs]
	s *Service
}

// Work implements river.Worker.
func (w *catchUpWorker) Work(ctx context.Context, _ *river.Job[CatchUpArgs]) error {
	_, err := w.s.CatchUp(ctx)
	return err
}

// CatchUp queues a run of every scheduled sync whose last tick passed
// without a run of it since, and which was published before that tick; it
// returns their ids. Paused syncs are left alone. An `@every D` schedule
// counts from the leader's start, so a leader that restarts more often
// than D (a deploy every hour under `@every 6h`) would never run it: its
// last tick is taken to be D ago, and a sync with no run in that long is
// late.
func (s *Service) CatchUp(ctx context.Context) ([]string, error) {
	ar, ok := s.st.(store.ActivityReader)
	if !ok {
		return nil, nil
	}
	acts, err := ar.SyncActivity(ctx)
	if err != nil {
		return nil, failure.Wrap(failure.StoreUnavailable, err, "read the syncs' last runs")
	}
	byID := make(map[string]*store.Activity, len(acts))
	for i := range acts {
		byID[acts[i].SyncID] = &acts[i]
	}
	now := s.clock.Now()
	var (
		ids  []string
		jobs []river.JobArgs
	)
	for i := range s.cfg.Syncs {
		sc := &s.cfg.Syncs[i]
		a := byID[sc.ID]
		if sc.Schedule == "" || a == nil || a.State != store.SyncActive {
			continue
		}
		sched, err := config.ParseSchedule(sc.Schedule)
		if err != nil {
			continue
		}
		last, ok := lastTick(sched, now)
		if !ok || !a.ChangedAt.Before(last) || !a.LastRunAt.Before(last) {
			continue
		}
		args, _ := s.scheduledRun(sc)()
		if args == nil {
			continue
		}
		ids = append(ids, sc.ID)
		jobs = append(jobs, args)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	if _, err := s.b.insertMany(ctx, jobs); err != nil {
		return nil, failure.Wrap(failure.StoreUnavailable, err, "queue the runs of %d syncs whose tick was lost", len(jobs))
	}
	s.log.Warn("syncs whose last tick passed with no serve leading were queued now", "syncs", len(ids))
	return ids, nil
}

// lastTick is the latest tick of sched at or before now (false when none
// within a year); an `@every D` schedule's is now less D (see CatchUp).
func lastTick(sched cron.Schedule, now time.Time) (time.Time, bool) {
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		return now.Add(-every.Delay), every.Delay > 0
	}
	for _, back := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 8 * 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour} {
		t := sched.Next(now.Add(-back))
		if t.IsZero() {
			return time.Time{}, false
		}
		if t.After(now) {
			continue
		}
		for {
			n := sched.Next(t)
			if n.IsZero() || n.After(now) {
				return t, true
			}
			t = n
		}
	}
	return time.Time{}, false
}
