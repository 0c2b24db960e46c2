package queue

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

// Finding 6 of issue 13: a partitioned run's coordinator or partition job
// whose worker died blocked its sync until River's own rescue (24 h). The
// tests below kill workers the way SIGKILL does, leaving their jobs running
// in River with whatever leases they held, on real SQLite and PostgreSQL
// queues; the first two use a fake clock and never wait.

// rescueStores are the stores every test here runs on.
var rescueStores = []struct {
	name  string
	store func(t *testing.T) string
}{
	{"sqlite", func(*testing.T) string { return "sqlite://./oncesync.db" }},
	{"postgres", pgStoreURL},
}

// jobExecutor calls f with the executor and schema of svc's queue.
func jobExecutor(t *testing.T, svc *Service, f func(riverdriver.Executor, string)) {
	t.Helper()
	switch rb := svc.b.(type) {
	case *riverBackend[*sql.Tx]:
		f(rb.driver.GetExecutor(), rb.schema)
	case *riverBackend[pgx.Tx]:
		f(rb.driver.GetExecutor(), rb.schema)
	default:
		t.Fatalf("backend %T", svc.b)
	}
}

// markRunning moves job id to running, attempted at `at` (River's times are
// wall-clock times) by a worker that then died without a word: River's
// fetch, then a SIGKILL.
func markRunning(t *testing.T, ctx context.Context, svc *Service, id int64, at time.Time) {
	t.Helper()
	at = at.UTC()
	jobExecutor(t, svc, func(ex riverdriver.Executor, schema string) {
		j, err := ex.JobUpdateFull(ctx, &riverdriver.JobUpdateFullParams{
			ID: id, Schema: schema,
			StateDoUpdate: true, State: rivertype.JobStateRunning,
			AttemptDoUpdate: true, Attempt: 1,
			AttemptedAtDoUpdate: true, AttemptedAt: &at,
			AttemptedByDoUpdate: true, AttemptedBy: []string{"killed-worker"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if j.State != rivertype.JobStateRunning {
			t.Fatalf("job %d is %s, want running", id, j.State)
		}
	})
}

// jobRow reads job id.
func jobRow(t *testing.T, ctx context.Context, svc *Service, id int64) *rivertype.JobRow {
	t.Helper()
	var j *rivertype.JobRow
	jobExecutor(t, svc, func(ex riverdriver.Executor, schema string) {
		var err error
		if j, err = ex.JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: id, Schema: schema}); err != nil {
			t.Fatal(err)
		}
	})
	return j
}

// coordJob queues a coordinator of syncID and returns its job id.
func (b *coordBundle) coordJob(t *testing.T, syncID string) int64 {
	t.Helper()
	res, err := b.svc.b.insert(b.ctx, RunPartitionedArgs{SyncID: syncID, Reason: ReasonSchedule}, nil)
	if err != nil || res.UniqueSkippedAsDuplicate {
		t.Fatalf("coordinator of %s: %+v, %v", syncID, res, err)
	}
	return res.Job.ID
}

// heartbeatOf makes another machine's process (so not known dead from
// here) hold the heartbeat of a job of kind working slot, for ttl.
func (b *coordBundle) heartbeatOf(t *testing.T, kind, slot string, ttl time.Duration) {
	t.Helper()
	other := lease.Process{Host: "elsewhere", Boot: "b", PIDNS: "p", PID: 4242}
	if _, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: heartbeatID(kind, slot), Token: "beat-" + slot,
		Holder: other.String(), TTL: ttl}); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverRescuesDeadJobsOfEveryKind: within one sweep after a lease TTL,
// recovery makes available again a coordinator whose worker was killed
// after recording its run, and partition jobs whose workers were killed
// before their partition took its lease (right after River handed them the
// job, or while building the pipeline); their runs stay open for the
// rescued jobs to finish. A coordinator whose heartbeat is live and a job
// fetched less than a TTL ago are left alone. Before, only jobs of runs
// found with an expired lease were rescued: these stayed running for 24 h,
// and "run now" was a duplicate of a dead job.
func TestRecoverRescuesDeadJobsOfEveryKind(t *testing.T) {
	t.Parallel()
	for _, tc := range rescueStores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRecoverRescuesDeadJobsOfEveryKind(t, setupCoordinated(t, tc.store(t)))
		})
	}
}

