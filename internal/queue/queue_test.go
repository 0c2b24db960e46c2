package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
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
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
	"github.com/oncesync/oncesync/internal/testenv"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{1, 0.5, 60 * time.Second},
		{2, 0.5, 120 * time.Second},
		{3, 0.5, 240 * time.Second},
		{4, 0.5, 480 * time.Second},
		{0, 0.5, 60 * time.Second}, // clamped
		{1, 0, 54 * time.Second},   // -10 %
		{4, 0, 432 * time.Second},
		{1, 1, 66 * time.Second}, // +10 % (the open bound)
		{2, 0.75, 126 * time.Second},
	} {
		t.Run(fmt.Sprintf("attempt %d rnd %.2f", tc.attempt, tc.rnd), func(t *testing.T) {
			t.Parallel()
			got := Backoff(tc.attempt, 0, func() float64 { return tc.rnd })
			if d := got - tc.want; d < -time.Millisecond || d > time.Millisecond {
				t.Fatalf("Backoff(%d) = %s, want %s", tc.attempt, got, tc.want)
			}
		})
	}
	// Another base doubles the same way.
	if got := Backoff(3, time.Second, func() float64 { return 0 }); got != 3600*time.Millisecond {
		t.Fatalf("Backoff(3, 1s, -10%%) = %s, want 3.6s", got)
	}
	// The retry policy schedules from the injected clock, with its base.
	clk := clock.NewFake(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	p := retryPolicy{clock: clk, rnd: func() float64 { return 0.5 }}
	if got, want := p.NextRetry(&rivertype.JobRow{Attempt: 3}), clk.Now().Add(240*time.Second); !got.Equal(want) {
		t.Fatalf("NextRetry = %s, want %s", got, want)
	}
	p.base = 2 * time.Second
	if got, want := p.NextRetry(&rivertype.JobRow{Attempt: 2}), clk.Now().Add(4*time.Second); !got.Equal(want) {
		t.Fatalf("NextRetry with a 2s base = %s, want %s", got, want)
	}
	// Attempts whose worker died, handed back by the recovery, are no
	// failures: after two of them, a first failure waits the first backoff.
	rescued := &rivertype.JobRow{Attempt: 3, Errors: []rivertype.AttemptError{
		{Attempt: 1, Error: rescueNote}, {Attempt: 2, Error: rescueNote}, {Attempt: 3, Error: "store_unavailable: ..."}}}
	if got, want := p.NextRetry(rescued), clk.Now().Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("NextRetry after two rescues and a failure = %s, want %s (the first backoff)", got, want)
	}
}

// TestStoreFailureRetriesSooner: a run that failed for the store or the
// lease (a restart, a failover: seconds) is retried after 10 s, tripling,
// not after the minute of other failures: a store restarted in a second
// held a sync back 56 to 92 s (an independent check, 2026-12-07).
func TestStoreFailureRetriesSooner(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	p := retryPolicy{clock: clk, rnd: func() float64 { return 0.5 }}
	failed := func(attempt int, err string) *rivertype.JobRow {
		return &rivertype.JobRow{Attempt: attempt, Errors: []rivertype.AttemptError{{Attempt: attempt, Error: err}}}
	}
	for _, tc := range []struct {
		job  *rivertype.JobRow
		want time.Duration
	}{
		{failed(1, "store_unavailable: record the run: the store did not answer"), 10 * time.Second},
		{failed(2, "lease_lost: The run lost its slot part-way through and stopped to avoid writing twice."), 30 * time.Second},
		{failed(4, "store_unavailable: x"), 270 * time.Second},
		{failed(1, "destination_unavailable: brevo answered HTTP 503"), 60 * time.Second},
		{failed(2, "destination_unavailable: x"), 120 * time.Second},
	} {
		if got, want := p.NextRetry(tc.job), clk.Now().Add(tc.want); !got.Equal(want) {
			t.Errorf("NextRetry after %q (attempt %d) = in %s, want %s", tc.job.Errors[0].Error, tc.job.Attempt, got.Sub(clk.Now()), tc.want)
		}
	}
	// Never later than the base of other failures (a test's short one).
	p.base = 2 * time.Second
	if got, want := p.NextRetry(failed(2, "store_unavailable: x")), clk.Now().Add(6*time.Second); !got.Equal(want) {
		t.Errorf("NextRetry with a 2s base = in %s, want 6s", got.Sub(clk.Now()))
	}
}

func TestJobResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string // nil, snooze, retry, cancel
	}{
		{"success", nil, "nil"},
		{"skipped", failure.New(failure.AlreadyRunning, "Another run of this sync was already in progress"), "nil"},
		{"paused", errSyncPaused, "nil"},
		{"interrupted", failure.New(failure.Interrupted, ""), "snooze"},
		{"interrupted wrapped", fmt.Errorf("run: %w", failure.Wrap(failure.Interrupted, context.Canceled, "stopped")), "snooze"},
		{"destination unavailable", failure.New(failure.DestinationUnavailable, "503"), "retry"},
		{"store unavailable", failure.Wrap(failure.StoreUnavailable, store.ErrUnavailable, "x"), "retry"},
		{"lease lost", failure.New(failure.LeaseLost, "lost"), "retry"},
		{"bad credentials", failure.New(failure.DestinationAuth, "401"), "cancel"},
		{"every record refused", failure.New(failure.DestinationRejectedRecords, "all"), "cancel"},
		{"invalid definition", failure.New(failure.InvalidSyncDefinition, "bad"), "cancel"},
		{"lease store quarantine", failure.Wrap(failure.StoreUnavailable,
			&lease.QuarantineError{SyncID: "s", Until: time.Now().Add(time.Hour)}, "take the sync's lease"), "snooze later"},
		// A renewal that found the lease gone with Redis's data
		// (redislease.Renew): the run is lost, the next waits for the
		// quarantine's end, not for a retry's backoff.
		{"lease lost with its data", failure.Wrap(failure.LeaseLost, fmt.Errorf("renew: %w: %w", store.ErrLeaseLost,
			&lease.QuarantineError{SyncID: "s", Until: time.Now().Add(time.Hour)}), "lost"), "snooze later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := jobResult(&rivertype.JobRow{Attempt: 1}, tc.err)
			var (
				snooze *rivertype.JobSnoozeError
				cancel *rivertype.JobCancelError
				kind   string
			)
			switch {
			case got == nil:
				kind = "nil"
			case errors.As(got, &snooze) && tc.want == "snooze later":
				// Waits out the quarantine without using an attempt.
				kind = "snooze later"
				if snooze.Duration != 15*time.Minute {
					t.Fatalf("snoozed %s, want the quarantine's end capped at 15m", snooze.Duration)
				}
			case errors.As(got, &snooze):
				kind = "snooze"
				if snooze.Duration != 0 {
					t.Fatalf("snoozed %s, want 0 (resumable at once)", snooze.Duration)
				}
			case errors.As(got, &cancel):
				kind = "cancel"
				if failure.CodeOf(got) != failure.CodeOf(tc.err) {
					t.Fatalf("cancel lost the code: %v", got)
				}
			default:
				kind = "retry"
				if !errors.Is(got, tc.err) {
					t.Fatalf("retry error %v does not wrap %v", got, tc.err)
				}
			}
			if kind != tc.want {
				t.Fatalf("jobResult(%v) = %v (%s), want %s", tc.err, got, kind, tc.want)
			}
		})
	}
}

