package deadman_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/deadman"
)

// checkLogOf is the bundle's record of checks: the marker store's, as
// pipeline.Deadman wires it (Redis with Redis markers, else the store).
func checkLogOf(t *testing.T, tb *bundle) deadman.CheckLog {
	t.Helper()
	cl, ok := tb.markers.(deadman.CheckLog)
	if !ok {
		t.Fatalf("%T keeps no record of checks", tb.markers)
	}
	return cl
}

// TestCheckLog: a check is recorded unless a later or as recent one is;
// of concurrent claims on the same old record, exactly one wins.
func TestCheckLog(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		cl := checkLogOf(t, tb)
		lc, err := cl.LastDeadmanCheck(tb.ctx)
		if err != nil || !lc.At.IsZero() {
			t.Fatalf("fresh store: %+v %v, want no check", lc, err)
		}
		mark := func(at, notBefore time.Time, by string) bool {
			t.Helper()
			ok, err := cl.MarkDeadmanCheck(tb.ctx, at, notBefore, by)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !mark(t0, t0.Add(time.Nanosecond), "leader") {
			t.Fatal("the first check was not recorded")
		}
		if lc, _ := cl.LastDeadmanCheck(tb.ctx); !lc.At.Equal(t0) || lc.By != "leader" || lc.String() != ts(t0)+" by leader" {
			t.Fatalf("last check %+v (%s)", lc, lc)
		}
		// A claim 30 min later: the check of t0 is within 70 min.
		at := t0.Add(30 * time.Minute)
		if mark(at, at.Add(-deadman.FallbackAfter), "worker") {
			t.Fatal("claimed a check that was not due")
		}
		// The leader's next check is recorded whatever.
		if !mark(at, at.Add(time.Nanosecond), "leader") {
			t.Fatal("the leader's check was not recorded")
		}
		// 71 min after it, eight workers claim at once: one wins.
		at = at.Add(71 * time.Minute)
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			won int
		)
		for range 8 {
			wg.Go(func() {
				ok, err := cl.MarkDeadmanCheck(tb.ctx, at, at.Add(-deadman.FallbackAfter), "worker")
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d of 8 concurrent claims won, want 1", won)
		}
		if lc, _ := cl.LastDeadmanCheck(tb.ctx); !lc.At.Equal(at) || lc.By != "worker" {
			t.Fatalf("last check %+v, want the worker's", lc)
		}
	})
}

