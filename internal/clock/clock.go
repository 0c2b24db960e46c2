// Package clock injects time so lease, breaker and dead-man logic can be tested
// without sleeping.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Sleep waits d on the wall clock, or until ctx is done (its error). It is
// for waits that are real by design (retry backoff, polling pauses), which
// tests shorten by injecting their own sleep, not by advancing a Fake.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not run yet; it reports whether it
	// stopped it.
	Stop() bool
}

// AfterFuncer is a Clock that can call a function once its time has
// advanced by d. Real and *Fake implement it.
type AfterFuncer interface {
	Clock
	AfterFunc(d time.Duration, f func()) Timer
}

// AfterFunc calls f once c's time has advanced by d: through c when it is an
// AfterFuncer, else on the wall clock (time.AfterFunc).
func AfterFunc(c Clock, d time.Duration, f func()) Timer {
	if a, ok := c.(AfterFuncer); ok {
		return a.AfterFunc(d, f)
	}
	return time.AfterFunc(d, f)
}

// WithDeadline is context.WithDeadline on c: the returned context is done
// once c reaches at (its Err is then context.DeadlineExceeded), when parent
// is done, or when cancel is called.
func WithDeadline(parent context.Context, c Clock, at time.Time) (context.Context, context.CancelFunc) {
	if _, ok := c.(Real); ok || c == nil {
		return context.WithDeadline(parent, at)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := AfterFunc(c, at.Sub(c.Now()), func() { cancel(context.DeadlineExceeded) })
	return &deadlineCtx{Context: ctx, at: at}, func() { t.Stop(); cancel(context.Canceled) }
}

// deadlineCtx reports its clock's deadline and, once that passed,
// context.DeadlineExceeded as its error, like a context.WithDeadline.
type deadlineCtx struct {
	context.Context
	at time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }

func (c *deadlineCtx) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	if cause := context.Cause(c.Context); cause == context.DeadlineExceeded {
		return cause
	}
	return c.Context.Err()
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a settable clock for tests. The zero value starts at the Unix epoch.
//
// Its AfterFunc calls run on the goroutine that makes them due (Advance or
// Set, or AfterFunc itself for d <= 0), in the order of their times, once
// the clock's lock is released: when Advance returns, every call that fell
// due has run, so tests need no sleeps.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	seq    int // orders timers due at the same time
}

type fakeTimer struct {
	f   *Fake
	at  time.Time
	seq int
	fn  func()
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake time forward by d and runs the calls that fell due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
	f.fire()
}

// Set sets the fake time and runs the calls that fell due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.mu.Unlock()
	f.fire()
}

// AfterFunc calls fn once the fake time has advanced by d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	f.seq++
	t := &fakeTimer{f: f, at: f.now.Add(d), seq: f.seq, fn: fn}
	f.timers = append(f.timers, t)
	f.mu.Unlock()
	if d <= 0 {
		f.fire()
	}
	return t
}

// Pending is the number of AfterFunc calls not yet run nor stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// fire runs every call due by now, earliest first. A call may add or stop
// timers; one it adds that is already due runs too.
func (f *Fake) fire() {
	for {
		f.mu.Lock()
		sort.SliceStable(f.timers, func(i, j int) bool {
			a, b := f.timers[i], f.timers[j]
			return a.at.Before(b.at) || a.at.Equal(b.at) && a.seq < b.seq
		})
		if len(f.timers) == 0 || f.timers[0].at.After(f.now) {
			f.mu.Unlock()
			return
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		f.mu.Unlock()
		t.fn()
	}
}

// Stop implements Timer.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}
