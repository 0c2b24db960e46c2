package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/lease"
)

// grantingManager grants every lease for the TTL on its clock; renewals
// answer renewErr when it is set.
type grantingManager struct {
	clk *clock.Fake

	mu       sync.Mutex
	renewErr error
	renewals int
	released int
}

func (m *grantingManager) Acquire(_ context.Context, p lease.AcquireParams) (lease.Grant, error) {
	return lease.Grant{SyncID: p.SyncID, Token: "t", Fence: 7, ExpiresAt: m.clk.Now().Add(p.TTL)}, nil
}

func (m *grantingManager) Renew(_ context.Context, g lease.Grant, ttl time.Duration) (lease.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.renewals++
	if m.renewErr != nil {
		return g, m.renewErr
	}
	g.ExpiresAt = m.clk.Now().Add(ttl)
	return g, nil
}

func (m *grantingManager) Release(context.Context, lease.Grant) error {
	m.mu.Lock()
	m.released++
	m.mu.Unlock()
	return nil
}

func (m *grantingManager) fail(err error) {
	m.mu.Lock()
	m.renewErr = err
	m.mu.Unlock()
}

type heldBundle struct {
	clk *clock.Fake
	m   *grantingManager
	h   *lease.Held
	t0  time.Time
}

func setupHeld(t *testing.T, renewEvery time.Duration) *heldBundle {
	t.Helper()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	m := &grantingManager{clk: clk}
	h, err := lease.Hold(t.Context(), lease.HoldParams{Manager: m, SyncID: "s", RunID: 1, TTL: 30 * time.Second, RenewEvery: renewEvery, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return &heldBundle{clk: clk, m: m, h: h, t0: t0}
}

// TestHeldDeadline: the attempt deadline is the local expiry less the
// margin; a renewal moves both; the work is cancelled at the deadline with
// ErrLost as its cause once renewals stop succeeding.
func TestHeldDeadline(t *testing.T) {
	t.Parallel()
	b := setupHeld(t, 10*time.Second)
	if got, want := b.h.Fence(), int64(7); got != want {
		t.Fatalf("fence %d, want %d", got, want)
	}
	if got, want := b.h.WriteDeadline(), b.t0.Add(24*time.Second); !got.Equal(want) {
		t.Fatalf("write deadline %s, want %s (30 s TTL less the 6 s margin)", got, want)
	}
	work, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	stop := b.h.Keep(work, cancel)
	defer stop()

	// The first renewal (at 10 s) succeeds: the deadline moves to 34 s.
	waitUntil(t, func() bool { return b.clk.Pending() == 2 }, "the expiry and renewal timers")
	b.clk.Advance(10 * time.Second)
	waitUntil(t, func() bool { return b.h.WriteDeadline().Equal(b.t0.Add(34 * time.Second)) }, "the renewal at 10 s")

	// From now on the store does not answer: at 34 s the work is cancelled.
	b.m.fail(errors.New("connection refused"))
	waitUntil(t, func() bool { return b.clk.Pending() == 2 }, "the re-armed timers")
	b.clk.Advance(23 * time.Second)
	if work.Err() != nil {
		t.Fatalf("work cancelled at 33 s, before its deadline: %v", context.Cause(work))
	}
	b.clk.Advance(time.Second)
	waitUntil(t, func() bool { return work.Err() != nil }, "the cancellation at the write deadline")
	if !errors.Is(context.Cause(work), lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(work))
	}
}

// TestHeldRenew: a lost lease is ErrLost at once; a store error is not,
// until the local expiry has passed.
func TestHeldRenew(t *testing.T) {
	t.Parallel()
	b := setupHeld(t, 0)
	b.m.fail(lease.ErrLost)
	if err := b.h.Renew(t.Context()); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew of a lost lease: %v", err)
	}
	b.m.fail(errors.New("timeout"))
	if err := b.h.Renew(t.Context()); err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew failing within the TTL: %v, want a store error", err)
	}
	b.clk.Advance(31 * time.Second)
	if err := b.h.Renew(t.Context()); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew failing past the local expiry: %v, want ErrLost", err)
	}
}

// TestHeldEnsure: Ensure renews only with less than a third of the TTL
// left, and reports a loss the work's context carries.
func TestHeldEnsure(t *testing.T) {
	t.Parallel()
	b := setupHeld(t, 0)
	if err := b.h.Ensure(t.Context()); err != nil || b.m.renewals != 0 {
		t.Fatalf("ensure with the full TTL left: %v, %d renewals", err, b.m.renewals)
	}
	b.clk.Advance(21 * time.Second)
	if err := b.h.Ensure(t.Context()); err != nil || b.m.renewals != 1 {
		t.Fatalf("ensure with 9 s left: %v, %d renewals; want one renewal", err, b.m.renewals)
	}
	if got, want := b.h.Expiry(), b.t0.Add(51*time.Second); !got.Equal(want) {
		t.Fatalf("expiry %s, want %s", got, want)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(lease.ErrLost)
	if err := b.h.Ensure(ctx); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("ensure on a lost lease's work: %v", err)
	}
	if err := b.h.Release(t.Context()); err != nil || b.m.released != 1 {
		t.Fatalf("release: %v, %d", err, b.m.released)
	}
}