// TestJobResultHandsOnALeaseNotTaken: a run whose lease store could not be
// asked (this process cut off from Redis) is snoozed a moment, without
// using an attempt, so another process takes the job; a few times a job,
// then retried as any store_unavailable failure.
func TestJobResultHandsOnALeaseNotTaken(t *testing.T) {
	t.Parallel()
	// What a run returns when Redis could not be asked for the lease.
	notTaken := func() error {
		return failure.Wrap(failure.StoreUnavailable, fmt.Errorf("%w: redis lease acquire of sync %q: %w: %w",
			runner.ErrLeaseNotTaken, "s", store.ErrUnavailable, errors.New("dial tcp 127.0.0.1:6379: i/o timeout")), "take the sync's lease")
	}
	snoozed := func(n int) *rivertype.JobRow {
		return &rivertype.JobRow{Attempt: 1, Metadata: []byte(fmt.Sprintf(`{"snoozes":%d}`, n))}
	}
	for _, tc := range []struct {
		name   string
		job    *rivertype.JobRow
		err    error
		snooze bool
	}{
		{"first time", &rivertype.JobRow{Attempt: 1, Metadata: []byte(`{}`)}, notTaken(), true},
		{"no metadata", &rivertype.JobRow{Attempt: 1}, notTaken(), true},
		{"snoozed before", snoozed(handOnSnoozes - 1), notTaken(), true},
		{"snoozes used up", snoozed(handOnSnoozes), notTaken(), false},
		{"unreadable metadata", &rivertype.JobRow{Attempt: 1, Metadata: []byte(`{`)}, notTaken(), false},
		{"another store failure", snoozed(0), failure.Wrap(failure.StoreUnavailable, store.ErrUnavailable, "record the run"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := jobResult(tc.job, tc.err)
			var snooze *rivertype.JobSnoozeError
			switch {
			case tc.snooze && !errors.As(got, &snooze):
				t.Fatalf("jobResult = %v, want a snooze of %s", got, handOnWait)
			case tc.snooze && snooze.Duration != handOnWait:
				t.Fatalf("snoozed %s, want %s", snooze.Duration, handOnWait)
			case !tc.snooze && (errors.As(got, &snooze) || !errors.Is(got, tc.err)):
				t.Fatalf("jobResult = %v, want the error itself (River retries it with Backoff)", got)
			}
		})
	}
}

func TestQuarantineWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		until time.Time
		want  time.Duration
	}{
		{now.Add(4 * time.Second), 4*time.Second + 250*time.Millisecond},
		{now.Add(-time.Second), 250 * time.Millisecond}, // over by Redis's clock: try again soon
		{now.Add(time.Hour), 15 * time.Minute},
		{time.Time{}, time.Second},
	} {
		if got := quarantineWait(&lease.QuarantineError{Until: tc.until}, now); got != tc.want {
			t.Errorf("quarantineWait(until %s) = %s, want %s", tc.until, got, tc.want)
		}
	}
}

func TestRunSyncArgsUnique(t *testing.T) {
	t.Parallel()
	opts := RunSyncArgs{}.InsertOpts()
	if opts.MaxAttempts != 5 || !opts.UniqueOpts.ByArgs {
		t.Fatalf("insert opts %+v", opts)
	}
	want := map[rivertype.JobState]bool{
		rivertype.JobStateAvailable: true, rivertype.JobStatePending: true, rivertype.JobStateRunning: true,
		rivertype.JobStateRetryable: true, rivertype.JobStateScheduled: true,
	}
	if len(opts.UniqueOpts.ByState) != len(want) {
		t.Fatalf("ByState %v", opts.UniqueOpts.ByState)
	}
	for _, s := range opts.UniqueOpts.ByState {
		if !want[s] {
			t.Fatalf("ByState has %s", s)
		}
	}
}

// bundle is a Service on a real SQLite store and queue, not started.
type bundle struct {
	ctx context.Context
	svc *Service
	st  *sqlite.Store
	clk *clock.Fake
	cfg *config.Config
}

