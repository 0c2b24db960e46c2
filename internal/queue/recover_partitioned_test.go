package queue

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store"
)

// The recovery sweep closes runs of partitioned syncs that no partition job
// is left to close, on a real SQLite store and queue and on PostgreSQL (the
// server at ONCESYNC_TEST_DATABASE_URL, in a fresh schema; skipped without
// it, failing under CI=true), with a fake clock: no test waits.

// coordBundle is a Service (not started) whose config has partitioned syncs.
type coordBundle struct {
	ctx context.Context
	svc *Service
	st  store.Store
	clk *clock.Fake
	ttl time.Duration
	dir string // the config's directory
}

func partitionedConfig(dir, storeURL string) *config.Config {
	sync := func(id string, n int) config.Sync {
		return config.Sync{ID: id, Workspace: "w", Partitions: n,
			Source:      config.Source{Type: "csv", Spec: &file.Config{Path: id + ".csv"}, PageSize: 10, Identity: "id"},
			Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}, Mode: "single", Concurrency: 1, Timeout: time.Second}}
	}
	return &config.Config{
		Path:     filepath.Join(dir, "oncesync.yaml"),
		Store:    storeURL,
		Settings: config.Settings{LeaseTTL: 30 * time.Second, LeaseRenew: 10 * time.Second, LedgerRetention: time.Hour, BreakerFailures: 5},
		Syncs:    []config.Sync{sync("p", 4), sync("q", 2), sync("c", 2), sync("f", 2)},
	}
}

func setupCoordinated(t *testing.T, storeURL string) *coordBundle {
	t.Helper()
	return setupCoordinatedWith(t, storeURL, func(*Params) {})
}

// setupCoordinatedWith is setupCoordinated with Params changed by with.
func setupCoordinatedWith(t *testing.T, storeURL string, with func(*Params)) *coordBundle {
	t.Helper()
	dir := t.TempDir()
	cfg := partitionedConfig(dir, storeURL)
	clk := clock.NewFake(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	st, err := app.OpenStore(t.Context(), cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Clock: clk, Scheduler: true}
	with(&p)
	svc, err := New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.b.close() })
	return &coordBundle{ctx: t.Context(), svc: svc, st: st, clk: clk, ttl: cfg.Settings.LeaseTTL, dir: dir}
}