func testRecoverRescuesDeadJobsOfEveryKind(t *testing.T, b *coordBundle) {
	old := time.Now().Add(-b.ttl - time.Second) // fetched over a lease TTL ago

	// p: the coordinator recorded its run and was killed before queueing
	// the partitions; its heartbeat is left to expire.
	pRun := b.insertRun(t, "p", store.RunRunning)
	pJob := b.coordJob(t, "p")
	markRunning(t, b.ctx, b.svc, pJob, old)
	b.heartbeatOf(t, KindRunPartitioned, "p", b.ttl)

	// q: the coordinator is alive (a slow snapshot), its heartbeat live.
	qJob := b.coordJob(t, "q")
	markRunning(t, b.ctx, b.svc, qJob, old)
	b.heartbeatOf(t, KindRunPartitioned, "q", 3*b.ttl)

	// c: partition 2's worker was killed right after River handed it the
	// job: no heartbeat, no lease, no run. Partition 1 waits its turn.
	cRun := b.insertRun(t, "c", store.RunRunning)
	c1 := b.partJob(t, "c", cRun.ID, 1, 2)
	c2 := b.partJob(t, "c", cRun.ID, 2, 2)
	markRunning(t, b.ctx, b.svc, c2, old)

	// f: partition 2's worker was killed while building its pipeline
	// (heartbeat taken, no lease yet); partition 1 was fetched just now and
	// holds nothing yet either.
	fRun := b.insertRun(t, "f", store.RunRunning)
	f1 := b.partJob(t, "f", fRun.ID, 1, 2)
	f2 := b.partJob(t, "f", fRun.ID, 2, 2)
	markRunning(t, b.ctx, b.svc, f1, time.Now())
	markRunning(t, b.ctx, b.svc, f2, old)
	b.heartbeatOf(t, KindRunPartition, partition.SyncID("f", 2), b.ttl)

	b.clk.Advance(b.ttl + time.Second)
	got := b.recover(t)
	slices.Sort(got.Rescued)
	want := []int64{pJob, c2, f2}
	slices.Sort(want)
	if !slices.Equal(got.Rescued, want) {
		t.Fatalf("rescued %v, want the coordinator %d of p and partition jobs %d of c, %d of f", got.Rescued, pJob, c2, f2)
	}
	if len(got.Unfinished)+len(got.Completed)+len(got.Runs)+len(got.Enqueued) != 0 {
		t.Fatalf("Recover = %+v, want no run closed (p's coordinator resumes its run, the partitions finish theirs)", got)
	}
	for id, state := range map[int64]rivertype.JobState{
		pJob: rivertype.JobStateAvailable, qJob: rivertype.JobStateRunning,
		c1: rivertype.JobStateAvailable, c2: rivertype.JobStateAvailable,
		f1: rivertype.JobStateRunning, f2: rivertype.JobStateAvailable,
	} {
		if j := jobRow(t, b.ctx, b.svc, id); j.State != state {
			t.Fatalf("job %d (%s) is %s, want %s", id, j.Kind, j.State, state)
		}
	}
	for _, r := range []store.Run{pRun, cRun, fRun} {
		if got := b.run(t, r.ID); got.State != store.RunRunning {
			t.Fatalf("run %d of %s is %s, want still running", r.ID, r.SyncID, got.State)
		}
	}
	if v := counterValue(t, b.svc.metrics.rescued.WithLabelValues(RescuedCoordinator)); v != 1 {
		t.Fatalf("coordinators rescued: %v, want 1", v)
	}
	if v := counterValue(t, b.svc.metrics.rescued.WithLabelValues(RescuedPartition)); v != 2 {
		t.Fatalf("partition jobs rescued: %v, want 2", v)
	}

	// "Run now" (and the next tick) lands on the rescued job, which any
	// worker takes now, instead of a dead one.
	if e, err := b.svc.Enqueue(b.ctx, "p", ReasonManual); err != nil || !e.Duplicate || e.JobID != pJob {
		t.Fatalf("run now of p: %+v, %v; want the rescued job %d", e, err, pJob)
	}
	// The rescued jobs wait for a worker: a second sweep does nothing.
	if got := b.recover(t); len(got.Rescued)+len(got.Unfinished)+len(got.Completed) != 0 {
		t.Fatalf("second sweep: %+v, want nothing", got)
	}

	// q's worker dies too: once its heartbeat has expired, the next sweep
	// rescues its coordinator.
	b.clk.Advance(3 * b.ttl)
	if got := b.recover(t); !slices.Equal(got.Rescued, []int64{qJob}) {
		t.Fatalf("after q's heartbeat expired: rescued %v, want %d", got.Rescued, qJob)
	}
}

