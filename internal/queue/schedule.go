package queue

import (
	"context"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
)

// pausedTTL is how long one read of the paused syncs serves the leader's
// constructors. River calls every due constructor of a tick one after the
// other, so one read serves the whole tick; the next tick (a minute later
// for a cron schedule) reads again. A run a stale read lets through is still
// refused by its worker, which reads the sync's state before it starts.
const pausedTTL = time.Second

// ticker is the leader's state across its constructors: the paused syncs
// (one query per tick, not one per sync) and the syncs whose definition
// built (validated once, at start or at their first tick, not every tick).
type ticker struct {
	mu       sync.Mutex
	paused   map[string]bool
	pausedAt time.Time // zero: never read
	valid    map[string]bool

	// stopValidate stops the start-up validation; validated is closed
	// when it has returned.
	stopValidate context.CancelFunc
	validated    chan struct{}
}

func newTicker() *ticker {
	return &ticker{valid: map[string]bool{}}
}

// isPaused reports whether syncID is paused, reading the paused syncs when
// the last read is older than pausedTTL. A store that cannot answer is
// logged once per read and pauses nothing, as a failed read of one sync
// did: the worker checks again.
func (s *Service) isPaused(ctx context.Context, syncID string) bool {
	t := s.ticker
	t.mu.Lock()
	defer t.mu.Unlock()
	now := s.clock.Now()
	if t.pausedAt.IsZero() || now.Sub(t.pausedAt) >= pausedTTL || now.Before(t.pausedAt) {
		ids, err := s.st.ListPausedSyncs(ctx)
		if err != nil {
			s.log.Warn("could not read the paused syncs; this tick's runs are queued and their workers check", "err", err)
		}
		t.paused = make(map[string]bool, len(ids))
		for _, id := range ids {
			t.paused[id] = true
		}
		t.pausedAt = now
	}
	return t.paused[syncID]
}

func (t *ticker) isValid(syncID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.valid[syncID]
}

func (t *ticker) setValid(syncID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.valid[syncID] = true
}

// scheduledRun is the periodic constructor of sc: it skips a paused sync and
// records an enqueue-time failure for a definition that cannot be built.
// A definition that built once is not built again at every tick: the
// config does not change while the process runs, and a run whose source
// changed since (a dropped column) fails at its worker's build, recorded
// with the same code.
func (s *Service) scheduledRun(sc *config.Sync) river.PeriodicJobConstructor {
	return func() (river.JobArgs, *river.InsertOpts) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.isPaused(ctx, sc.ID) {
			return nil, nil
		}
		if !s.ticker.isValid(sc.ID) {
			switch ferr := s.buildCheck(sc); {
			case ferr == nil:
				s.ticker.setValid(sc.ID)
			case !failure.Retryable(ferr):
				s.recordFailure(ctx, sc.ID, 0, ferr)
				return nil, nil
			}
			// A retryable problem: queued, its worker retries the build.
		}
		return s.runArgsFor(sc, ReasonSchedule), nil
	}
}

// startValidation builds every scheduled sync once, in the background, so
// that the first tick finds them validated. A sync that does not build is
// logged here and left to its ticks, which build it again and record the
// failed run (a source's server may be down now and up by then).
func (s *Service) startValidation(ctx context.Context) {
	ctx, s.ticker.stopValidate = context.WithCancel(context.WithoutCancel(ctx))
	s.ticker.validated = make(chan struct{})
	go func() {
		defer close(s.ticker.validated)
		for i := range s.cfg.Syncs {
			sc := &s.cfg.Syncs[i]
			if ctx.Err() != nil {
				return
			}
			if sc.Schedule == "" || s.ticker.isValid(sc.ID) {
				continue
			}
			if ferr := s.buildCheck(sc); ferr != nil {
				s.log.Warn("sync definition does not build; its scheduled runs fail until it does",
					"sync", sc.ID, "code", failure.CodeOf(ferr), "detail", failure.Detail(ferr))
				continue
			}
			s.ticker.setValid(sc.ID)
		}
	}()
}

// stopValidation stops the start-up validation and waits for it (or ctx).
func (s *Service) stopValidation(ctx context.Context) {
	if s.ticker.stopValidate == nil {
		return
	}
	s.ticker.stopValidate()
	select {
	case <-s.ticker.validated:
	case <-ctx.Done():
	}
}