// pgStoreURL returns a store URL on the test PostgreSQL whose tables and
// queue live in a fresh schema, dropped at the end.
func pgStoreURL(t *testing.T) string {
	t.Helper()
	dbURL := os.Getenv("ONCESYNC_TEST_DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	_ = conn.Close(ctx)
	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	schema := "oncesync_rc_" + hex.EncodeToString(rnd)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dbURL); err == nil {
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
			_ = conn.Close(ctx)
		}
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// partJob queues partition k of run of sync (as the coordinator does) and
// returns its job id.
func (b *coordBundle) partJob(t *testing.T, syncID string, run int64, k, n int) int64 {
	t.Helper()
	res, err := b.svc.b.insert(b.ctx, RunPartitionArgs{SyncID: syncID, Partition: k, Partitions: n, RunID: run,
		Barrier: "barrier", Token: "run", Snapshot: "snap", Reason: ReasonManual}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.UniqueSkippedAsDuplicate {
		t.Fatalf("partition %d of run %d: a duplicate of job %d", k, run, res.Job.ID)
	}
	return res.Job.ID
}

// setJob moves a job to state after attempts, as River's workers would.
func (b *coordBundle) setJob(t *testing.T, id int64, state rivertype.JobState, attempts int) {
	t.Helper()
	now := time.Now().UTC()
	p := &riverdriver.JobUpdateFullParams{ID: id,
		StateDoUpdate: true, State: state,
		AttemptDoUpdate: true, Attempt: attempts,
		FinalizedAtDoUpdate: true,
	}
	if slices.Contains(finishedJobStates, state) {
		p.FinalizedAt = &now
	}
	if attempts > 0 {
		p.AttemptedAtDoUpdate, p.AttemptedAt = true, &now
	}
	var (
		j   *rivertype.JobRow
		err error
	)
	switch rb := b.svc.b.(type) {
	case *riverBackend[*sql.Tx]:
		p.Schema = rb.schema
		j, err = rb.driver.GetExecutor().JobUpdateFull(b.ctx, p)
	case *riverBackend[pgx.Tx]:
		p.Schema = rb.schema
		j, err = rb.driver.GetExecutor().JobUpdateFull(b.ctx, p)
	default:
		t.Fatalf("backend %T", b.svc.b)
	}
	if err != nil {
		t.Fatal(err)
	}
	if j.State != state {
		t.Fatalf("job %d is %s, want %s", id, j.State, state)
	}
}

func (b *coordBundle) insertRun(t *testing.T, syncID string, state store.RunState) store.Run {
	t.Helper()
	r, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: syncID, State: state, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// partitionRun records a finished run of partition k of syncID.
func (b *coordBundle) partitionRun(t *testing.T, syncID string, k int, state store.RunState, code failure.Code, written int64) {
	t.Helper()
	r := b.insertRun(t, partition.SyncID(syncID, k), store.RunRunning)
	r.State, r.FailureCode, r.Written, r.Read = state, string(code), written, written
	if err := b.st.UpdateRun(b.ctx, r); err != nil {
		t.Fatal(err)
	}
}

func (b *coordBundle) run(t *testing.T, id int64) store.Run {
	t.Helper()
	r, err := b.st.GetRun(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *coordBundle) recover(t *testing.T) Recovered {
	t.Helper()
	got, err := b.svc.Recover(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRecoverClosesAbandonedPartitionedRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"sqlite", func(*testing.T) string { return "sqlite://./oncesync.db" }},
		{"postgres", pgStoreURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRecoverClosesAbandonedPartitionedRun(t, setupCoordinated(t, tc.store(t)))
		})
	}
}

func testRecoverClosesAbandonedPartitionedRun(t *testing.T, b *coordBundle) {
	// p: 4 partitions. 1 succeeded, 2 was discarded after its attempts
	// (its last run failed destination_unavailable), 3 is still retrying
	// at first, and 4 was never queued (or is gone from the queue).
	p := b.insertRun(t, "p", store.RunRunning)
	done := b.partJob(t, "p", p.ID, 1, 4)
	discarded := b.partJob(t, "p", p.ID, 2, 4)
	third := b.partJob(t, "p", p.ID, 3, 4)
	b.setJob(t, done, rivertype.JobStateCompleted, 1)
	b.partitionRun(t, "p", 1, store.RunSucceeded, "", 10)
	b.setJob(t, discarded, rivertype.JobStateDiscarded, MaxAttempts)
	// Its first attempt wrote 4 records before failing, its last none:
	// the run's figures count both, as a partition closing it would.
	b.partitionRun(t, "p", 2, store.RunFailed, failure.DestinationUnavailable, 4)
	b.partitionRun(t, "p", 2, store.RunFailed, failure.DestinationUnavailable, 0)

	// q: both of its own partition jobs were cancelled, but an earlier
	// run's job of partition 1 (q0, queued first: it made q's own
	// partition-1 job a duplicate in real life) is still running.
	q0 := b.insertRun(t, "q", store.RunRunning)
	q := b.insertRun(t, "q", store.RunRunning)
	b.setJob(t, b.partJob(t, "q", q.ID, 1, 2), rivertype.JobStateCancelled, 1)
	b.setJob(t, b.partJob(t, "q", q.ID, 2, 2), rivertype.JobStateCancelled, 1)
	earlier := b.partJob(t, "q", q0.ID, 1, 2)
	b.setJob(t, earlier, rivertype.JobStateRunning, 1)

	// c: both partitions succeeded, but the last one could not record the
	// end of the run.
	c := b.insertRun(t, "c", store.RunRunning)
	for k := 1; k <= 2; k++ {
		b.setJob(t, b.partJob(t, "c", c.ID, k, 2), rivertype.JobStateCompleted, 1)
		b.partitionRun(t, "c", k, store.RunSucceeded, "", int64(k*3))
	}

	// f: a foreground `oncesync run` of a partitioned sync works it
	// unpartitioned, under the sync's own live lease.
	f := b.insertRun(t, "f", store.RunRunning)
	if _, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: "f", Token: "tf", Holder: "elsewhere", RunID: f.ID, TTL: 10 * b.ttl}); err != nil {
		t.Fatal(err)
	}

	// Younger than the lease TTL: nothing is touched.
	if got := b.recover(t); len(got.Unfinished)+len(got.Completed)+len(got.Runs) != 0 {
		t.Fatalf("young runs: Recover = %+v", got)
	}
	b.clk.Advance(b.ttl + time.Second)

	// A partition job that may still be worked keeps the run open, in
	// whichever state it waits.
	var completed []int64
	for _, state := range []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	} {
		b.setJob(t, third, state, 2)
		got := b.recover(t)
		completed = append(completed, got.Completed...)
		if len(got.Unfinished) != 0 || len(got.Runs) != 0 {
			t.Fatalf("partition 3 %s: Recover = %+v, want no run closed failed", state, got)
		}
		for _, id := range []int64{p.ID, q0.ID, q.ID, f.ID} {
			if r := b.run(t, id); r.State != store.RunRunning {
				t.Fatalf("partition 3 %s: run %d of %s is %s, want still running", state, id, r.SyncID, r.State)
			}
		}
	}
	if !slices.Equal(completed, []int64{c.ID}) {
		t.Fatalf("completed %v, want run %d of c, once", completed, c.ID)
	}
	if r := b.run(t, c.ID); r.State != store.RunSucceeded || r.Written != 9 || r.FinishedAt.IsZero() {
		t.Fatalf("run of c: %+v, want succeeded with the partitions' 9 writes", r)
	}

	// Partition 3's job is cancelled: nothing is left to finish p's run.
	b.setJob(t, third, rivertype.JobStateCancelled, 2)
	got := b.recover(t)
	if !slices.Equal(got.Unfinished, []int64{p.ID}) || len(got.Completed) != 0 {
		t.Fatalf("Recover = %+v, want only run %d of p closed", got, p.ID)
	}
	r := b.run(t, p.ID)
	if r.State != store.RunFailed || r.FailureCode != string(failure.PartitionsUnfinished) || !r.FinishedAt.Equal(b.clk.Now()) || r.Written != 14 {
		t.Fatalf("run of p: %+v, want failed %s at %s with partitions 1's and 2's 14 writes", r, failure.PartitionsUnfinished, b.clk.Now())
	}
	for _, want := range []string{
		"1 of 4 partitions succeeded",
		"partition 2: job discarded after its last attempt",
		"partition 3: job cancelled",
		"partition 4: no job left in the queue",
		"their last runs failed with destination_unavailable",
	} {
		if !strings.Contains(r.FailureDetail, want) {
			t.Errorf("detail %q lacks %q", r.FailureDetail, want)
		}
	}

	// The earlier run's job of q ends: both runs of q are closed.
	b.setJob(t, earlier, rivertype.JobStateDiscarded, MaxAttempts)
	got = b.recover(t)
	slices.Sort(got.Unfinished)
	if !slices.Equal(got.Unfinished, []int64{q0.ID, q.ID}) {
		t.Fatalf("Recover = %+v, want runs %d and %d of q closed", got, q0.ID, q.ID)
	}
	if r := b.run(t, q.ID); r.FailureCode != string(failure.PartitionsUnfinished) || !strings.Contains(r.FailureDetail, "0 of 2 partitions succeeded; partitions 1, 2: job cancelled") {
		t.Fatalf("run of q: %+v", r)
	}
	if r := b.run(t, q0.ID); !strings.Contains(r.FailureDetail, "partition 1: job discarded after its last attempt; partition 2: no job left in the queue") {
		t.Fatalf("run of q0: %+v", r)
	}

	// The foreground run is alive under its lease; a later sweep changes
	// nothing.
	if r := b.run(t, f.ID); r.State != store.RunRunning {
		t.Fatalf("foreground run of f: %s, want running", r.State)
	}
	if got := b.recover(t); len(got.Unfinished)+len(got.Completed)+len(got.Runs)+len(got.Rescued)+len(got.Enqueued) != 0 {
		t.Fatalf("last sweep: %+v, want nothing", got)
	}
}