// testRedisClient returns a client of the test Redis (skipped without it,
// failing under CI=true) and a key space of the test's own, whose keys are
// deleted at the end.
func testRedisClient(t *testing.T) (*redis.Client, rediskey.Space) {
	t.Helper()
	u := os.Getenv("ONCESYNC_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { _ = rc.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Redis unreachable: %v", err)
		}
		t.Skipf("Redis unreachable: %v", err)
	}
	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	keys, err := rediskey.New("rescue-" + hex.EncodeToString(rnd))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		it := rc.Scan(ctx, 0, keys.Prefix()+"*", 100).Iterator()
		for it.Next(ctx) {
			_ = rc.Del(ctx, it.Val()).Err()
		}
	})
	return rc, keys
}

// writeContacts writes n rows (id, email, first_name) to path, with e-mails
// starting with prefix.
func writeContacts(t *testing.T, path, prefix string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,email,first_name\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d,%s%04d@example.com,F%d\n", i, prefix, i, i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCoordinatorResumesUnsplitRun: a coordinator that finds a run of its
// sync recorded by a coordinator killed before queueing the partitions (the
// job rescued above) resumes that run: it pins the source as it is now
// (nothing was written from the old pin) and queues the partitions under
// the run's id, recording no second run. A run under a live foreground
// lease, or younger than a lease TTL, is not taken over.
func TestCoordinatorResumesUnsplitRun(t *testing.T) {
	t.Parallel()
	for _, tc := range rescueStores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc, keys := testRedisClient(t)
			b := setupCoordinatedWith(t, tc.store(t), func(p *Params) { p.Redis, p.RedisKeys = rc, keys })
			testCoordinatorResumesUnsplitRun(t, b)
		})
	}
}

