package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/store"
)

// The quarantine of docs/guide.md#the-store-and-the-leases: a lease store that lost its data grants no
// lease of a sync until one TTL after the loss was noticed, and Get (which
// lease-expiry recovery reads) does not report a lost lease as free. Data
// loss is simulated by deleting this test's own keys only: the shared Redis
// is never flushed (a whole-server loss runs on a throwaway redis-server).

// managerTTL returns a Manager on tb's Redis, store and keys that knows the
// deployment's lease TTL, as `serve` builds it.
func (tb *bundle) managerTTL(ttl time.Duration) *redislease.Manager {
	return redislease.New(redislease.Params{Client: tb.client, Store: tb.store, Keys: tb.keys, TTL: ttl})
}

// lose deletes the sync's keys, as a flush or a restart without persistence
// does.
func (tb *bundle) lose(t *testing.T) {
	t.Helper()
	for _, k := range []string{tb.keys.Lease(tb.syncID), tb.keys.Fence(tb.syncID), tb.keys.LeaseLoss(tb.syncID), tb.keys.LeaseEnd(tb.syncID)} {
		if err := tb.client.Del(tb.ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// endQuarantine deletes the lease-loss key, as its PX expiry does one TTL
// after the notice (checkQuarantine checks that expiry), and moves the
// lease-end a notice wrote to now, as that time would.
func (tb *bundle) endQuarantine(t *testing.T) {
	t.Helper()
	tb.endNow(t)
	if err := tb.client.Del(tb.ctx, tb.keys.LeaseLoss(tb.syncID)).Err(); err != nil {
		t.Fatal(err)
	}
}

func (tb *bundle) lossPTTL(t *testing.T) time.Duration {
	t.Helper()
	d, err := tb.client.PTTL(tb.ctx, tb.keys.LeaseLoss(tb.syncID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkQuarantine asserts err is a quarantine noticed between before and
// after (Redis times) lasting ttl, with no grant left in Redis.
func (tb *bundle) checkQuarantine(t *testing.T, err error, before, after time.Time, ttl time.Duration) *lease.QuarantineError {
	t.Helper()
	const slack = 50 * time.Millisecond
	var qe *lease.QuarantineError
	if !errors.As(err, &qe) || !errors.Is(err, lease.ErrQuarantined) {
		t.Fatalf("got %v, want a *lease.QuarantineError", err)
	}
	if qe.SyncID != tb.syncID || qe.NoticedAt.Before(before.Add(-slack)) || qe.NoticedAt.After(after.Add(slack)) {
		t.Errorf("quarantine %+v: want sync %s noticed in [%s, %s]", qe, tb.syncID, before, after)
	}
	if d := qe.Until.Sub(qe.NoticedAt); d < ttl-slack || d > ttl+slack {
		t.Errorf("quarantine until %s, %s after its notice; want one TTL (%s)", qe.Until, d, ttl)
	}
	if d := tb.lossPTTL(t); d <= ttl-time.Second || d > ttl {
		t.Errorf("lease-loss key expires in %s, want one TTL (%s) after the notice", d, ttl)
	}
	if tb.leaseExists(t) {
		t.Errorf("a lease exists during the quarantine: %v", hgetall(t, tb, tb.keys.Lease(tb.syncID)))
	}
	return qe
}

func sameNotice(t *testing.T, got error, want *lease.QuarantineError) {
	t.Helper()
	var qe *lease.QuarantineError
	if !errors.As(got, &qe) || !qe.NoticedAt.Equal(want.NoticedAt) {
		t.Errorf("got %v, want the quarantine noticed at %s", got, want.NoticedAt)
	}
}

func TestQuarantine(t *testing.T) {
	t.Parallel()
	t.Run("Acquire notices the loss", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, tb *bundle) {
			old := tb.acquire(t, tb.mgr, 1)
			if err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "a", Fence: old.Fence, RunID: 1}); err != nil {
				t.Fatal(err)
			}
			tb.lose(t)
			m := tb.managerTTL(ttl)
			before := redisNow(t, tb)
			g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 2, TTL: ttl})
			after := redisNow(t, tb)
			if g.Token != "" {
				t.Fatalf("granted %+v right after the loss", g)
			}
			qe := tb.checkQuarantine(t, err, before, after, ttl)

			// The old holder can still reach the destination; its store
			// writes are refused already and its renewals fail, so it stops
			// (package runner) within the TTL the quarantine waits out.
			if err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "zombie", Fence: old.Fence, RunID: 1}); !isFenced(err) {
				t.Errorf("old holder's SaveCursor during the quarantine = %v, want ErrFenced", err)
			}
			if _, err := tb.mgr.Renew(tb.ctx, old, ttl); !errors.Is(err, lease.ErrLost) {
				t.Errorf("old holder's Renew = %v, want ErrLost", err)
			}
			// Everybody waits, and recovery does not see a dead holder.
			_, err = tb.mgr.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 3, TTL: ttl})
			sameNotice(t, err, qe)
			_, err = m.Get(tb.ctx, tb.syncID)
			sameNotice(t, err, qe)

			tb.endQuarantine(t)
			g = tb.acquire(t, m, 4)
			if g.Fence <= old.Fence {
				t.Errorf("grant after the quarantine has fence %d, want > %d", g.Fence, old.Fence)
			}
			tb.assertRegistered(t, tb.syncID, g.Fence)
			if err := m.Release(tb.ctx, g); err != nil {
				t.Fatal(err)
			}
			// The counter is past the store again: nothing more is noticed.
			if g2 := tb.acquire(t, m, 5); g2.Fence != g.Fence+1 {
				t.Errorf("next grant fence %d, want %d", g2.Fence, g.Fence+1)
			}
		})
	})

	t.Run("a second loss during the quarantine is noticed again", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, tb *bundle) {
			tb.acquire(t, tb.mgr, 1)
			tb.lose(t)
			m := tb.managerTTL(ttl)
			_, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 2, TTL: ttl})
			first := tb.checkQuarantine(t, err, time.Time{}, redisNow(t, tb), ttl)

			tb.lose(t) // the quarantine's key goes with the rest
			before := redisNow(t, tb)
			g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 3, TTL: ttl})
			if g.Token != "" {
				t.Fatalf("granted %+v after a second loss", g)
			}
			second := tb.checkQuarantine(t, err, before, redisNow(t, tb), ttl)
			if second.NoticedAt.Before(first.NoticedAt) {
				t.Errorf("second notice %s before the first %s", second.NoticedAt, first.NoticedAt)
			}
		})
	})

	t.Run("Get notices the loss", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, tb *bundle) {
			old := tb.acquire(t, tb.mgr, 7)
			tb.lose(t)
			m := tb.managerTTL(ttl)
			before := redisNow(t, tb)
			l, err := m.Get(tb.ctx, tb.syncID)
			if errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Get after the loss = %+v, ErrNotFound: recovery would read the live holder as dead", l)
			}
			qe := tb.checkQuarantine(t, err, before, redisNow(t, tb), ttl)
			if err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "zombie", Fence: old.Fence, RunID: 7}); !isFenced(err) {
				t.Errorf("old holder's SaveCursor = %v, want ErrFenced", err)
			}
			_, err = tb.mgr.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 8, TTL: ttl})
			sameNotice(t, err, qe)

			tb.endQuarantine(t)
			if _, err := m.Get(tb.ctx, tb.syncID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get after the quarantine = %v, want ErrNotFound (free)", err)
			}
			if g := tb.acquire(t, m, 9); g.Fence <= old.Fence {
				t.Errorf("grant after the quarantine has fence %d, want > %d", g.Fence, old.Fence)
			}
		})
	})

	t.Run("Get without a TTL reports the loss and records nothing", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, tb *bundle) {
			tb.acquire(t, tb.mgr, 1)
			tb.lose(t)
			_, err := tb.mgr.Get(tb.ctx, tb.syncID)
			var qe *lease.QuarantineError
			if !errors.As(err, &qe) || !qe.NoticedAt.IsZero() {
				t.Fatalf("Get = %v, want a quarantine without times", err)
			}
			if d := tb.lossPTTL(t); d != -2*time.Nanosecond {
				t.Errorf("lease-loss key PTTL %s, want none recorded", d)
			}
			_, err = tb.mgr.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 2, TTL: ttl})
			tb.checkQuarantine(t, err, time.Time{}, redisNow(t, tb), ttl)
		})
	})

	t.Run("a fresh deployment waits for nothing", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, tb *bundle) {
			m := tb.managerTTL(ttl)
			if _, err := m.Get(tb.ctx, tb.syncID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get of a never used sync = %v, want ErrNotFound", err)
			}
			if g := tb.acquire(t, m, 1); g.Fence != 2 {
				t.Errorf("first grant fence %d, want 2", g.Fence)
			}
			if d := tb.lossPTTL(t); d != -2*time.Nanosecond {
				t.Errorf("lease-loss key PTTL %s on a fresh deployment, want none", d)
			}
		})
	})
}