// TestRecoverLeavesARunWhosePartitionIsHeld: every job of a run's
// partitions has ended, but partition 2's lease is live: an attempt made
// available again while the one before still ran (its renewals late on a
// loaded machine) completed its job as skipped, and the attempt still
// running will close the run. The sweep leaves the run open until no
// partition is held (CI, 2026-12-05: the run was closed
// partitions_unfinished while partition 2 still wrote).
func TestRecoverLeavesARunWhosePartitionIsHeld(t *testing.T) {
	t.Parallel()
	b := setupCoordinated(t, "sqlite://./oncesync.db")
	c := b.insertRun(t, "c", store.RunRunning)
	b.setJob(t, b.partJob(t, "c", c.ID, 1, 2), rivertype.JobStateCompleted, 1)
	b.partitionRun(t, "c", 1, store.RunSucceeded, "", 3)
	b.setJob(t, b.partJob(t, "c", c.ID, 2, 2), rivertype.JobStateCompleted, 2)
	held := b.insertRun(t, partition.SyncID("c", 2), store.RunRunning)
	if _, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: partition.SyncID("c", 2), Token: "t2", Holder: "elsewhere",
		RunID: held.ID, TTL: 3 * b.ttl}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(b.ttl + time.Second)
	if got := b.recover(t); len(got.Unfinished)+len(got.Completed) != 0 {
		t.Fatalf("partition 2 held: Recover = %+v, want the run left open", got)
	}
	if r := b.run(t, c.ID); r.State != store.RunRunning {
		t.Fatalf("partition 2 held: run of c is %s, want running", r.State)
	}
	// The holder is gone and its lease has expired: nothing is left to
	// close the run.
	b.clk.Advance(3 * b.ttl)
	got := b.recover(t)
	if !slices.Equal(got.Unfinished, []int64{c.ID}) {
		t.Fatalf("partition 2 no longer held: Recover = %+v, want run %d of c closed", got, c.ID)
	}
	if r := b.run(t, c.ID); r.FailureCode != string(failure.PartitionsUnfinished) {
		t.Fatalf("run of c: %+v, want %s", r, failure.PartitionsUnfinished)
	}
}

