package deadman_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
)

func TestScheduleFiresAtMinute13(t *testing.T) {
	t.Parallel()
	at := func(day, h, m int) time.Time { return time.Date(2026, 3, day, h, m, 0, 0, time.UTC) }
	tests := []struct {
		from, want time.Time
	}{
		{at(3, 10, 5), at(3, 10, 13)},
		{at(3, 10, 13), at(3, 11, 13)},
		{at(3, 10, 12).Add(59 * time.Second), at(3, 10, 13)},
		{at(3, 10, 14), at(3, 11, 13)},
		{at(3, 23, 30), at(4, 0, 13)},
	}
	sched := deadman.CronSchedule()
	for _, tt := range tests {
		if got := sched.Next(tt.from); !got.Equal(tt.want) {
			t.Errorf("Next(%s) = %s, want %s", tt.from.Format("15:04:05"), got, tt.want)
		}
	}
	if deadman.PeriodicJob("") == nil {
		t.Fatal("PeriodicJob() = nil")
	}
}

// TestRegisteredWorkerRunsTheCheck works a dead-man job through a real River
// client (SQLite driver) whose config carries the periodic job, and checks
// that a second job in the same hour is refused as a duplicate.
func TestRegisteredWorkerRunsTheCheck(t *testing.T) {
	t.Parallel()
	tb := setup(t, flavours()[0], bundleOpts{})
	tb.sync(t, "s1", "acme")
	tb.clk.Advance(25 * time.Hour)

	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "queue.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(tb.ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	deadman.Register(workers, tb.checker)
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}},
		Workers:           workers,
		PeriodicJobs:      []*river.PeriodicJob{deadman.PeriodicJob("")},
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer cancel()
	if err := client.Start(tb.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})

	res, err := client.Insert(tb.ctx, deadman.JobArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Kind != river.EventKindJobCompleted || ev.Job.ID != res.Job.ID || ev.Job.Kind != deadman.JobKind {
			t.Fatalf("event %s for job %d (%s), want job %d completed", ev.Kind, ev.Job.ID, ev.Job.Kind, res.Job.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dead-man job did not complete within 10s")
	}
	alerts := tb.rec.take()
	if len(alerts) != 2 {
		t.Fatalf("the job sent %d alerts, want 2 (workspace and sync)", len(alerts))
	}
	for _, a := range alerts {
		if a.Kind != alert.KindDeadmanNoRuns {
			t.Errorf("alert kind %s, want %s", a.Kind, alert.KindDeadmanNoRuns)
		}
	}
	dup, err := client.Insert(tb.ctx, deadman.JobArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !dup.UniqueSkippedAsDuplicate {
		t.Error("a second check in the same hour was inserted")
	}
}

func TestConfigWindow(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		Settings: config.Settings{DeadmanWindow: 12 * time.Hour},
		Syncs: []config.Sync{
			{ID: "override", Workspace: "acme", DeadmanWindow: 90 * time.Minute},
			{ID: "plain", Workspace: "acme"},
		},
	}
	w := deadman.ConfigWindow(cfg)
	for id, want := range map[string]time.Duration{"override": 90 * time.Minute, "plain": 12 * time.Hour, "unknown": 0} {
		if got := w(id); got != want {
			t.Errorf("window(%s) = %s, want %s", id, got, want)
		}
	}
}
