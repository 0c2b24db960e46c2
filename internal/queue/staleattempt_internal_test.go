package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// TestStaleAttemptLeavesTheJobAlone: a worker frozen while it ran a job,
// whose job a recovery handed on (attempt 2 runs it now), ends its own
// attempt with a lost lease. That error set the job retryable under
// attempt 2, whose completion then changed nothing: the sync waited out
// River's backoff, every tick refused as the job's duplicate (make chaos
// pauses, 2026-12-05: 65 s without a run). The stale attempt's result is
// now nil; the current attempt's is its own.
func TestStaleAttemptLeavesTheJobAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.svc.Enqueue(b.ctx, "a", ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	row := setRunning(t, b, res.JobID, 2)
	lost := errors.New("lease lost")
	stale := *row
	stale.Attempt = 1
	if got := b.svc.ownResult(b.ctx, &stale, lost); got != nil {
		t.Errorf("attempt 1 of a job at attempt 2: %v, want nil", got)
	}
	if got := b.svc.ownResult(b.ctx, row, lost); !errors.Is(got, lost) {
		t.Errorf("attempt 2, the current one: %v, want its error", got)
	}
	if got := b.svc.ownResult(b.ctx, &stale, nil); got != nil {
		t.Errorf("a success: %v", got)
	}
}

// handOnAtStop is a lease manager whose first renewal (a job heartbeat's,
// as its attempt stops it) runs handOn first: the time a recovery sweep
// hands the job on when stopping takes seconds (the lease store does not
// answer).
type handOnAtStop struct {
	lease.Manager
	once   sync.Once
	handOn func()
}

func (m *handOnAtStop) Renew(ctx context.Context, g lease.Grant, ttl time.Duration) (lease.Grant, error) {
	m.once.Do(m.handOn)
	return m.Manager.Renew(ctx, g, ttl)
}

// TestStaleAttemptJudgedAfterItsHeartbeat: the job is handed on to attempt
// 2 while attempt 1 stops its heartbeat (a worker cut off from Redis took
// 9 s there, 2026-12-06); attempt 1's lost lease is then not its result to
// give, or River would set attempt 2's running job retryable for minutes.
func TestStaleAttemptJudgedAfterItsHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.svc.Enqueue(b.ctx, "a", ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	first := setRunning(t, b, res.JobID, 1)
	b.svc.leases = &handOnAtStop{Manager: b.svc.leases, handOn: func() { setRunning(t, b, res.JobID, 2) }}
	lost := failure.New(failure.LeaseLost, "lease lost")
	if got := b.svc.work(b.ctx, first, "a#job", func() error { return lost }); got != nil {
		t.Fatalf("attempt 1, handed on while it stopped its heartbeat: %v, want nil", got)
	}
}

// setRunning makes job id running its attempt n, as River does when a
// worker fetches it.
func setRunning(t *testing.T, b *bundle, id int64, n int) (row *rivertype.JobRow) {
	t.Helper()
	at := time.Now().UTC()
	jobExecutor(t, b.svc, func(ex riverdriver.Executor, schema string) {
		var err error
		row, err = ex.JobUpdateFull(b.ctx, &riverdriver.JobUpdateFullParams{
			ID: id, Schema: schema,
			StateDoUpdate: true, State: rivertype.JobStateRunning,
			AttemptDoUpdate: true, Attempt: n,
			AttemptedAtDoUpdate: true, AttemptedAt: &at,
		})
		if err != nil {
			t.Error(err)
		}
	})
	return row
}

// TestHandedOnAttemptWaitsForTheHolder: a recovery sweep handed the job on
// while its first attempt was alive after all (frozen, or slow to take its
// heartbeat, past a lease TTL), and the second attempt's run found the
// lease held by it. Completed as skipped, the job left nothing to retry
// the first attempt's failure (a lost lease), and a partitioned run failed
// partitions_unfinished with a partition half written (CI, 2026-12-07).
// The second attempt waits a renewal interval instead, without using an
// attempt, and runs once the holder is done.
func TestHandedOnAttemptWaitsForTheHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.svc.Enqueue(b.ctx, "a", ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	setRunning(t, b, res.JobID, 1)
	if err := b.svc.b.rescue(b.ctx, []int64{res.JobID}, time.Now().Add(time.Minute), rescueNote); err != nil {
		t.Fatal(err)
	}
	handedOn := setRunning(t, b, res.JobID, 2)
	held := failure.New(failure.AlreadyRunning, "another run holds the sync's lease")
	var snooze *rivertype.JobSnoozeError
	got := b.svc.work(b.ctx, handedOn, "a#job", func() error { return held })
	if !errors.As(got, &snooze) || snooze.Duration != b.cfg.Settings.LeaseRenew {
		t.Fatalf("a handed-on attempt whose sync is held: %v, want snoozed for the renewal interval %s", got, b.cfg.Settings.LeaseRenew)
	}

	// Each wait records a skipped run: they double, up to two minutes.
	for n, want := range map[int]time.Duration{1: 20 * time.Second, 2: 40 * time.Second, 5: 2 * time.Minute, 30: 2 * time.Minute} {
		waited := *handedOn
		waited.Metadata = []byte(fmt.Sprintf(`{"snoozes":%d}`, n))
		got := b.svc.work(b.ctx, &waited, "a#job", func() error { return held })
		if !errors.As(got, &snooze) || snooze.Duration != want {
			t.Errorf("after %d waits: %v, want snoozed for %s", n, got, want)
		}
	}

	// Skipped otherwise, as before: a job never handed on, and one that
	// waited its last time.
	fresh, err := b.svc.Enqueue(b.ctx, "b", ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.svc.work(b.ctx, setRunning(t, b, fresh.JobID, 1), "b#job", func() error { return held }); got != nil {
		t.Errorf("a first attempt whose sync is held: %v, want nil (skipped)", got)
	}
	waited := *handedOn
	waited.Metadata = []byte(fmt.Sprintf(`{"snoozes":%d}`, heldSnoozes))
	if got := b.svc.work(b.ctx, &waited, "a#job", func() error { return held }); got != nil {
		t.Errorf("a handed-on attempt that waited %d times: %v, want nil (skipped)", heldSnoozes, got)
	}
}
