package queue

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// steppedTime is River's wall clock in a test: the machine's wall time moved
// by an offset a test can step, as ntpd or chrony steps a machine's clock.
// Its times carry no monotonic reading, so River's arithmetic on them is
// wall-clock arithmetic, as it is on cron ticks (robfig/cron builds them
// with time.Date) whatever the machine.
type steppedTime struct {
	mu     sync.Mutex
	offset time.Duration
}

func (s *steppedTime) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Round(0).Add(s.offset)
}

func (s *steppedTime) NowOrNil() *time.Time { now := s.Now(); return &now }

func (s *steppedTime) step(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
}

// TestSchedulesSurviveABackwardClockStep: the wall clock of a leading
// serve steps back an hour (a VM whose clock ran ahead, set right by NTP).
// The sync's schedule and the recovery sweep go on ticking within seconds.
// Before, River's enqueuer slept until the wall clock was back at the tick
// it had computed before the step: no scheduled run, no sweep, no dead-man
// check and no prune for an hour.
func TestSchedulesSurviveABackwardClockStep(t *testing.T) {
	t.Parallel()
	tb := setupClockStep(t, "@every 1s")
	ctx, wall, rb := t.Context(), tb.wall, tb.rb
	sweeps, runs := tb.sweeps, func() int { return tb.runs("a") }
	eventually(t, 30*time.Second, "the first scheduled run and sweep", func() bool { return runs() > 0 && sweeps() > 0 })

	wall.step(-time.Hour)
	time.Sleep(time.Second) // what was due before the step
	r0, s0 := runs(), sweeps()
	// 2 runs of an every-second schedule take about 2 s; the rest of the
	// window is for a loaded machine (make test beside make chaos once saw
	// none in 6 s).
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && (runs() < r0+2 || sweeps() < s0+2) {
		time.Sleep(50 * time.Millisecond)
	}
	if r, s := runs(), sweeps(); r < r0+2 || s < s0+2 {
		var jobs []string
		if res, err := rb.client.JobList(ctx, river.NewJobListParams().Kinds(KindRunSync).First(100)); err == nil {
			for _, j := range res.Jobs {
				jobs = append(jobs, fmt.Sprintf("%d %s attempt %d scheduled %s errors %v", j.ID, j.State, j.Attempt,
					j.ScheduledAt.Sub(wall.Now()).Round(time.Millisecond), j.Errors))
			}
		}
		t.Fatalf("in the 15 s after the wall clock stepped back an hour: %d scheduled runs (every 1 s) and %d recovery sweeps (every 300 ms), want 2 of each at least; run jobs (scheduled relative to now):\n%s",
			r-r0, s-s0, strings.Join(jobs, "\n"))
	}

	// A step back over time this process already swept: the sweeps of the
	// replayed periods are not refused as duplicates of the completed
	// ones (before, the sweep stopped until the clock left the periods it
	// had already swept, an hour for a step of an hour).
	// The step (9 s) is longer than the window given to the sweeps (6 s,
	// for a loaded machine: 3 sweeps take about 1 s), so a sweep that
	// waits for the clock to leave the replayed periods still fails.
	time.Sleep(10 * time.Second)
	wall.step(-9 * time.Second)
	time.Sleep(500 * time.Millisecond)
	s1 := sweeps()
	deadline = time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) && sweeps() < s1+3 {
		time.Sleep(50 * time.Millisecond)
	}
	if s := sweeps(); s < s1+3 {
		t.Fatalf("in the 6 s after the wall clock stepped back 9 s into periods already swept: %d recovery sweeps (every 300 ms), want 3 at least", s-s1)
	}
}

// discard is an alert notifier that keeps nothing.
type discard struct{}

func (discard) Notify(_ context.Context, a alert.Alert) (alert.Alert, error) { return a, nil }

