package queue

import (
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
)

// TestRecoverRescuesOrphanedJob: a run-sync job still running whose worker
// died after its run succeeded (no running run, no lease) is made available
// again; one whose sync's lease is live is left alone.
func TestRecoverRescuesOrphanedJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	ttl := b.cfg.Settings.LeaseTTL
	rb := b.svc.b.(*riverBackend[*sql.Tx])
	other := lease.Process{Host: "elsewhere", Boot: "b", PIDNS: "p", PID: 4242}

	markRunning := func(t *testing.T, id int64) {
		t.Helper()
		j := markJobRunning(t, b, id, time.Now().Add(-time.Hour))
		if j.State != rivertype.JobStateRunning || j.AttemptedAt == nil || !j.AttemptedAt.Before(time.Now().Add(-ttl)) {
			t.Fatalf("job %d after update: state %s, attempted at %v", id, j.State, j.AttemptedAt)
		}
	}
	enqueueRunning := func(t *testing.T, syncID string) int64 {
		t.Helper()
		e, err := b.svc.Enqueue(ctx, syncID, ReasonSchedule)
		if err != nil || e.Duplicate {
			t.Fatalf("enqueue %s: %+v, %v", syncID, e, err)
		}
		markRunning(t, e.JobID)
		return e.JobID
	}

	// a: its run succeeded and released the lease; the worker died before
	// River marked the job completed.
	orphan := enqueueRunning(t, "a")
	runA, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "a", State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	runA.State = store.RunSucceeded
	if err := b.st.UpdateRun(ctx, runA); err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.LeaseGet(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("sync a must hold no lease: %v", err)
	}

	// b: its job is running and another process holds the sync's lease,
	// unexpired on the fake clock.
	held := enqueueRunning(t, "b")
	runB, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "b", State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "b", Token: "tb", Holder: other.String(), RunID: runB.ID, TTL: 2 * ttl}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(ttl + time.Second) // both runs are older than the grace; b's lease still live

	got, err := b.svc.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Rescued, []int64{orphan}) {
		t.Fatalf("Recover rescued %v, want only the orphaned job %d of sync a (not %d of sync b)", got.Rescued, orphan, held)
	}
	if len(got.Runs) != 0 || len(got.Enqueued) != 0 {
		t.Fatalf("Recover = %+v, want no run interrupted and nothing enqueued", got)
	}
	for id, want := range map[int64]rivertype.JobState{orphan: rivertype.JobStateAvailable, held: rivertype.JobStateRunning} {
		j, err := rb.client.JobGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != want {
			t.Fatalf("job %d is %s, want %s", id, j.State, want)
		}
	}
	for id, want := range map[int64]store.RunState{runA.ID: store.RunSucceeded, runB.ID: store.RunRunning} {
		r, err := b.st.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != want {
			t.Fatalf("run %d (%s) is %s, want %s", id, r.SyncID, r.State, want)
		}
	}
	// The rescued job is available to be worked, so sync a's next schedule
	// tick is a duplicate of it (the job is worked, not a new one inserted).
	if e, err := b.svc.Enqueue(ctx, "a", ReasonSchedule); err != nil || !e.Duplicate || e.JobID != orphan {
		t.Fatalf("enqueue after rescue: %+v, %v; want a duplicate of job %d", e, err, orphan)
	}
}

// markJobRunning moves queued job id to running, attempted at attempted by
// a worker (River's times are wall-clock times), as River's fetch would.
func markJobRunning(t *testing.T, b *bundle, id int64, attempted time.Time) *rivertype.JobRow {
	t.Helper()
	rb := b.svc.b.(*riverBackend[*sql.Tx])
	at := attempted.UTC()
	j, err := rb.driver.GetExecutor().JobUpdateFull(b.ctx, &riverdriver.JobUpdateFullParams{
		ID: id, Schema: rb.schema,
		StateDoUpdate: true, State: rivertype.JobStateRunning,
		AttemptDoUpdate: true, Attempt: 1,
		AttemptedAtDoUpdate: true, AttemptedAt: &at,
		AttemptedByDoUpdate: true, AttemptedBy: []string{"dead-worker"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return j
}
