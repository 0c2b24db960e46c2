package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// A write never outlives its lease (docs/guide.md#the-store-and-the-leases).
// A destination cannot check a fence, so time is the only fence it gets:
// every destination attempt must end, and the holder's work is cancelled,
// AttemptMargin before the lease's local expiry (LocalExpiry), unless a
// renewal moved that expiry on. A takeover begins at the old holder's expiry
// at the earliest (or one TTL after the lease store noticed it lost its
// data), so it never overlaps a request of the old holder.

// wallCheck is how often a holder guarding its work looks at the wall
// clock for a step that ended its lease (arm).
const wallCheck = time.Second

// maxAttemptMargin caps AttemptMargin for long TTLs (the seed's 15 min).
const maxAttemptMargin = 10 * time.Second

// AttemptMargin is how long before the lease's local expiry every
// destination attempt must have ended. It covers the worker's clock running
// slower than the lease store's, the close of an abandoned request's
// connection, and a destination applying a request a moment after its
// client gave up. A fifth of the TTL, at most 10 s: 6 s of the default 30 s,
// so a single attempt still gets 14 s or more between renewals every 10 s.
func AttemptMargin(ttl time.Duration) time.Duration { return min(ttl/5, maxAttemptMargin) }

// LocalExpiry is when a holder must consider its lease gone: the time it
// asked plus the TTL, by its own clock, and never later than the expiry the
// lease store reported. The store (Redis) keeps its own clock; counting from
// the moment of asking keeps a skewed worker clock on the safe side.
//
// The result is always asked plus a duration, so it keeps asked's monotonic
// reading: every later comparison with the holder's clock (Ensure, Renew,
// an attempt's deadline) measures elapsed time, and a step of the wall
// clock (an NTP correction, a VM resumed) cannot lengthen the lease. A
// reported expiry is a wall time read from elsewhere, and has no monotonic
// reading of its own.
func LocalExpiry(asked time.Time, ttl time.Duration, reported time.Time) time.Time {
	left := ttl
	if !reported.IsZero() && reported.After(asked) {
		left = min(left, reported.Sub(asked))
	}
	return asked.Add(left)
}

// HoldParams asks for a sync's lease to hold.
type HoldParams struct {
	Manager Manager
	SyncID  string
	RunID   int64
	TTL     time.Duration
	// RenewEvery is the interval of Keep's background renewals (0: none).
	RenewEvery time.Duration
	Clock      clock.Clock
}

// Held is a lease this process holds. It owns the grant's local expiry
// (counted on the holder's clock from the moment it asked), its renewal,
// the signal of its loss (the cause ErrLost on the work's context) and
// WriteDeadline, the deadline every destination attempt must respect.
type Held struct {
	m     Manager
	clk   clock.Clock
	ttl   time.Duration
	every time.Duration
	grant Grant // immutable; its expiry lives in expiresAt

	mu        sync.Mutex
	expiresAt time.Time               // the local expiry as last granted or renewed
	wallAt    time.Time               // the same on the wall clock (see wallExpiry)
	stopWork  context.CancelCauseFunc // cancels the work; nil outside Keep
	timer     clock.Timer             // fires at expiresAt less AttemptMargin
	gen       int                     // counts arms, so a stale timer is ignored
	// renewErr is the last renewal's error, nil once one succeeds: a
	// lease that runs out because its store refuses renewals (an ACL
	// changed under the process) says why, not only that it ran out.
	renewErr error
}

// Hold acquires the sync's lease. Its errors are Acquire's: ErrHeld (a
// *HeldError), a *QuarantineError, or the lease store's.
func Hold(ctx context.Context, p HoldParams) (*Held, error) {
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	asked := clk.Now()
	g, err := p.Manager.Acquire(ctx, AcquireParams{SyncID: p.SyncID, RunID: p.RunID, TTL: p.TTL})
	if err != nil {
		return nil, err
	}
	exp := LocalExpiry(asked, p.TTL, g.ExpiresAt)
	return &Held{m: p.Manager, clk: clk, ttl: p.TTL, every: p.RenewEvery, grant: g,
		expiresAt: exp, wallAt: wallExpiry(asked, exp)}, nil
}

// Fence is the grant's fence: every store write of the holder carries it.
func (h *Held) Fence() int64 { return h.grant.Fence }

// FreeFor is how long the lease had been free when it was granted (the
// time since the previous holder's lease ended), zero when unknown.
func (h *Held) FreeFor() time.Duration { return h.grant.FreeFor }

