package queue

import (
	"database/sql"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
)

// TestRecoverYoungRunDeadHere: a run younger than the lease TTL whose own
// lease is held by a dead process of this machine is resumed by the first
// sweep, its River job with it; a young run whose lease is another run's,
// or whose holder is on another machine, is left to the age rule.
func TestRecoverYoungRunDeadHere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	ttl := b.cfg.Settings.LeaseTTL
	rb := b.svc.b.(*riverBackend[*sql.Tx])

	deadHere, deadElsewhere := deadProcesses(t)

	// running moves sync's queued job to running, attempted a second ago.
	running := func(t *testing.T, syncID string) int64 {
		t.Helper()
		e, err := b.svc.Enqueue(ctx, syncID, ReasonSchedule)
		if err != nil || e.Duplicate {
			t.Fatalf("enqueue %s: %+v, %v", syncID, e, err)
		}
		markJobRunning(t, b, e.JobID, time.Now().Add(-time.Second))
		return e.JobID
	}
	runWithLease := func(t *testing.T, syncID string, holder lease.Process, other bool) store.Run {
		t.Helper()
		r, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: syncID, State: store.RunRunning, Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		id := r.ID
		if other {
			id++ // the lease of a run that is not r
		}
		if _, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: syncID, Token: "t-" + syncID, Holder: holder.String(), RunID: id, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		return r
	}

	jobA := running(t, "a")
	runA := runWithLease(t, "a", deadHere, false)
	jobB := running(t, "b")
	runB := runWithLease(t, "b", deadElsewhere, false)
	b.clk.Advance(ttl / 3) // young, and every lease unexpired

	got, err := b.svc.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Runs, []int64{runA.ID}) || !slices.Equal(got.Rescued, []int64{jobA}) || len(got.Enqueued) != 0 {
		t.Fatalf("Recover = %+v, want run %d interrupted and its job %d rescued, nothing of sync b (job %d)", got, runA.ID, jobA, jobB)
	}
	for id, want := range map[int64]store.RunState{runA.ID: store.RunInterrupted, runB.ID: store.RunRunning} {
		if r, err := b.st.GetRun(ctx, id); err != nil || r.State != want {
			t.Fatalf("run %d: %+v, %v; want %s", id, r, err, want)
		}
	}
	for id, want := range map[int64]rivertype.JobState{jobA: rivertype.JobStateAvailable, jobB: rivertype.JobStateRunning} {
		if j, err := rb.client.JobGet(ctx, id); err != nil || j.State != want {
			t.Fatalf("job %d: %v, %v; want %s", id, j.State, err, want)
		}
	}

	// A young run whose sync's lease a dead local process holds for another
	// run may not have taken its lease yet: left alone.
	if err := b.st.LeaseRelease(ctx, "a", "t-a"); err != nil {
		t.Fatal(err)
	}
	runC := runWithLease(t, "a", deadHere, true)
	got, err = b.svc.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != 0 {
		t.Fatalf("Recover = %+v, want run %d left alone (the lease is another run's)", got, runC.ID)
	}
}