func setup(t *testing.T) *bundle {
	t.Helper()
	dir := t.TempDir()
	cfg := &config.Config{
		Path:     filepath.Join(dir, "oncesync.yaml"),
		Store:    "sqlite://./oncesync.db",
		Settings: config.Settings{LeaseTTL: 30 * time.Second, LeaseRenew: 10 * time.Second, LedgerRetention: time.Hour},
		Syncs: []config.Sync{
			{ID: "a", Workspace: "w", Source: config.Source{Type: "csv", Spec: &file.Config{Path: "a.csv"}, PageSize: 10},
				Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}, Mode: "single", Concurrency: 1, Timeout: time.Second}},
			{ID: "b", Workspace: "w", Source: config.Source{Type: "csv", Spec: &file.Config{Path: "b.csv"}, PageSize: 10},
				Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}, Mode: "single", Concurrency: 1, Timeout: time.Second}},
			{ID: "broken", Workspace: "w", Source: config.Source{Type: "parquet"},
				Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}}},
		},
	}
	clk := clock.NewFake(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlite.OpenParams{Path: filepath.Join(dir, "oncesync.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(t.Context(), Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Clock: clk, Scheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.b.close() })
	return &bundle{ctx: t.Context(), svc: svc, st: st, clk: clk, cfg: cfg}
}

func (b *bundle) queued(t *testing.T) map[string]RunSyncArgs {
	t.Helper()
	rb := b.svc.b.(*riverBackend[*sql.Tx])
	res, err := rb.client.JobList(b.ctx, river.NewJobListParams().Kinds(KindRunSync).States(rivertype.JobStateAvailable))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]RunSyncArgs{}
	for _, j := range res.Jobs {
		a, ok := runArgs(j.Kind, nil, j.EncodedArgs)
		if !ok {
			t.Fatalf("job %d: undecodable args %s", j.ID, j.EncodedArgs)
		}
		out[a.SyncID] = a
	}
	return out
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.svc.Enqueue(b.ctx, "a", ReasonManual)
	if err != nil || first.Duplicate || first.JobID == 0 {
		t.Fatalf("first enqueue: %+v, %v", first, err)
	}
	second, err := b.svc.Enqueue(b.ctx, "a", ReasonSchedule)
	if err != nil || !second.Duplicate || second.JobID != first.JobID {
		t.Fatalf("second enqueue of the same sync must be a duplicate of job %d: %+v, %v", first.JobID, second, err)
	}
	if _, err := b.svc.Enqueue(b.ctx, "b", ReasonManual); err != nil {
		t.Fatal(err)
	}
	if q := b.queued(t); len(q) != 2 || q["a"].Reason != ReasonManual || q["b"].Reason != ReasonManual {
		t.Fatalf("queued %+v", q)
	}
	if _, err := b.svc.Enqueue(b.ctx, "nope", ReasonManual); !errors.Is(err, ErrUnknownSync) {
		t.Fatalf("unknown sync: %v", err)
	}

	// Enqueue-time failure: an invalid definition is recorded as a failed run.
	_, err = b.svc.Enqueue(b.ctx, "broken", ReasonManual)
	if failure.CodeOf(err) != failure.InvalidSyncDefinition {
		t.Fatalf("broken sync: %v", err)
	}
	runs, err := b.st.ListRuns(b.ctx, "broken", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].State != store.RunFailed || runs[0].FailureCode != string(failure.InvalidSyncDefinition) || runs[0].FinishedAt.IsZero() {
		t.Fatalf("recorded runs %+v", runs)
	}
	if _, ok := b.queued(t)["broken"]; ok {
		t.Fatal("an invalid sync was queued")
	}
}

// TestRunNowMakesAWaitingRunDue: "run now" while the sync's run waits out
// a retry's backoff made no run ("already queued") for minutes; it makes
// that run due now. A scheduled tick still leaves it waiting.
func TestRunNowMakesAWaitingRunDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sc, _ := b.cfg.Sync("a")
	later := time.Now().Add(time.Hour)
	res, err := b.svc.b.insert(b.ctx, b.svc.runArgsFor(sc, ReasonSchedule), &river.InsertOpts{ScheduledAt: later})
	if err != nil || res.Job.State != rivertype.JobStateScheduled {
		t.Fatalf("insert a waiting run: %+v, %v", res, err)
	}
	if e, err := b.svc.Enqueue(b.ctx, "a", ReasonSchedule); err != nil || !e.Duplicate {
		t.Fatalf("a tick beside the waiting run: %+v, %v; want a duplicate", e, err)
	}
	if _, ok := b.queued(t)["a"]; ok {
		t.Fatal("a tick made the waiting run due")
	}
	e, err := b.svc.Enqueue(b.ctx, "a", ReasonManual)
	if err != nil || e.Duplicate || e.JobID != res.Job.ID {
		t.Fatalf("run now: %+v, %v; want job %d made due, not a duplicate", e, err, res.Job.ID)
	}
	if _, ok := b.queued(t)["a"]; !ok {
		t.Fatal("run now left the run waiting")
	}
	// Now due: a second "run now" is a duplicate of it.
	if e, err = b.svc.Enqueue(b.ctx, "a", ReasonManual); err != nil || !e.Duplicate {
		t.Fatalf("run now again: %+v, %v; want a duplicate", e, err)
	}
}

func TestEnqueueInsertFailureIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_ = b.svc.b.close() // the queue's database is gone
	_, err := b.svc.Enqueue(b.ctx, "a", ReasonManual)
	if err == nil {
		t.Fatal("enqueue on a closed queue succeeded")
	}
	runs, lerr := b.st.ListRuns(b.ctx, "a", 0)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(runs) != 1 || runs[0].State != store.RunFailed || runs[0].FailureCode != string(failure.StoreUnavailable) {
		t.Fatalf("want one failed store_unavailable run, got %+v (enqueue error %v)", runs, err)
	}
}

func TestRecover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	ttl := b.cfg.Settings.LeaseTTL
	other := lease.Process{Host: "elsewhere", Boot: "b", PIDNS: "p", PID: 4242}

	// a: running, its lease expired.
	deadA, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "a", State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	leaseA, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "a", Token: "ta", Holder: other.String(), RunID: deadA.ID, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	// b: running and alive (lease renewed below, after the clock moves).
	liveB, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "b", State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "b", Token: "tb", Holder: other.String(), RunID: liveB.ID, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(ttl + time.Second)
	if _, err := b.st.LeaseRenew(ctx, "b", "tb", ttl); !errors.Is(err, store.ErrLeaseLost) {
		// An expired lease cannot be renewed: take it again for the live run.
		t.Fatalf("renew after expiry: %v", err)
	}
	if _, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "b", Token: "tb2", Holder: other.String(), RunID: liveB.ID, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	// a young run with no lease yet: left alone.
	young, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "b", State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}

	got, err := b.svc.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Runs) != fmt.Sprint([]int64{deadA.ID}) || fmt.Sprint(got.Enqueued) != "[a]" || len(got.Rescued) != 0 {
		t.Fatalf("Recover = %+v, want run %d interrupted and sync a enqueued", got, deadA.ID)
	}
	for id, want := range map[int64]store.RunState{deadA.ID: store.RunInterrupted, liveB.ID: store.RunRunning, young.ID: store.RunRunning} {
		r, err := b.st.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != want {
			t.Fatalf("run %d (%s) is %s, want %s", id, r.SyncID, r.State, want)
		}
		if want == store.RunInterrupted && r.FailureCode != string(failure.Interrupted) {
			t.Fatalf("recovered run code %q", r.FailureCode)
		}
		// Its end is when its lease ran out: `runs` showed no duration.
		if want == store.RunInterrupted && !r.FinishedAt.Equal(leaseA.ExpiresAt) {
			t.Errorf("recovered run finished at %v, want its lease's expiry %v", r.FinishedAt, leaseA.ExpiresAt)
		}
	}
	if q := b.queued(t); len(q) != 1 || q["a"].Reason != ReasonRecovery {
		t.Fatalf("queued %+v, want a recovery job for a", q)
	}

	// The young run grows old without a lease: the next sweep takes it, but
	// sync b's lease is live (held by liveB), so nothing is enqueued.
	b.clk.Advance(ttl / 2)
	if _, err := b.st.LeaseRenew(ctx, "b", "tb2", ttl); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(ttl / 2)
	got, err = b.svc.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Runs) != fmt.Sprint([]int64{young.ID}) || len(got.Enqueued) != 0 {
		t.Fatalf("second Recover = %+v", got)
	}
	// Nothing left: a third sweep does nothing.
	if got, err = b.svc.Recover(ctx); err != nil || len(got.Runs)+len(got.Enqueued)+len(got.Rescued) != 0 {
		t.Fatalf("third Recover = %+v, %v", got, err)
	}
}

// TestPublishBeforeStart: serve publishes the config's syncs before its web
// UI answers, without starting the queue; a sync's page is there at once.
func TestPublishBeforeStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.st.GetSync(b.ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("before Publish: %v, want not found", err)
	}
	if err := b.svc.Publish(b.ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := b.st.GetSync(b.ctx, id); err != nil {
			t.Fatalf("sync %s after Publish: %v", id, err)
		}
	}
	if !b.svc.published {
		t.Fatal("Publish did not record itself: Start would write every definition again")
	}
}

