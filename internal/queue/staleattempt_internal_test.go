package queue

import (
	"context"
	"errors"
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