func testCoordinatorResumesUnsplitRun(t *testing.T, b *coordBundle) {
	for _, id := range []string{"p", "f", "c"} {
		writeContacts(t, filepath.Join(b.dir, id+".csv"), id, 20)
	}
	// p: recorded and pinned, then killed; the source changed since.
	pRun := b.insertRun(t, "p", store.RunRunning)
	pKey, pToken := b.svc.keys.Barrier("p", pRun.ID), fmt.Sprintf("run%d", pRun.ID)
	stale, err := barrier.Snapshot(map[string]any{"sha256": "before", "source": "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.barrier.Check(b.ctx, pKey, pToken, stale, partition.BarrierTTL); err != nil {
		t.Fatal(err)
	}
	// f: a foreground `oncesync run` works f under the sync's own lease.
	fRun := b.insertRun(t, "f", store.RunRunning)
	other := lease.Process{Host: "elsewhere", Boot: "b", PIDNS: "p", PID: 4242}
	if _, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: "f", Token: "tf", Holder: other.String(),
		RunID: fRun.ID, TTL: 10 * b.ttl}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(b.ttl + time.Second)
	// c: recorded just now (a foreground run about to take its lease).
	cRun := b.insertRun(t, "c", store.RunRunning)

	for _, id := range []string{"p", "f", "c"} {
		if err := b.svc.coordinate(b.ctx, RunPartitionedArgs{SyncID: id, Reason: ReasonRecovery}, 2); err != nil {
			t.Fatalf("coordinate %s: %v", id, err)
		}
	}

	runs, err := b.st.ListRuns(b.ctx, "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != pRun.ID || runs[0].State != store.RunRunning {
		t.Fatalf("runs of p: %+v, want run %d alone, resumed", runs, pRun.ID)
	}
	parts, err := b.svc.b.jobsOf(b.ctx, KindRunPartition, "p", pRun.ID, activeJobStates, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 4 {
		t.Fatalf("%d partition jobs of run %d, want 4", len(parts), pRun.ID)
	}
	for _, j := range parts {
		a, _ := partitionArgs(j)
		if a.Token != pToken || a.Barrier != pKey || a.Snapshot == stale {
			t.Fatalf("partition %d: %+v, want the run's barrier re-pinned to the source as it is", a.Partition, a)
		}
		if res, err := b.svc.barrier.Verify(b.ctx, pKey, a.Snapshot); err != nil || res.Outcome != barrier.Aligned {
			t.Fatalf("barrier of run %d against partition %d's snapshot: %+v, %v", pRun.ID, a.Partition, res, err)
		}
	}

	for _, old := range []store.Run{fRun, cRun} {
		runs, err := b.st.ListRuns(b.ctx, old.SyncID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || runs[0].ID == old.ID || runs[0].State != store.RunRunning {
			t.Fatalf("runs of %s: %+v, want a new run beside run %d", old.SyncID, runs, old.ID)
		}
		if own, err := b.svc.b.jobsOf(b.ctx, KindRunPartition, old.SyncID, old.ID, allJobStates, 10); err != nil || len(own) != 0 {
			t.Fatalf("partition jobs of run %d of %s: %d, %v; want none", old.ID, old.SyncID, len(own), err)
		}
		if own, err := b.svc.b.jobsOf(b.ctx, KindRunPartition, old.SyncID, runs[0].ID, activeJobStates, 10); err != nil || len(own) != 2 {
			t.Fatalf("partition jobs of the new run %d of %s: %d, %v; want 2", runs[0].ID, old.SyncID, len(own), err)
		}
	}
}

// eventually polls cond until it holds; the limit only ends a test that
// would otherwise hang.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const rescueAPIKey = "xkeysib-rescue-secret-0123456789"

// TestKilledCoordinatorAndPartitionRunAgain: a worker of a real queue
// service takes over, within a lease TTL and a sweep, the work of workers
// killed (as SIGKILL does: no cleanup, jobs left running) while holding the
// coordinator of sync k before it recorded anything, and partition 2 of
// sync m's run before it took its lease. Both syncs' runs succeed, every
// row is written once, and the dead jobs were rescued by lease-expiry
// recovery. Before, both runs waited 24 h for River's rescue.
func TestKilledCoordinatorAndPartitionRunAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range rescueStores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testKilledCoordinatorAndPartitionRunAgain(t, tc.store(t))
		})
	}
}

