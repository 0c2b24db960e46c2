package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/testenv"
)

// The short chaos subset that runs in `make test` (about two minutes, in
// parallel): kill9-foreground, zombie, a two-minute workers-kill9 on
// PostgreSQL + Redis with a 5 s lease, and the two quick ones of issue 13
// (rejected-then-accepted, async-import-faults, seconds each);
// workers_sigterm_test.go adds a short workers-sigterm (about 20 s, in
// parallel with them). `make chaos` runs the full set.

var binary string

func TestMain(m *testing.M) { testenv.Main(m, &binary) }

// setup returns an env for scenario name with a fixed seed; the scenario's
// progress goes to the test log.
func setup(t *testing.T, name string) *env {
	t.Helper()
	o := options{
		Short: true, Seed: 20261201, Bin: binary, Duration: time.Minute, Flips: true,
		DBURL:    testenv.DatabaseURL(),
		RedisURL: testenv.RedisURL(),
	}
	e, err := newEnv(context.Background(), envParams{Options: o, Name: name, Log: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if dir := e.close(t.Failed()); dir != "" {
			t.Logf("work dir kept: %s", dir)
		}
	})
	return e
}

// tlog writes progress lines to the test log.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// finish judges row, skips on errSkip (fails in CI), and fails on any problem.
func finish(t *testing.T, row *Row, err error) *Row {
	t.Helper()
	if errors.Is(err, errSkip) {
		if os.Getenv("CI") != "" {
			t.Fatalf("in CI: %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	row.judge()
	var b bytes.Buffer
	printTable(&b, []*Row{row})
	t.Logf("\n%s", b.String())
	if !row.OK {
		t.Fatalf("scenario failed: %s", strings.Join(row.Problems, "; "))
	}
	if row.Delivered != row.Records || row.Lost != 0 || row.WrongValues != 0 || row.DuplicateWrites != 0 {
		t.Fatalf("records %d, delivered %d, lost %d, wrong values %d, duplicates %d", row.Records, row.Delivered, row.Lost, row.WrongValues, row.DuplicateWrites)
	}
	return row
}

func TestKill9Foreground(t *testing.T) {
	t.Parallel()
	row, err := kill9Foreground(context.Background(), setup(t, "kill9-foreground"))
	row = finish(t, row, err)
	if row.Kills != 4 {
		t.Fatalf("want 4 kills, got %d (the source is too small for the kill points?)", row.Kills)
	}
	if row.Runs != 5 {
		t.Fatalf("want 4 killed runs and a final one, got %d runs", row.Runs)
	}
	if len(row.Resume) != row.Kills {
		t.Fatalf("want a resume time per kill, got %d for %d kills", len(row.Resume), row.Kills)
	}
}

func TestZombie(t *testing.T) {
	t.Parallel()
	row, err := zombie(context.Background(), setup(t, "zombie"))
	row = finish(t, row, err)
	if row.Kills != 1 || len(row.Resume) == 0 {
		t.Fatalf("want one frozen worker whose syncs were taken over; kills %d, resume samples %d", row.Kills, len(row.Resume))
	}
}

// TestWorkersKill9TwoMinutes is issue 3's short version of workers-kill9:
// serve + 3 workers on PostgreSQL + Redis, 20 syncs on schedules, a worker
// SIGKILLed every 15-25 s and restarted, for 2 minutes, with a 5 s lease so
// the resumes settle quickly.
func TestWorkersKill9TwoMinutes(t *testing.T) {
	t.Parallel()
	e := setup(t, "workers-kill9")
	row := &Row{resumeGoal: 45 * time.Second}
	var err error
	if err = needPG(context.Background(), e); err == nil {
		err = runKillCluster(context.Background(), e, row, clusterParams{
			Syncs: 20, SingleEvery: 4, InitialRows: 300, AppendRows: 50, PageSize: 100, Workers: 3, Slots: 2,
			Settings: "{lease_ttl: 5s, lease_renew: 2s}", LeaseTTL: 5 * time.Second, SettleLimit: 90 * time.Second,
			Fake: fakebrevo.Options{Latency: 30 * time.Millisecond},
		}, 2*time.Minute, 15*time.Second, 25*time.Second)
	}
	row = finish(t, row, err)
	if row.Kills < 2 {
		t.Fatalf("want at least 2 kills, got %d", row.Kills)
	}
	if row.Runs == 0 {
		t.Fatal("no runs recorded in the store")
	}
}

// TestRejectedThenAccepted: 10 of 1,000 PostgreSQL rows refused for their
// content, then accepted: the next runs deliver them (issue 13 finding 4;
// a few seconds).
func TestRejectedThenAccepted(t *testing.T) {
	t.Parallel()
	row, err := rejectedThenAccepted(context.Background(), setup(t, "rejected-then-accepted"))
	finish(t, row, err)
}

// TestAsyncImportFaults: imports that skip rows and fail whole; nothing
// counted written that was not applied, everything delivered in the end
// (issue 13 finding 2; a few seconds).
func TestAsyncImportFaults(t *testing.T) {
	t.Parallel()
	row, err := asyncImportFaults(context.Background(), setup(t, "async-import-faults"))
	finish(t, row, err)
}

func TestRowJudge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		row  Row
		ok   bool
	}{
		{"clean", Row{Records: 10, Delivered: 10}, true},
		{"duplicate", Row{Records: 10, Delivered: 10, DuplicateWrites: 1}, false},
		{"lost", Row{Records: 10, Delivered: 9, Lost: 1}, false},
		{"wrong values", Row{Records: 10, Delivered: 9, WrongValues: 1}, false},
		{"nothing checked", Row{}, false},
		{"skipped", Row{Skipped: "no PostgreSQL"}, true},
		{"problem", Row{Records: 1, Delivered: 1, Problems: []string{"stuck run"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.row
			r.judge()
			if r.OK != tc.ok {
				t.Fatalf("OK = %v, want %v (problems %v)", r.OK, tc.ok, r.Problems)
			}
		})
	}
	r := Row{Records: 1, Delivered: 1, resumeGoal: 45 * time.Second,
		Resume: []time.Duration{time.Second, 2 * time.Second, 50 * time.Second}}
	r.judge()
	if r.ResumeP50 != 2 || r.ResumeMax != 50 || r.ResumeP95 != 50 || !strings.Contains(strings.Join(r.Notes, " "), "MISSED") {
		t.Fatalf("percentiles p50 %v p95 %v max %v, notes %v", r.ResumeP50, r.ResumeP95, r.ResumeMax, r.Notes)
	}
}

// TestSlowResume: a resume slower than the goal names its hit and the later
// hits of the same sync that came before its progress, and only those.
func TestSlowResume(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	first := killRecord{At: start.Add(10 * time.Second), Proc: "worker1", Syncs: []string{"a", "b"}}
	kills := []killRecord{
		first,
		{At: start.Add(40 * time.Second), Proc: "worker2", Syncs: []string{"a"}},
		{At: start.Add(50 * time.Second), Proc: "worker3", Syncs: []string{"b"}},
		{At: start.Add(90 * time.Second), Proc: "worker1", Syncs: []string{"a"}}, // after a's progress
	}
	got := slowResume(start, first, "a", 60*time.Second, kills)
	want := "sync a, worker1 hit at +10.0s, progressed 60.0 s later; hit again before it progressed: worker2 at +40.0s"
	if got != want {
		t.Fatalf("slowResume(a) =\n%s\nwant\n%s", got, want)
	}
	if got := slowResume(start, first, "b", 30*time.Second, kills); !strings.HasSuffix(got, "not hit again before it progressed") {
		t.Fatalf("slowResume(b) = %s", got)
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--scenario", "nope"}, &out, &errb); code != 2 {
		t.Fatalf("unknown scenario: exit %d, want 2: %s", code, errb.String())
	}
	if code := run(context.Background(), []string{"--duration", "1s"}, &out, &errb); code != 2 {
		t.Fatalf("short duration: exit %d, want 2", code)
	}
	got, err := selectScenarios("zombie, kill9-foreground")
	if err != nil || len(got) != 2 || got[0].Name != "zombie" || got[1].Name != "kill9-foreground" {
		t.Fatalf("selectScenarios: %v %v", got, err)
	}
}

// TestRunStartedAfter: pauses tells a thawed worker's new run (a lease of
// its own) from its frozen one by the worker's "run started" lines.
func TestRunStartedAfter(t *testing.T) {
	log := `time=2026-12-04T22:52:14.042Z level=INFO msg="run started" reason=schedule sync=s-p00 run=133 fence=26
time=2026-12-04T22:52:27.498Z level=WARN msg="run ended" sync=s-p00 run=133 fence=26 state=failed code=lease_lost
time=2026-12-04T22:52:28.000Z level=INFO msg="run started" reason=schedule sync=s-p001 run=140 fence=28
time=2026-12-04T22:52:29.027Z level=INFO msg="run started" reason=schedule sync=s-p00 run=143 fence=29`
	thawed := time.Date(2026, 12, 4, 22, 52, 27, 400_000_000, time.UTC)
	at, ok := runStartedAfter(log, "s-p00", thawed)
	if want := time.Date(2026, 12, 4, 22, 52, 29, 27_000_000, time.UTC); !ok || !at.Equal(want) {
		t.Fatalf("runStartedAfter = %v %v, want %v", at, ok, want)
	}
	if _, ok := runStartedAfter(log, "s-p02", thawed); ok {
		t.Fatal("a run of another sync was taken for one of s-p02")
	}
}