// TestQuarantineWholeServer: the whole Redis loses its data (a throwaway
// redis-server, flushed): no lease until one TTL after the notice.
func TestQuarantineWholeServer(t *testing.T) {
	t.Parallel()
	addr, stop := startServer(t)
	defer stop()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	st, err := sqliteStore(t)
	if err != nil {
		t.Fatal(err)
	}
	m := redislease.New(redislease.Params{Client: client, Store: st, TTL: ttl})
	ctx := t.Context()
	var old []lease.Grant
	for _, id := range []string{"a", "b"} {
		g, err := m.Acquire(ctx, lease.AcquireParams{SyncID: id, RunID: 1, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, g)
	}
	if err := client.FlushAll(ctx).Err(); err != nil { // this test's own server
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "a"); !errors.Is(err, lease.ErrQuarantined) {
		t.Errorf("Get after the flush = %v, want ErrQuarantined", err)
	}
	for _, g := range old {
		if got, err := m.Acquire(ctx, lease.AcquireParams{SyncID: g.SyncID, RunID: 2, TTL: ttl}); !errors.Is(err, lease.ErrQuarantined) {
			t.Errorf("Acquire of %s after the flush = %+v, %v; want ErrQuarantined", g.SyncID, got, err)
		}
		if _, err := m.Renew(ctx, g, ttl); !errors.Is(err, lease.ErrLost) {
			t.Errorf("old holder's Renew of %s = %v, want ErrLost", g.SyncID, err)
		}
	}
	if g, err := m.Acquire(ctx, lease.AcquireParams{SyncID: "never-used", RunID: 3, TTL: ttl}); err != nil || g.Fence != 2 {
		t.Errorf("Acquire of a sync the store never fenced = %+v, %v; want a grant", g, err)
	}
}