// waitUntil waits for a renewal goroutine to act; the bound only turns a
// hang into a failure.
func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLocalExpiryIsMonotonic: the local expiry is the ask plus the shorter
// of the TTL and what the store reported, and it keeps the ask's monotonic
// reading even when the store's (wall) expiry is the shorter, so a step of
// the worker's wall clock cannot lengthen the lease.
func TestLocalExpiryIsMonotonic(t *testing.T) {
	t.Parallel()
	asked := time.Now() // with a monotonic reading
	for _, tc := range []struct {
		name     string
		reported time.Time
		want     time.Time
	}{
		{"none reported", time.Time{}, asked.Add(30 * time.Second)},
		{"store's clock behind", asked.Add(20 * time.Second).Round(0), asked.Add(20 * time.Second)},
		{"store's clock ahead", asked.Add(45 * time.Second).Round(0), asked.Add(30 * time.Second)},
		{"reported before the ask", asked.Add(-time.Second).Round(0), asked.Add(30 * time.Second)},
	} {
		got := lease.LocalExpiry(asked, 30*time.Second, tc.reported)
		if !got.Equal(tc.want) {
			t.Errorf("%s: LocalExpiry = %v, want %v", tc.name, got, tc.want)
		}
		// Round(0) strips a monotonic reading: a time that has one differs.
		if got == got.Round(0) {
			t.Errorf("%s: LocalExpiry = %v has no monotonic reading", tc.name, got)
		}
	}
}

// fencedManager is a grantingManager that is a lease.FenceChecker: its
// check answers ErrLost once fenced is set.
type fencedManager struct {
	grantingManager
	fenced atomicBool
	checks atomicInt
}

func (m *fencedManager) CheckFence(context.Context, lease.Grant) error {
	m.checks.add()
	if m.fenced.get() {
		return fmt.Errorf("a higher fence is registered: %w", lease.ErrLost)
	}
	return nil
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) set(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
func (b *atomicBool) get() bool  { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

type atomicInt struct {
	mu sync.Mutex
	v  int
}

func (n *atomicInt) add()     { n.mu.Lock(); n.v++; n.mu.Unlock() }
func (n *atomicInt) get() int { n.mu.Lock(); defer n.mu.Unlock(); return n.v }

// TestRenewerChecksTheFence: a Manager that is a FenceChecker (Redis, whose
// other key spaces may grant the sync on the same store) is asked after
// every background renewal whether the held fence is still the store's;
// once it is not, the work stops with ErrLost, within one renewal interval.
func TestRenewerChecksTheFence(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	m := &fencedManager{grantingManager: grantingManager{clk: clk}}
	h, err := lease.Hold(t.Context(), lease.HoldParams{Manager: m, SyncID: "s", RunID: 1, TTL: 30 * time.Second, RenewEvery: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	work, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	stop := h.Keep(work, cancel)
	defer stop()

	waitUntil(t, func() bool { return clk.Pending() == 2 }, "the expiry and renewal timers")
	clk.Advance(10 * time.Second)
	waitUntil(t, func() bool { return m.checks.get() == 1 }, "the fence check after the first renewal")
	if work.Err() != nil {
		t.Fatalf("work stopped while the fence was the store's: %v", context.Cause(work))
	}
	m.fenced.set(true)
	waitUntil(t, func() bool { return clk.Pending() == 2 }, "the re-armed timers")
	clk.Advance(10 * time.Second)
	waitUntil(t, func() bool { return work.Err() != nil }, "the stop after the store registered a higher fence")
	if !errors.Is(context.Cause(work), lease.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(work))
	}
}

// TestRenewFailureIsTheLastRenewals: a refused renewal is kept until one
// succeeds, so a run whose lease ran out can say why, and a refusal
// followed by a success is not blamed for a later end.
func TestRenewFailureIsTheLastRenewals(t *testing.T) {
	t.Parallel()
	b := setupHeld(t, 0)
	if err := b.h.RenewFailure(); err != nil {
		t.Fatalf("before any renewal: %v", err)
	}
	refused := errors.New("NOPERM this user has no permissions to run the 'evalsha' command")
	b.m.fail(refused)
	b.clk.Advance(time.Second)
	if err := b.h.Renew(t.Context()); !errors.Is(err, refused) {
		t.Fatalf("Renew = %v, want the refusal", err)
	}
	if err := b.h.RenewFailure(); !errors.Is(err, refused) {
		t.Fatalf("after a refused renewal: RenewFailure = %v, want the refusal", err)
	}
	b.m.fail(nil)
	if err := b.h.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.h.RenewFailure(); err != nil {
		t.Fatalf("after a renewal that succeeded: RenewFailure = %v, want nil", err)
	}
}