func testKilledCoordinatorAndPartitionRunAgain(t *testing.T, storeURL string) {
	const rows = 40
	ctx := t.Context()
	rc, keys := testRedisClient(t)
	dir := t.TempDir()
	fake := fakebrevo.New(fakebrevo.Options{APIKey: rescueAPIKey, Validate: true})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	sync := func(id string) config.Sync {
		writeContacts(t, filepath.Join(dir, id+".csv"), "rescue-"+id, rows)
		return config.Sync{ID: id, Workspace: "w", Partitions: 2,
			Source: config.Source{Type: "csv", Spec: &file.Config{Path: id + ".csv"}, PageSize: 10, Identity: "id"},
			Destination: config.Destination{Type: "brevo", Mode: "bulk", Concurrency: 1, Timeout: 10 * time.Second, RateLimit: 100000,
				Spec: &brevo.Config{BaseURL: srv.URL + "/v3", APIKey: rescueAPIKey, ListIDs: []int64{2},
					Email: "email", Attributes: map[string]string{"FIRSTNAME": "first_name"}}}}
	}
	cfg := &config.Config{
		Path: filepath.Join(dir, "oncesync.yaml"), Store: storeURL,
		// A short TTL: the takeover is a TTL and a sweep away. Not shorter:
		// a destination call needs a second of lease left (apiclient's
		// MinAttempt), which a 2 s lease renewed late under a loaded -race
		// suite did not have.
		Settings: config.Settings{LeaseTTL: 3 * time.Second, LeaseRenew: 750 * time.Millisecond, LedgerRetention: time.Hour, BreakerFailures: 5},
		Syncs:    []config.Sync{sync("k"), sync("m")},
	}
	st, err := app.OpenStore(ctx, cfg, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(ctx, Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Scheduler: true,
		Redis: rc, RedisKeys: keys, Workers: 4, FetchPollInterval: 20 * time.Millisecond,
		RecoveryInterval: 100 * time.Millisecond, RetryBackoff: 200 * time.Millisecond, Logger: testenv.LogOnFailure(t)})
	if err != nil {
		t.Fatal(err)
	}

	// k: River handed the coordinator to a worker, which was killed before
	// it took its heartbeat: no run, no lease.
	res, err := svc.b.insert(ctx, RunPartitionedArgs{SyncID: "k", Reason: ReasonSchedule}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kJob := res.Job.ID
	markRunning(t, ctx, svc, kJob, time.Now())
	// m: the coordinator recorded the run and queued both partitions; the
	// worker given partition 2 was killed before it took its lease.
	if err := svc.coordinate(ctx, RunPartitionedArgs{SyncID: "m", Reason: ReasonSchedule}, 1); err != nil {
		t.Fatal(err)
	}
	parts, err := svc.b.jobsOf(ctx, KindRunPartition, "m", 0, activeJobStates, 10)
	if err != nil || len(parts) != 2 {
		t.Fatalf("partition jobs of m: %d, %v", len(parts), err)
	}
	var mJob int64
	for _, j := range parts {
		if a, _ := partitionArgs(j); a.Partition == 2 {
			mJob = j.ID
		}
	}
	markRunning(t, ctx, svc, mJob, time.Now())
	// And a recovery sweep's worker was killed too: its job stays running
	// (chaos coordinator-kill, 2026-12-01: every later sweep was refused as
	// its duplicate, so nothing was rescued for 24 h).
	sweep, err := svc.b.insert(ctx, RecoverArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	markRunning(t, ctx, svc, sweep.Job.ID, time.Now())

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
	finished := func(syncID string) []store.Run {
		runs, err := st.ListRuns(ctx, syncID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	eventually(t, 60*time.Second, "the runs of k and m to end", func() bool {
		for _, id := range []string{"k", "m"} {
			if runs := finished(id); len(runs) == 0 || runs[0].State == store.RunRunning {
				return false
			}
		}
		return true
	})
	for _, id := range []string{"k", "m"} {
		runs := finished(id)
		if len(runs) != 1 || runs[0].State != store.RunSucceeded || runs[0].Written != rows {
			t.Fatalf("runs of %s: %+v, want one, succeeded with %d written", id, runs, rows)
		}
	}
	if s := fake.Stats(); s.Contacts != 2*rows || s.ContactsWritten != 2*rows || s.DuplicateWrites != 0 {
		t.Fatalf("fake: %+v, want %d contacts written once", s, 2*rows)
	}
	for _, id := range []int64{kJob, mJob} {
		j := jobRow(t, ctx, svc, id)
		if len(j.Errors) == 0 || !strings.Contains(j.Errors[0].Error, "lease-expiry recovery") {
			t.Fatalf("job %d (%s): errors %+v, want rescued by lease-expiry recovery", id, j.Kind, j.Errors)
		}
	}
}
