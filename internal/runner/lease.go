package runner

import (
	"context"
	"errors"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
)

// The run holds its sync's lease as a lease.Held, which owns the expiry,
// the renewals and the attempt deadline (docs/guide.md#the-store-and-the-leases);
// this file maps what it reports to failure codes.

// destCtx is the context of a destination call (Write, Verify, an Outcomes
// poll): it carries the lease's WriteDeadline as the attempt deadline, read
// again before each attempt, retry and wait, so a renewal in the meantime
// extends it. Destinations compare it with their own clock, which a
// deployment shares with the run's (app.Options.Clock). A destination that
// ignores it is still stopped: ctx is the run's work, cancelled at the same
// time (lease.Held.Keep).
func (r *run) destCtx(ctx context.Context) context.Context {
	ctx = destination.WithWaitNotice(ctx, func(w destination.Wait) {
		// A run sleeping on a 429's Retry-After for up to a minute looked
		// hung: nothing was logged and the progress stood still.
		r.Logger.Info("waiting before the destination's next request", "sync", r.Sync.ID, "run", r.rec.ID,
			"request", w.Route, "wait", w.For.Round(100*time.Millisecond).String(), "why", w.Why)
	})
	return destination.WithAttemptDeadline(ctx, r.lease.WriteDeadline)
}

// leaseFailure maps an error of the held lease: a loss is lease_lost, any
// other a store failure worth retrying.
func leaseFailure(ctx context.Context, err error) error {
	if errors.Is(err, lease.ErrLost) {
		return failure.Wrap(failure.LeaseLost, err, SentenceLeaseLost)
	}
	ferr := storeFailure(ctx, err, "renew the lease")
	if ctx.Err() != nil {
		return renewUnanswered{ferr}
	}
	return ferr
}

// renewUnanswered is a renewal cut short by its caller's context: while
// nobody stopped the run, the lease store did not answer in time
// (run.unanswered).
type renewUnanswered struct{ error }

func (e renewUnanswered) Unwrap() error { return e.error }

// unanswered is the failure of a run whose store or lease store call timed
// out (err, interrupted by its own deadline): lease_lost when the lease
// could not be renewed (its last renewal failed, or its time is up), as a
// worker cut off from the lease store ends (docs/guide.md#the-store-and-the-leases);
// store_unavailable otherwise.
func (r *run) unanswered(err error) error {
	var ru renewUnanswered
	if rf := r.lease.RenewFailure(); rf != nil || errors.As(err, &ru) || !r.Clock.Now().Before(r.lease.WriteDeadline()) {
		return failure.Wrap(failure.LeaseLost, errors.Join(rf, err), "%s Its lease could not be renewed in time", SentenceLeaseLost)
	}
	return failure.Wrap(failure.StoreUnavailable, err, "the store did not answer in time")
}

// renew extends the lease and verifies it is still this run's.
func (r *run) renew(ctx context.Context) error {
	if err := r.lease.Renew(ctx); err != nil {
		return leaseFailure(ctx, err)
	}
	return nil
}

// ensureLease is the guard before a claim and a destination call
// (lease.Held.Ensure).
func (r *run) ensureLease(ctx context.Context) error {
	if err := r.lease.Ensure(ctx); err != nil {
		return leaseFailure(ctx, err)
	}
	return nil
}

// acquireFailure maps a failed Hold other than ErrHeld. A lease store
// that lost its data grants nothing for one TTL (docs/guide.md#the-store-and-the-leases): the run fails as
// store_unavailable, which is retryable (the queue's first retry, 60 s on,
// comes after the default 30 s quarantine), rather than already_running,
// whose skipped runs are never retried: a recovery run skipped there would
// leave the sync idle until its next schedule.
func acquireFailure(err error) error {
	var qe *lease.QuarantineError
	if errors.As(err, &qe) {
		return failure.Wrap(failure.StoreUnavailable, err, "%s", qe.Error())
	}
	if errors.Is(err, store.ErrUnavailable) {
		err = notTaken{err}
	}
	return failure.Wrap(failure.StoreUnavailable, err, "take the sync's lease")
}

// ErrLeaseNotTaken marks a run that ended before it started because its
// lease store could not be asked for the lease (store.ErrUnavailable: not
// reached, or not usable now). Nothing was claimed or written, so the job
// may go to another process at once: a worker cut off from Redis alone
// would otherwise fail every job it takes and push each sync behind a
// retry's backoff while the other workers idle (internal/queue jobResult).
var ErrLeaseNotTaken = errors.New("the sync's lease could not be taken")

// notTaken marks err as ErrLeaseNotTaken without changing its words.
type notTaken struct{ error }

func (e notTaken) Unwrap() error      { return e.error }
func (notTaken) Is(target error) bool { return target == ErrLeaseNotTaken }