// TestSweepAtLeaseExpiry: a run whose lease is held on another machine and
// not renewed is resumed by a sweep right after the lease's expiry, when
// that comes before the next periodic sweep, young or old; a lease that
// expires after the next periodic sweep is left to it.
func TestSweepAtLeaseExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	ttl := b.cfg.Settings.LeaseTTL
	elsewhere := lease.ThisProcess()
	elsewhere.Host = "elsewhere"

	r, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "a", State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "a", Token: "t-a", Holder: elsewhere.String(), RunID: r.ID, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	// Its holder died right after taking the lease: it ends one TTL on,
	// just as the run turns one TTL old.
	b.clk.Advance(ttl - b.svc.recovery - time.Second)
	if err := b.svc.sweep(ctx); err != nil { // the lease ends after the next periodic sweep
		t.Fatal(err)
	}
	if got, _ := b.st.GetRun(ctx, r.ID); got.State != store.RunRunning {
		t.Fatalf("run after a sweep %s before its lease's end: %s, want running", b.svc.recovery+time.Second, got.State)
	}
	b.clk.Advance(3 * time.Second) // now the lease ends before the next periodic sweep

	done := make(chan error, 1)
	go func() { done <- b.svc.sweep(ctx) }()
	for b.clk.Pending() == 0 { // the sweep waits for the lease's end
		select {
		case err := <-done:
			t.Fatalf("sweep returned (%v) without waiting for the lease's end", err)
		case <-time.After(time.Millisecond):
		}
	}
	if got, _ := b.st.GetRun(ctx, r.ID); got.State != store.RunRunning {
		t.Fatalf("run before its lease's end: %s, want running", got.State)
	}
	b.clk.Advance(b.svc.recovery - time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := b.st.GetRun(ctx, r.ID); got.State != store.RunInterrupted {
		t.Fatalf("run after its lease's end: %s, want interrupted by the sweep aimed at it", got.State)
	}
}

// TestRecoverYoungJobWhoseHeartbeatDiedHere: a young job whose worker
// died on this machine before its run took a lease (or while it worked a
// coordinator) is told by its attempt's own heartbeat, held by the dead
// process, and handed back by the first sweep; a heartbeat of another
// attempt of the job, or of a process on another machine, is left to the
// age rule.
func TestRecoverYoungJobWhoseHeartbeatDiedHere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	ttl := b.cfg.Settings.LeaseTTL
	rb := b.svc.b.(*riverBackend[*sql.Tx])

	deadHere, deadElsewhere := deadProcesses(t)

	// started is sync's job, running for a second, and its attempt's
	// heartbeat taken by holder.
	started := func(t *testing.T, syncID string, holder lease.Process) int64 {
		t.Helper()
		e, err := b.svc.Enqueue(ctx, syncID, ReasonSchedule)
		if err != nil || e.Duplicate {
			t.Fatalf("enqueue %s: %+v, %v", syncID, e, err)
		}
		j := markJobRunning(t, b, e.JobID, time.Now().Add(-time.Second))
		owner := beatOwner(j)
		if _, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: heartbeatID(KindRunSync, syncID), Token: "beat-" + syncID,
			Holder: holder.String(), RunID: owner, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	jobA := started(t, "a", deadHere)
	jobB := started(t, "b", deadElsewhere)

	got, err := b.svc.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Rescued, []int64{jobA}) || len(got.Runs) != 0 {
		t.Fatalf("Recover = %+v, want job %d rescued and nothing else (job %d left to the age rule)", got, jobA, jobB)
	}
	for id, want := range map[int64]rivertype.JobState{jobA: rivertype.JobStateAvailable, jobB: rivertype.JobStateRunning} {
		if j, err := rb.client.JobGet(ctx, id); err != nil || j.State != want {
			t.Fatalf("job %d: %v, %v; want %s", id, j.State, err, want)
		}
	}

	// The job's next attempt has begun and not yet taken the heartbeat an
	// earlier attempt's dead worker holds: left alone.
	j := markJobRunning(t, b, jobA, time.Now().Add(-time.Second))
	if err := b.st.LeaseRelease(ctx, heartbeatID(KindRunSync, "a"), "beat-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: heartbeatID(KindRunSync, "a"), Token: "beat-a2",
		Holder: deadHere.String(), RunID: beatOwner(j) + 1, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.svc.Recover(ctx); err != nil || len(got.Rescued) != 0 {
		t.Fatalf("Recover = %+v, %v; want job %d left alone (the heartbeat is another attempt's)", got, err, jobA)
	}
}

// deadProcesses are a process of this machine that has exited and the same
// on another machine.
func deadProcesses(t *testing.T) (here, elsewhere lease.Process) {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	here = lease.ThisProcess()
	here.PID = cmd.Process.Pid
	elsewhere = here
	elsewhere.Host = "elsewhere"
	return here, elsewhere
}
