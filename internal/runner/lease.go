package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
)

// A write never outlives its lease (docs/guide.md#the-store-and-the-leases). A destination cannot check a
// fence, so time is the only fence it gets: every destination attempt must
// end, and the run's work is cancelled, attemptMargin before the lease's
// local expiry (localExpiry), unless a renewal moved that expiry on. A
// takeover begins at the old holder's expiry at the earliest (or one TTL
// after the lease store noticed it lost its data), so it never overlaps a
// request of the old holder.

// maxAttemptMargin caps attemptMargin for long TTLs (the seed's 15 min).
const maxAttemptMargin = 10 * time.Second

// attemptMargin is how long before the lease's local expiry every
// destination attempt must have ended. It covers the worker's clock running
// slower than the lease store's, the close of an abandoned request's
// connection, and a destination applying a request a moment after its client
// gave up. A fifth of the TTL, at most 10 s: 6 s of the default 30 s, so a
// single attempt still gets 14 s or more between renewals every 10 s.
func attemptMargin(ttl time.Duration) time.Duration { return min(ttl/5, maxAttemptMargin) }

// writeDeadline is the attempt deadline of docs/guide.md#the-store-and-the-leases, on the run's clock: the
// lease's local expiry less attemptMargin. The run's work is cancelled then.
func (r *run) writeDeadline() time.Time { return r.expiry().Add(-attemptMargin(r.LeaseTTL)) }

// destCtx is the context of a destination call (Write, Verify, an Outcomes
// poll): it carries writeDeadline as the attempt deadline, read again
// before each attempt, retry and wait, so a renewal in the meantime extends
// it. Destinations compare it with their own clock, which a deployment
// shares with the run's (pipeline.Options.Clock). A destination that
// ignores it is still stopped: ctx is the run's work, cancelled at the same
// time (armExpiry).
func (r *run) destCtx(ctx context.Context) context.Context {
	return destination.WithAttemptDeadline(ctx, r.writeDeadline)
}

// expiry is the lease's local expiry as last granted or renewed.
func (r *run) expiry() time.Time {
	r.expMu.Lock()
	defer r.expMu.Unlock()
	return r.expiresAt
}

// localExpiry is when this run must consider its lease gone: the time it
// asked plus the TTL, by its own clock, and never later than the expiry the
// lease store reported. The store (Redis) keeps its own clock; counting from
// the moment of asking keeps a skewed worker clock on the safe side.
func localExpiry(asked time.Time, ttl time.Duration, reported time.Time) time.Time {
	e := asked.Add(ttl)
	if !reported.IsZero() && reported.Before(e) && reported.After(asked) {
		return reported
	}
	return e
}

// setExpiry records the lease's new local expiry and re-arms the timer that
// cancels the work at its writeDeadline.
func (r *run) setExpiry(t time.Time) {
	r.expMu.Lock()
	r.expiresAt = t
	r.expMu.Unlock()
	r.armExpiry()
}

// armExpiry (re-)arms the expiry timer on the run's clock, once the work's
// cancel function is known (startExpiry). At writeDeadline without a
// successful renewal the work is cancelled at once, not at the next renewal
// tick, and with it every destination call in flight.
func (r *run) armExpiry() {
	r.expMu.Lock()
	stop := r.stopWork
	if stop == nil {
		r.expMu.Unlock()
		return
	}
	r.expGen++
	gen, old := r.expGen, r.expTimer
	r.expTimer = nil
	at := r.expiresAt.Add(-attemptMargin(r.LeaseTTL))
	r.expMu.Unlock()
	if old != nil {
		old.Stop()
	}
	// The call may run at once (a fake clock, a deadline already past), so
	// no lock is held across AfterFunc; expired ignores a stale timer.
	t := clock.AfterFunc(r.Clock, at.Sub(r.Clock.Now()), func() { r.expired(gen) })
	r.expMu.Lock()
	if r.expGen == gen {
		r.expTimer = t
		t = nil
	}
	r.expMu.Unlock()
	if t != nil {
		t.Stop()
	}
}

// expired cancels the work if timer gen is still the current one (no
// renewal re-armed it since).
func (r *run) expired(gen int) {
	r.expMu.Lock()
	current, stop, exp := gen == r.expGen, r.stopWork, r.expiresAt
	r.expMu.Unlock()
	if !current || stop == nil {
		return
	}
	stop(fmt.Errorf("%w: no renewal succeeded before the lease's local expiry (%s) less the %s margin for destination calls",
		errLeaseLost, exp.UTC().Format(time.RFC3339Nano), attemptMargin(r.LeaseTTL)))
}

