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
		return runArgsFor(sc, ReasonSchedule), nil
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