// TestDeadmanCheckRunsInAnHourTheClockReplays: the dead-man check of
// hh:13 runs after the wall clock stepped back into an hour that was
// already checked before the step. Before, River refused it as a duplicate
// of the completed check of that hour: no check until the clock left the
// hours it replays, and the fallback's record, stamped before the step,
// looked fresh as long.
func TestDeadmanCheckRunsInAnHourTheClockReplays(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	cfg := &config.Config{
		Path:     filepath.Join(dir, "oncesync.yaml"),
		Store:    "sqlite://./oncesync.db",
		Settings: config.Settings{LeaseTTL: 30 * time.Second, LeaseRenew: 10 * time.Second, LedgerRetention: time.Hour, BreakerFailures: 5},
	}
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: filepath.Join(dir, "oncesync.db"), Clock: clock.Real{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	checker, err := deadman.New(deadman.Params{Store: st, Markers: st, Notifier: discard{}})
	if err != nil {
		t.Fatal(err)
	}
	// The wall clock reads hh:12:45: this hour's check is 15 s away.
	now := time.Now()
	wall := &steppedTime{offset: now.Truncate(time.Hour).Add(12*time.Minute + 45*time.Second).Sub(now)}
	svc, err := New(ctx, Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Scheduler: true, Deadman: checker,
		FetchPollInterval: 50 * time.Millisecond, riverTime: wall, clockWatch: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := svc.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	rb := svc.b.(*riverBackend[*sql.Tx])
	checks := func() int {
		res, err := rb.client.JobList(ctx, river.NewJobListParams().Kinds(deadman.JobKind).States(rivertype.JobStateCompleted))
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Jobs)
	}
	eventually(t, 40*time.Second, "this hour's check", func() bool { return checks() == 1 })

	// The clock steps back to hh:12:58 of the same hour.
	w := wall.Now()
	wall.step(w.Truncate(time.Hour).Add(13*time.Minute - 2*time.Second).Sub(w))
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) && checks() < 2 {
		time.Sleep(50 * time.Millisecond)
	}
	if n := checks(); n < 2 {
		t.Fatalf("%d dead-man checks completed 8 s after the wall clock stepped back to 2 s before hh:13, want 2", n)
	}
}

// clockStepBundle is a leading serve whose River reads a wall clock the
// test steps: sync "a" on a schedule, sync "b" without one.
type clockStepBundle struct {
	t    *testing.T
	svc  *Service
	st   *sqlite.Store
	rb   *riverBackend[*sql.Tx]
	wall *steppedTime
}

func setupClockStep(t *testing.T, schedule string) *clockStepBundle {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	for _, f := range []string{"a.csv", "b.csv"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("id,email\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	sync := func(id, schedule string) config.Sync {
		return config.Sync{ID: id, Workspace: "w", Schedule: schedule,
			Source:      config.Source{Type: "csv", Spec: &file.Config{Path: id + ".csv"}, PageSize: 10, Identity: "id"},
			Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: hook.URL}, Mode: "single", Concurrency: 1, Timeout: time.Second}}
	}
	cfg := &config.Config{
		Path:     filepath.Join(dir, "oncesync.yaml"),
		Store:    "sqlite://./oncesync.db",
		Settings: config.Settings{LeaseTTL: 30 * time.Second, LeaseRenew: 10 * time.Second, LedgerRetention: time.Hour, BreakerFailures: 5},
		Syncs:    []config.Sync{sync("a", schedule), sync("b", "")},
	}
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: filepath.Join(dir, "oncesync.db"), Clock: clock.Real{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	wall := &steppedTime{}
	svc, err := New(ctx, Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Scheduler: true,
		FetchPollInterval: 50 * time.Millisecond, RecoveryInterval: 300 * time.Millisecond,
		riverTime: wall, clockWatch: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := svc.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &clockStepBundle{t: t, svc: svc, st: st, rb: svc.b.(*riverBackend[*sql.Tx]), wall: wall}
}

// sweeps counts the completed recovery sweeps.
func (tb *clockStepBundle) sweeps() int {
	res, err := tb.rb.client.JobList(tb.t.Context(), river.NewJobListParams().Kinds(KindRecover).States(rivertype.JobStateCompleted).First(10000))
	if err != nil {
		tb.t.Fatal(err)
	}
	return len(res.Jobs)
}

// runs counts the recorded runs of syncID.
func (tb *clockStepBundle) runs(syncID string) int {
	rs, err := tb.st.ListRuns(tb.t.Context(), syncID, 0)
	if err != nil {
		tb.t.Fatal(err)
	}
	return len(rs)
}

// TestATickQueuedAcrossTheStepIsReleased: River's enqueuer computed a tick
// before the wall clock stepped back an hour and inserted its job just after
// the leader had released the waiting jobs: scheduled an hour away, it kept
// the sync's later ticks out for that hour (the sync's unique job). The
// leader releases the jobs due further than the step away again, a second
// and five seconds later.
func TestATickQueuedAcrossTheStepIsReleased(t *testing.T) {
	t.Parallel()
	tb := setupClockStep(t, "")
	eventually(t, 30*time.Second, "the first sweep", func() bool { return tb.sweeps() > 0 })
	tb.wall.step(-time.Hour)
	time.Sleep(500 * time.Millisecond) // the step seen and handled (every 100 ms)
	sc := &tb.svc.cfg.Syncs[1]
	at := tb.wall.Now().Add(time.Hour) // the tick as computed before the step
	if _, err := tb.rb.client.Insert(t.Context(), tb.svc.runArgsFor(sc, ReasonSchedule), &river.InsertOpts{ScheduledAt: at}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a run of the tick queued across the step", func() bool { return tb.runs("b") > 0 })
}