// A resend is queued with the first run id it comes before (so every
// attempt of its job resumes the same resend), and refused while a run of
// the sync is queued: River would merge it into that run.
func TestEnqueueResend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	earlier, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: "a", State: store.RunSucceeded, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.EnqueueResend(b.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if q := b.queued(t)["a"]; !q.Resend || q.ResendBefore != earlier.ID+1 || q.Reason != ReasonManual {
		t.Fatalf("queued %+v; want a resend before run %d", q, earlier.ID+1)
	}
	if _, err := b.svc.EnqueueResend(b.ctx, "a"); !errors.Is(err, ErrRunPending) {
		t.Fatalf("a second resend: %v; want ErrRunPending", err)
	}
	if _, err := b.svc.Enqueue(b.ctx, "b", ReasonSchedule); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.EnqueueResend(b.ctx, "b"); !errors.Is(err, ErrRunPending) {
		t.Fatalf("a resend behind a scheduled run: %v; want ErrRunPending", err)
	}
	if q := b.queued(t)["b"]; q.Resend {
		t.Fatalf("the scheduled run became a resend: %+v", q)
	}
	if _, err := b.svc.EnqueueResend(b.ctx, "nope"); !errors.Is(err, ErrUnknownSync) {
		t.Fatalf("unknown sync: %v", err)
	}
}

// recorder keeps the alerts it is told.
type recorder struct {
	mu  sync.Mutex
	got []alert.Alert
}

func (r *recorder) Notify(_ context.Context, a alert.Alert) (alert.Alert, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, a)
	return a, nil
}

// TestSuccessEndsTheSilence: a run serve or a worker records as succeeded
// ends its sync's dead-man silence (and its workspace's) at once, with the
// resolution notice, not at the next hourly check.
func TestSuccessEndsTheSilence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recorder{}
	checker, err := deadman.New(deadman.Params{Store: b.st, Markers: b.st, Notifier: rec, Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}
	b.svc.deadman = checker
	since := b.clk.Now().Add(-25 * time.Hour)
	for _, m := range []store.DeadmanMarker{
		{Scope: store.DeadmanScopeSync, ID: "a", Workspace: "w", Kind: store.DeadmanNoRuns, Since: since, RaisedAt: since},
		{Scope: store.DeadmanScopeWorkspace, ID: "w", Workspace: "w", Kind: store.DeadmanNoRuns, Since: since, RaisedAt: since},
		{Scope: store.DeadmanScopeSync, ID: "b", Workspace: "w", Kind: store.DeadmanNoRuns, Since: since, RaisedAt: since},
	} {
		if _, err := b.st.PutDeadmanMarker(b.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	b.svc.runEnded(b.ctx, store.Run{ID: 7, SyncID: "a", State: store.RunSucceeded, FinishedAt: b.clk.Now()})
	ms, err := b.st.ListDeadmanMarkers(b.ctx)
	if err != nil || len(ms) != 1 || ms[0].ID != "b" {
		t.Fatalf("markers left %+v (%v), want only b's", ms, err)
	}
	if len(rec.got) != 2 || rec.got[0].Kind != alert.KindDeadmanResolved {
		t.Fatalf("notices %+v, want 2 resolution notices", rec.got)
	}
}

// TestRecoverLeavesAPartitionsStreakAlone: the recovery sweep closes a
// partition's run whose worker died without evaluating a breaker under the
// partition's id, which no sync has: that logged an ERROR "circuit breaker
// evaluation failed ... not found" (an independent check, 2026-12-07).
func TestRecoverLeavesAPartitionsStreakAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs testenv.Output
	b.svc.log = slog.New(slog.NewTextHandler(&logs, nil))
	ttl := b.cfg.Settings.LeaseTTL
	other := lease.Process{Host: "elsewhere", Boot: "b", PIDNS: "p", PID: 4242}
	id := partition.SyncID("a", 2)
	dead, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: id, State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: id, Token: "tp", Holder: other.String(), RunID: dead.ID, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(ttl + time.Second)
	got, err := b.svc.Recover(b.ctx)
	if err != nil || !slices.Contains(got.Runs, dead.ID) {
		t.Fatalf("Recover = %+v, %v; want run %d closed", got, err, dead.ID)
	}
	if strings.Contains(logs.String(), "circuit breaker evaluation failed") {
		t.Fatalf("the breaker was evaluated under the partition's id:\n%s", logs.String())
	}
}