// TestRecoverCountsARunByHandThatHeldAPartition: `oncesync run` of the sync
// held partition 1 when a scheduled run began, so that run's partition 1
// job met the lease and was skipped; the run by hand's partition run then
// succeeded. The sweep closes the scheduled run succeeded, as the guide
// says (it was closed partitions_unfinished: "job ended without a
// successful run").
func TestRecoverCountsARunByHandThatHeldAPartition(t *testing.T) {
	t.Parallel()
	b := setupCoordinated(t, "sqlite://./oncesync.db")
	byHand := b.insertRun(t, partition.SyncID("c", 1), store.RunRunning)
	b.clk.Advance(time.Second)
	c := b.insertRun(t, "c", store.RunRunning)
	b.setJob(t, b.partJob(t, "c", c.ID, 1, 2), rivertype.JobStateCompleted, 1)
	b.partitionRun(t, "c", 1, store.RunSkipped, failure.AlreadyRunning, 0)
	b.setJob(t, b.partJob(t, "c", c.ID, 2, 2), rivertype.JobStateCompleted, 1)
	b.partitionRun(t, "c", 2, store.RunSucceeded, "", 3)
	b.clk.Advance(time.Second)
	byHand.State, byHand.FinishedAt, byHand.Written = store.RunSucceeded, b.clk.Now(), 5
	if err := b.st.UpdateRun(b.ctx, byHand); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(b.ttl + time.Second)
	got := b.recover(t)
	if !slices.Equal(got.Completed, []int64{c.ID}) {
		t.Fatalf("Recover = %+v, want run %d of c completed", got, c.ID)
	}
	if r := b.run(t, c.ID); r.State != store.RunSucceeded || r.Written != 3 {
		t.Fatalf("run of c: %+v, want succeeded with its own partition's 3 written", r)
	}
}