// Token identifies this grant in the lease store.
func (h *Held) Token() string { return h.grant.Token }

// Store is the store the lease lives in (an embedded lease), or nil (a
// lease in Redis). A holder checkpointing to that store renews the lease in
// the checkpoint's own transaction (store.CheckpointParams.Lease) and then
// calls RenewedAt.
func (h *Held) Store() store.Leases { return h.grant.Store }

// TTL is the lease's time to live.
func (h *Held) TTL() time.Duration { return h.ttl }

// Expiry is the lease's local expiry as last granted or renewed, brought
// forward if the wall clock has run ahead of the monotonic one since (see
// wallExpiry).
func (h *Held) Expiry() time.Time {
	h.mu.Lock()
	exp, wall := h.expiresAt, h.wallAt
	h.mu.Unlock()
	return effectiveExpiry(h.clk.Now(), exp, wall)
}

// wallExpiry is the local expiry exp, counted from asked on the wall clock.
//
// The monotonic clock stops while the machine sleeps (a laptop's lid
// closed, a suspended VM); the wall clock, the lease store's and that of
// every other process do not. A holder that woke up with its monotonic
// expiry still ahead must not write: other processes, counting on the wall
// clock, may already have taken the lease over. So a holder also counts
// the lease on the wall clock, and whichever expiry comes first holds. A
// step of the wall clock back cannot lengthen the lease (the monotonic
// expiry still holds); one forward shortens it, the safe side.
func wallExpiry(asked, exp time.Time) time.Time { return asked.Round(0).Add(exp.Sub(asked)) }

// effectiveExpiry is the earlier of exp and wall (a wall time), as a time
// on now's clock readings.
func effectiveExpiry(now, exp, wall time.Time) time.Time {
	if w := now.Add(wall.Sub(now.Round(0))); w.Before(exp) {
		return w
	}
	return exp
}

// WriteDeadline is the attempt deadline of every destination call: the
// local expiry (Expiry) less AttemptMargin, on the holder's clock. The work
// is cancelled then (Keep).
func (h *Held) WriteDeadline() time.Time { return h.Expiry().Add(-AttemptMargin(h.ttl)) }

// Renew extends the lease, within a third of the TTL and never past its
// local expiry. The error wraps ErrLost when the lease is gone or when the
// renewal failed and the local expiry has passed (somebody else may hold
// it now); any other error is the lease store's, worth retrying.
func (h *Held) Renew(ctx context.Context) error {
	asked := h.clk.Now()
	deadline := asked.Add(h.ttl / 3)
	if e := h.Expiry(); e.Before(deadline) {
		deadline = e
	}
	rctx, cancel := clock.WithDeadline(ctx, h.clk, deadline)
	defer cancel()
	g, err := h.m.Renew(rctx, h.grant, h.ttl)
	if err == nil || ctx.Err() == nil {
		h.mu.Lock()
		h.renewErr = err
		h.mu.Unlock()
	}
	switch {
	case errors.Is(err, ErrLost):
		return err
	case err != nil && ctx.Err() == nil && rctx.Err() != nil:
		err = fmt.Errorf("the lease store did not answer the renewal in time: %w", err)
	}
	if err != nil {
		if !h.clk.Now().Before(h.Expiry()) {
			return fmt.Errorf("%w: could not renew before expiry: %w", ErrLost, err)
		}
		return err
	}
	h.setExpiry(asked, LocalExpiry(asked, h.ttl, g.ExpiresAt))
	return nil
}

// checkFence asks a FenceChecker whether the held fence is still the
// store's, within a third of the TTL.
func (h *Held) checkFence(ctx context.Context) error {
	fc, ok := h.m.(FenceChecker)
	if !ok {
		return nil
	}
	cctx, cancel := clock.WithDeadline(ctx, h.clk, h.clk.Now().Add(h.ttl/3))
	defer cancel()
	return fc.CheckFence(cctx, h.grant)
}

// RenewedAt records a renewal the lease store granted when asked at asked
// (in a checkpoint's transaction, see Store).
func (h *Held) RenewedAt(asked time.Time) { h.setExpiry(asked, LocalExpiry(asked, h.ttl, time.Time{})) }

