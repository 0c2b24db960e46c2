package queue

import (
	"errors"
	"testing"
	"time"

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
	at := time.Now().UTC()
	var row *rivertype.JobRow
	jobExecutor(t, b.svc, func(ex riverdriver.Executor, schema string) {
		row, err = ex.JobUpdateFull(b.ctx, &riverdriver.JobUpdateFullParams{
			ID: res.JobID, Schema: schema,
			StateDoUpdate: true, State: rivertype.JobStateRunning,
			AttemptDoUpdate: true, Attempt: 2,
			AttemptedAtDoUpdate: true, AttemptedAt: &at,
		})
		if err != nil {
			t.Fatal(err)
		}
	})
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