// A backward step of the wall clock (NTP setting right a clock that ran
// ahead) stops River's periodic jobs: its enqueuer sleeps until the wall
// clock is back at the tick it computed before the step, so a step of H
// hours stops every schedule, the recovery sweep, the ledger prune and the
// dead-man check for H hours (docs/guide.md#running-on-a-schedule-serve-and-worker).
// The leader's process therefore compares the wall clock with the
// monotonic one, which no step moves, and gives River its periodic jobs
// again when the wall clock fell behind: their next ticks are then computed
// from the new time. A forward step needs nothing: River runs the ticks it
// finds past at once, once each per sync thanks to the jobs' uniqueness.
const (
	// clockWatchEvery is how often the wall clock is compared.
	clockWatchEvery = 10 * time.Second
	// clockStepTolerance is the backward step left to River: its ticks
	// come that much late.
	clockStepTolerance = 2 * time.Second
)

// clockStepAgain are the delays after a handled step past which the watch's
// next comparisons release the jobs due further than the step away once
// more: River's enqueuer may have computed a tick before the step and insert
// it (scheduled at that tick, a step away now) just after the first release
// read the jobs, and a sync's waiting job keeps its later ticks out for as
// long.
var clockStepAgain = [...]time.Duration{time.Second, 5 * time.Second}

// clockStepAgainMin is the least step released again (clockStepAgain): a
// job queued after the step and due further than the step away (a retry's
// backoff, 8 minutes at most by default) is not made due early, and a
// shorter step holds a raced tick out for less than itself.
const clockStepAgainMin = 10 * time.Minute

// wallNow is the wall clock River's schedules read, without its monotonic
// reading.
func (s *Service) wallNow() time.Time {
	if s.riverTime != nil {
		return s.riverTime.Now().Round(0)
	}
	return time.Now().Round(0)
}

// startClockWatch watches the wall clock until stopClockWatch.
func (s *Service) startClockWatch(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	s.stopWatch = func() { cancel(); <-done }
	every := s.clockWatch
	if every <= 0 {
		every = clockWatchEvery
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		prevWall, prevMono := s.wallNow(), time.Now()
		// again are the times (monotonic) of the releases that follow a
		// handled step (clockStepAgain), of the jobs due after againAfter.
		var (
			again      []time.Time
			againAfter time.Time
			againStep  time.Duration
		)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			wall, mono := s.wallNow(), time.Now()
			if len(again) > 0 && !mono.Before(again[0]) {
				again = again[1:]
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				n, err := s.b.releaseAfter(rctx, againAfter)
				cancel()
				switch {
				case err != nil:
					s.log.Warn("the wall clock stepped back; jobs queued just before it could not be made due", "step", againStep.Round(time.Second), "err", err)
				case n > 0:
					s.log.Warn("the wall clock stepped back; jobs queued just before it were made due", "step", againStep.Round(time.Second), "jobs_made_due", n)
				}
			}
			back := mono.Sub(prevMono) - wall.Sub(prevWall)
			prevWall, prevMono = wall, mono
			if back < clockStepTolerance {
				continue
			}
			jobs, err := s.periodicJobs()
			if err == nil {
				err = s.b.reschedule(jobs)
			}
			// Jobs queued before the step wait for their time on the old
			// clock, and a sync's waiting job keeps its later ticks out:
			// those due further than the step away (they were due before
			// it, or within the wait they had) are made due now.
			released := 0
			after := wall.Add(back - clockStepTolerance)
			if err == nil {
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				released, err = s.b.releaseAfter(rctx, after)
				cancel()
			}
			if err == nil && back >= clockStepAgainMin {
				again, againAfter, againStep = nil, after, back
				for _, d := range clockStepAgain {
					again = append(again, mono.Add(d))
				}
			}
			if err != nil {
				s.log.Error("the wall clock stepped back; the schedules could not all be set again and wait for the clock", "step", back.Round(time.Second), "err", err)
				continue
			}
			s.log.Warn("the wall clock stepped back; schedules, recovery sweep, prune and dead-man check were set again from the new time",
				"step", back.Round(time.Second), "jobs_made_due", released)
		}
	}()
}

// stopClockWatch stops the watch started by startClockWatch, if any.
func (s *Service) stopClockWatch() {
	if s.stopWatch != nil {
		s.stopWatch()
	}
}