// startExpiry makes the expiry timer cancel the work with stop, and arms
// it; the returned function disarms it for good.
func (r *run) startExpiry(stop context.CancelCauseFunc) (disarm func()) {
	r.expMu.Lock()
	r.stopWork = stop
	r.expMu.Unlock()
	r.armExpiry()
	return func() {
		r.expMu.Lock()
		r.stopWork = nil
		r.expGen++
		t := r.expTimer
		r.expTimer = nil
		r.expMu.Unlock()
		if t != nil {
			t.Stop()
		}
	}
}

// renewTimeout bounds one renewal: a third of the TTL (the default renewal
// interval), so a renewal stuck on a dead connection is retried on another
// while the lease still has time, and never past the lease's local expiry,
// after which renewing is pointless.
func (r *run) renewTimeout(asked time.Time) time.Time {
	d := asked.Add(r.LeaseTTL / 3)
	if e := r.expiry(); e.Before(d) {
		return e
	}
	return d
}

// renewLease asks the lease store to extend the lease, within renewTimeout,
// and returns the grant and the time it asked.
func (r *run) renewLease(ctx context.Context) (lease.Grant, time.Time, error) {
	asked := r.Clock.Now()
	rctx, cancel := clock.WithDeadline(ctx, r.Clock, r.renewTimeout(asked))
	defer cancel()
	g, err := r.Leases.Renew(rctx, r.grant, r.LeaseTTL)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		err = fmt.Errorf("the lease store did not answer the renewal in time: %w", err)
	}
	return g, asked, err
}

// renew extends the lease and verifies it is still this run's.
func (r *run) renew(ctx context.Context) error {
	g, asked, err := r.renewLease(ctx)
	switch {
	case errors.Is(err, lease.ErrLost):
		return failure.Wrap(failure.LeaseLost, err, SentenceLeaseLost)
	case err != nil && !r.Clock.Now().Before(r.expiry()):
		// Could not renew and our time is up: somebody else may hold it now.
		return failure.Wrap(failure.LeaseLost, err, SentenceLeaseLost)
	case err != nil:
		return storeFailure(ctx, err, "renew the lease")
	}
	r.setExpiry(localExpiry(asked, r.LeaseTTL, g.ExpiresAt))
	return nil
}

// ensureLease is the guard before a claim and a destination call: a run that
// was paused (SIGSTOP, a long GC, a frozen VM) past its lease must notice
// before it writes, not after. The fence stops its store writes; this and
// the expiry timer stop its destination writes. With less than a third of
// the TTL left, it renews.
func (r *run) ensureLease(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, errLeaseLost) {
		return failure.Wrap(failure.LeaseLost, err, SentenceLeaseLost)
	}
	if r.Clock.Now().Add(r.LeaseTTL / 3).Before(r.expiry()) {
		return nil
	}
	return r.renew(ctx)
}

// startRenewer renews the lease every LeaseRenew on the run's clock; on loss
// it cancels the work. A renewal that fails otherwise (the store or Redis
// unreachable) is retried at the next tick; the expiry timer stops the work
// if none succeeds in time.
func (r *run) startRenewer(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	if r.LeaseRenew <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	tick := make(chan struct{}, 1)
	arm := func() clock.Timer {
		return clock.AfterFunc(r.Clock, r.LeaseRenew, func() {
			select {
			case tick <- struct{}{}:
			default: // a renewal is still running; it is the tick
			}
		})
	}
	go func() {
		defer close(finished)
		t := arm()
		defer func() { t.Stop() }()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick:
			}
			t = arm()
			g, asked, err := r.renewLease(ctx)
			switch {
			case errors.Is(err, lease.ErrLost):
				cancel(fmt.Errorf("%w: %w", errLeaseLost, err))
				return
			case err != nil:
				// Keep trying; once our TTL has run out somebody else may
				// hold the sync, so stop writing (the expiry timer does so
				// earlier).
				if !r.Clock.Now().Before(r.expiry()) {
					cancel(fmt.Errorf("%w: could not renew before expiry: %w", errLeaseLost, err))
					return
				}
			default:
				r.setExpiry(localExpiry(asked, r.LeaseTTL, g.ExpiresAt))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// acquireFailure maps a failed Acquire other than ErrHeld. A lease store
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
	return failure.Wrap(failure.StoreUnavailable, err, "take the sync's lease")
}