// Ensure is the guard before a claim and a destination call: a holder that
// was paused (SIGSTOP, a long GC, a frozen VM) past its lease must notice
// before it writes, not after. The fence stops its store writes; this and
// Keep's expiry timer stop its destination writes. With less than a third
// of the TTL left, it renews. Errors are Renew's, or ctx's cause when the
// lease was lost.
func (h *Held) Ensure(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, ErrLost) {
		return err
	}
	if h.clk.Now().Add(h.ttl / 3).Before(h.Expiry()) {
		return nil
	}
	return h.Renew(ctx)
}

// Keep makes the lease guard the work: it renews every RenewEvery and
// cancels the work with a cause wrapping ErrLost when the lease is lost, or
// at WriteDeadline with no renewal through, at once rather than at the next
// renewal, and with it every destination call in flight. A renewal that
// fails otherwise (the lease store unreachable) is retried at the next
// tick. stop ends both for good.
func (h *Held) Keep(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	h.mu.Lock()
	h.stopWork = cancel
	h.mu.Unlock()
	h.arm()
	stopRenew := h.renewer(ctx, cancel)
	return func() {
		stopRenew()
		h.mu.Lock()
		h.stopWork = nil
		h.gen++
		t := h.timer
		h.timer = nil
		h.mu.Unlock()
		if t != nil {
			t.Stop()
		}
	}
}

// Release gives the lease back. It compares the token, so it is harmless
// after a loss.
func (h *Held) Release(ctx context.Context) error { return h.m.Release(ctx, h.grant) }

// setExpiry records the lease's new local expiry, asked at asked, and
// re-arms the timer.
func (h *Held) setExpiry(asked, t time.Time) {
	h.mu.Lock()
	h.expiresAt, h.wallAt = t, wallExpiry(asked, t)
	h.mu.Unlock()
	h.arm()
}

// arm (re-)arms the expiry timer on the holder's clock while Keep guards
// the work.
func (h *Held) arm() {
	h.mu.Lock()
	stop := h.stopWork
	if stop == nil {
		h.mu.Unlock()
		return
	}
	h.gen++
	gen, old := h.gen, h.timer
	h.timer = nil
	exp, wall := h.expiresAt, h.wallAt
	h.mu.Unlock()
	at := effectiveExpiry(h.clk.Now(), exp, wall).Add(-AttemptMargin(h.ttl))
	if old != nil {
		old.Stop()
	}
	// A timer counts on the monotonic clock, the lease store (SQLite's
	// rows, on this machine's wall clock) and every other process on the
	// wall clock: a step of the wall clock forward while armed makes the
	// lease expired for them at once, and another run may take it. So the
	// timer fires at least every wallCheck to look at the wall clock again
	// (expired re-arms it while the deadline is ahead).
	// The call may run at once (a fake clock, a deadline already past), so
	// no lock is held across AfterFunc; expired ignores a stale timer.
	t := clock.AfterFunc(h.clk, min(at.Sub(h.clk.Now()), wallCheck), func() { h.expired(gen) })
	h.mu.Lock()
	if h.gen == gen {
		h.timer = t
		t = nil
	}
	h.mu.Unlock()
	if t != nil {
		t.Stop()
	}
}

// expired cancels the work if timer gen is still the current one (no
// renewal re-armed it since).
func (h *Held) expired(gen int) {
	h.mu.Lock()
	current, stop := gen == h.gen, h.stopWork
	h.mu.Unlock()
	if !current || stop == nil {
		return
	}
	if h.clk.Now().Before(h.WriteDeadline()) {
		h.arm() // a wallCheck tick, the deadline still ahead
		return
	}
	exp := h.Expiry()
	cause := fmt.Errorf("%w: no renewal succeeded before the lease's local expiry (%s) less the %s margin for destination calls",
		ErrLost, exp.UTC().Format(time.RFC3339Nano), AttemptMargin(h.ttl))
	if rf := h.RenewFailure(); rf != nil {
		cause = fmt.Errorf("%w; the last renewal failed: %w", cause, rf)
	}
	stop(cause)
}

// RenewFailure is the last renewal's error while no renewal has succeeded
// since, else nil.
func (h *Held) RenewFailure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewErr
}

// renewer renews every RenewEvery on the holder's clock until stopped.
func (h *Held) renewer(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	if h.every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	tick := make(chan struct{}, 1)
	arm := func() clock.Timer {
		return clock.AfterFunc(h.clk, h.every, func() {
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
			if err := h.Renew(ctx); errors.Is(err, ErrLost) {
				cancel(err)
				return
			}
			if err := h.checkFence(ctx); errors.Is(err, ErrLost) {
				cancel(err)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}