// TestWorkerFallback is docs/guide.md#telling-silence-from-outside's "let any worker run it when no leader has
// within the hour", on a fake clock: while the leader checks, workers do
// not; once it stopped, one of two workers runs the check (not both), it
// alerts the new silence once and does not repeat the old one.
func TestWorkerFallback(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		worker := func(name string) *deadman.Checker {
			p := tb.params
			p.Who = name
			c, err := deadman.New(p)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		w1, w2 := worker("worker one"), worker("worker two")
		due := func(c *deadman.Checker) (deadman.Report, bool) {
			t.Helper()
			rep, ran, err := c.CheckIfDue(tb.ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			return rep, ran
		}

		tb.sync(t, "early", "acme")
		tb.clk.Advance(2 * time.Hour)
		tb.sync(t, "late", "acme")
		tb.clk.Advance(23*time.Hour + 30*time.Minute) // early is silent, late is young
		rep := tb.check(t)                            // the leader's hourly check
		if v := tb.verdict(t, rep, deadman.ScopeSync, "early"); !v.Alerted {
			t.Fatalf("leader's check: early %+v, want alerted", v)
		}
		tb.rec.take()
		leaderAt := tb.clk.Now()

		// The leader stops. Within 70 minutes of its last check no worker
		// checks, however often they look.
		for range 13 {
			tb.clk.Advance(5 * time.Minute)
			if _, ran := due(w1); ran {
				t.Fatalf("a worker checked %s after the leader", tb.clk.Now().Sub(leaderAt))
			}
		}
		if got := tb.rec.take(); len(got) != 0 {
			t.Fatalf("alerts %+v before the fallback", got)
		}

		// 75 minutes after: both workers look at the same moment.
		tb.clk.Advance(10 * time.Minute)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			runs []deadman.Report
		)
		for _, w := range []*deadman.Checker{w1, w2} {
			wg.Go(func() {
				rep, ran, err := w.CheckIfDue(tb.ctx, 0)
				if err != nil {
					t.Error(err)
				}
				if ran {
					mu.Lock()
					runs = append(runs, rep)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(runs) != 1 {
			t.Fatalf("%d workers ran the check, want exactly 1", len(runs))
		}
		alerts := tb.rec.take()
		if len(alerts) != 1 || alerts[0].SyncID != "late" {
			t.Fatalf("alerts %+v, want one, for late (early was alerted by the leader)", alerts)
		}
		if v := tb.verdict(t, runs[0], deadman.ScopeSync, "early"); v.Status != deadman.StatusSilent || v.Alerted || v.Marker == nil {
			t.Errorf("early %+v, want still silent, marked, not alerted again", v)
		}
		lc, err := w1.LastCheck(tb.ctx)
		if err != nil || !lc.At.Equal(tb.clk.Now()) || (lc.By != "worker one (fallback)" && lc.By != "worker two (fallback)") {
			t.Fatalf("last check %+v %v", lc, err)
		}

		// The fallback's check counts as the last one: nobody repeats it
		// five minutes later.
		tb.clk.Advance(5 * time.Minute)
		if _, ran := due(w2); ran {
			t.Fatal("a worker repeated the fallback's check")
		}
		// The leader comes back: its check is recorded and runs.
		tb.check(t)
		if lc, _ := w1.LastCheck(tb.ctx); !lc.At.Equal(tb.clk.Now()) || lc.By != "" {
			t.Fatalf("last check %+v, want the leader's", lc)
		}
	})
}

// TestRunFallbackLoop: the loop a worker runs checks at its ticks when due.
func TestRunFallbackLoop(t *testing.T) {
	t.Parallel()
	tb := setup(t, flavours()[0], bundleOpts{})
	tb.sync(t, "s", "acme")
	tb.clk.Advance(25 * time.Hour) // silent, and no check ever recorded
	ticks := make(chan time.Time)  // unbuffered: a send returns once the loop took the tick
	done := make(chan struct{})
	go func() {
		defer close(done)
		tb.checker.RunFallback(tb.ctx, deadman.FallbackParams{Ticks: ticks})
	}()
	ticks <- tb.clk.Now()
	ticks <- tb.clk.Now() // the first tick's check is done once the loop takes this one
	close(ticks)
	<-done
	// The workspace's alert and the sync's, once: the second tick found the
	// first one's check recorded.
	if got := tb.rec.take(); len(got) != 2 || got[0].SyncID != "" || got[1].SyncID != "s" {
		t.Fatalf("alerts %+v, want the silent workspace's and sync's, once", got)
	}
}

// TestFallbackAfterClockStepBack: a check recorded by a clock that ran
// ahead (the machine's, before NTP stepped it back; or another machine's)
// does not hold the fallback off until that clock's time plus 70 min: its
// age cannot be told, so the fallback checks and records its own time. A
// record a few minutes ahead (clocks of two machines) still holds it off.
func TestFallbackAfterClockStepBack(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s", "acme")
		tb.clk.Set(t0.Add(3 * time.Hour))
		tb.check(t) // the leader's, its clock 2 h ahead
		tb.clk.Set(t0.Add(time.Hour + 5*time.Minute))
		rep, ran, err := tb.checker.CheckIfDue(tb.ctx, 0)
		if err != nil || !ran {
			t.Fatalf("CheckIfDue with the last check recorded 1h55m ahead: ran %v, %v; want it run", ran, err)
		}
		if len(rep.Verdicts) == 0 {
			t.Fatal("the fallback check judged nothing")
		}
		if lc, err := tb.checker.LastCheck(tb.ctx); err != nil || !lc.At.Equal(tb.clk.Now()) {
			t.Fatalf("last check %+v, %v; want the fallback's, at %s", lc, err, tb.clk.Now())
		}
		// A few minutes ahead: the clocks of two machines.
		tb.clk.Set(t0.Add(2 * time.Hour))
		tb.check(t)
		tb.clk.Set(t0.Add(2*time.Hour - 5*time.Minute))
		if _, ran, err := tb.checker.CheckIfDue(tb.ctx, 0); err != nil || ran {
			t.Fatalf("CheckIfDue with the last check recorded 5 min ahead: ran %v, %v; want not run", ran, err)
		}
	})
}

// TestRunFallbackFirstCheckIsNoWarning: on a new store no check was ever
// recorded, so the fallback's first tick runs one; that is no missed
// leader's check, and is not warned about as one. Once a check is recorded,
// a fallback that finds it overdue warns. (Seen on a new deployment: five
// minutes after serve first started, "no check was recorded for 1h10m0s; ...
// is the leader's hourly job running?", twelve seconds before the leader's
// first hourly check.)
func TestRunFallbackFirstCheckIsNoWarning(t *testing.T) {
	t.Parallel()
	tb := setup(t, flavours()[0], bundleOpts{})
	tb.sync(t, "s", "acme")
	var logs strings.Builder
	p := tb.params
	p.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := deadman.New(p)
	if err != nil {
		t.Fatal(err)
	}
	tick := func() {
		t.Helper()
		ticks := make(chan time.Time)
		done := make(chan struct{})
		go func() { defer close(done); c.RunFallback(tb.ctx, deadman.FallbackParams{Ticks: ticks}) }()
		ticks <- tb.clk.Now()
		ticks <- tb.clk.Now() // the first tick's check is done once the loop takes this one
		close(ticks)
		<-done
	}
	tb.clk.Advance(5 * time.Minute)
	tick()
	if lc, err := c.LastCheck(tb.ctx); err != nil || !lc.At.Equal(tb.clk.Now()) {
		t.Fatalf("last check %+v, %v; want the fallback's first", lc, err)
	}
	if strings.Contains(logs.String(), "no check was recorded") {
		t.Fatalf("the store's first check was warned about as a missed one:\n%s", logs.String())
	}
	tb.clk.Advance(deadman.FallbackAfter + time.Minute)
	tick()
	if !strings.Contains(logs.String(), "no check was recorded") {
		t.Fatalf("an overdue check was not warned about:\n%s", logs.String())
	}
}
