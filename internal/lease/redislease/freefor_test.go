package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/lease"
)

// TestFreeFor: a grant tells how long the lease had been free since the
// previous one ended (expired as last renewed, or released), by Redis's
// clock; zero for a first grant, a takeover, or a lease-end that belongs to
// no grant of the current fence counter (an older binary's grant, a loss).
func TestFreeFor(t *testing.T) {
	t.Parallel()
	here := lease.ThisProcess()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		const short = 100 * time.Millisecond
		acquire := func(t *testing.T, m lease.Manager, ttl time.Duration) lease.Grant {
			t.Helper()
			g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		var m lease.Manager = tb.mgr
		within := func(t *testing.T, what string, got, lo, hi time.Duration) {
			t.Helper()
			if got < lo || got > hi {
				t.Fatalf("%s: FreeFor = %s, want within [%s, %s]", what, got, lo, hi)
			}
		}

		first := acquire(t, m, 2*time.Second)
		within(t, "first grant", first.FreeFor, 0, 0)
		// A renewal moves the end: the lease ends short after it.
		time.Sleep(150 * time.Millisecond)
		renewing := time.Now()
		if _, err := m.Renew(tb.ctx, first, short); err != nil {
			t.Fatal(err)
		}
		time.Sleep(short + 800*time.Millisecond)
		after := acquire(t, m, short)
		// At least 300 ms since the renewed expiry (800 ms slept: a loaded
		// machine once showed 93 ms after 300 ms slept, the renewal's
		// moment in Redis later than its answer here suggests), at most the
		// time since the renewal was sent less short; the grant's own end
		// (2 s) has not passed.
		within(t, "after an expiry", after.FreeFor, 300*time.Millisecond, time.Since(renewing)-short)
		if err := m.Release(tb.ctx, after); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		within(t, "after a release", acquire(t, m, ttl).FreeFor, 150*time.Millisecond, 1*time.Second)

		// A takeover: the holder is known dead, its lease has not ended.
		if here.Boot != "" && here.PIDNS != "" {
			dead := here
			dead.PID = deadPID(t)
			tb.expireLease(t)
			var dm lease.Manager = tb.manager(dead)
			acquire(t, dm, ttl)
			within(t, "a takeover", acquire(t, m, ttl).FreeFor, 0, 0)
		}

		// A grant the lease-end does not record (an oncesync older than
		// lease-ends moved the counter alone, or the lease-end was deleted
		// with the lease): its end is unknown, so nothing is granted for
		// one TTL (TestLeaseKeysGoneWithTheirEnd); FreeFor counts from the
		// quarantine's end.
		tb.expireLease(t)
		if err := tb.client.Incr(tb.ctx, tb.keys.Fence(tb.syncID)).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: ttl}); !errors.Is(err, lease.ErrQuarantined) {
			t.Fatalf("Acquire after a grant the lease-end does not record = %v, want a quarantine", err)
		}
		tb.endQuarantine(t)
		within(t, "after a grant of another fence", acquire(t, m, ttl).FreeFor, 0, 100*time.Millisecond)
	})
}
