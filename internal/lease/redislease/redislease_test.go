package redislease_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

const ttl = 30 * time.Second

func (tb *bundle) acquire(t *testing.T, m *redislease.Manager, runID int64) lease.Grant {
	t.Helper()
	g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: runID, TTL: ttl})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return g
}

func (tb *bundle) counter(t *testing.T) int64 {
	t.Helper()
	v, err := tb.client.Get(tb.ctx, tb.keys.Fence(tb.syncID)).Result()
	if err != nil {
		t.Fatalf("GET fence: %v", err)
	}
	return atoi(t, v)
}

func (tb *bundle) leaseExists(t *testing.T) bool {
	t.Helper()
	n, err := tb.client.Exists(tb.ctx, tb.keys.Lease(tb.syncID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// checkExpiry asserts that got is Redis's time at the call plus ttl: between
// the server times read just before and just after the call.
func checkExpiry(t *testing.T, got, before, after time.Time, ttl time.Duration) {
	t.Helper()
	const slack = 50 * time.Millisecond // two servers' clocks on one machine
	if got.Before(before.Add(ttl).Add(-slack)) || got.After(after.Add(ttl).Add(slack)) {
		t.Errorf("ExpiresAt = %s, want Redis time + %s in [%s, %s]", got.Format(time.RFC3339Nano), ttl,
			before.Add(ttl).Format(time.RFC3339Nano), after.Add(ttl).Format(time.RFC3339Nano))
	}
}

func TestAcquireHeldRenewRelease(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		before := redisNow(t, tb)
		g := tb.acquire(t, tb.mgr, 7)
		after := redisNow(t, tb)
		if g.SyncID != tb.syncID || len(g.Token) != 32 || g.Fence != 2 {
			t.Fatalf("grant = %+v, want sync %q, a 32-hex token, fence 2 (the first Redis fence)", g, tb.syncID)
		}
		checkExpiry(t, g.ExpiresAt, before, after, ttl)
		h := hgetall(t, tb, tb.keys.Lease(tb.syncID))
		if h["token"] != g.Token || h["fence"] != "2" || h["holder"] != lease.ThisProcess().String() || h["run_id"] != "7" {
			t.Errorf("lease hash = %v, want token, fence 2, this process as holder, run 7", h)
		}
		if pttl := tb.client.PTTL(tb.ctx, tb.keys.Lease(tb.syncID)).Val(); pttl <= ttl-5*time.Second || pttl > ttl {
			t.Errorf("lease PTTL = %s, want about %s", pttl, ttl)
		}
		if d := tb.client.TTL(tb.ctx, tb.keys.Fence(tb.syncID)).Val(); d != -1 {
			t.Errorf("fence key TTL = %v, want -1 (never expires)", d)
		}
		tb.assertRegistered(t, tb.syncID, 2)

		// Held: another manager (a live process: this one) is refused.
		_, err := tb.manager(lease.Process{}).Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 8, TTL: ttl})
		var held *lease.HeldError
		if !errors.As(err, &held) || !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("second Acquire error = %v, want *lease.HeldError", err)
		}
		if held.Holder != lease.ThisProcess().String() || strings.Contains(err.Error(), g.Token) {
			t.Errorf("HeldError = %q, want holder %q and no token", err, lease.ThisProcess())
		}
		if c := tb.counter(t); c != 2 {
			t.Errorf("fence counter = %d after a refused acquire, want 2", c)
		}

		// Renew extends from Redis's time.
		if err := tb.client.PExpire(tb.ctx, tb.keys.Lease(tb.syncID), 2*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		before = redisNow(t, tb)
		g2, err := tb.mgr.Renew(tb.ctx, g, 45*time.Second)
		after = redisNow(t, tb)
		if err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if g2.Token != g.Token || g2.Fence != g.Fence || g2.SyncID != g.SyncID {
			t.Errorf("Renew changed the grant: %+v -> %+v", g, g2)
		}
		checkExpiry(t, g2.ExpiresAt, before, after, 45*time.Second)
		if pttl := tb.client.PTTL(tb.ctx, tb.keys.Lease(tb.syncID)).Val(); pttl <= 40*time.Second {
			t.Errorf("lease PTTL after Renew = %s, want about 45s", pttl)
		}

		// Release frees it; releasing again is no error; renewing is lost.
		if err := tb.mgr.Release(tb.ctx, g2); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if tb.leaseExists(t) {
			t.Error("lease key still exists after Release")
		}
		if err := tb.mgr.Release(tb.ctx, g2); err != nil {
			t.Errorf("second Release: %v", err)
		}
		if _, err := tb.mgr.Renew(tb.ctx, g2, ttl); !errors.Is(err, lease.ErrLost) || !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("Renew after Release = %v, want lease.ErrLost and store.ErrLeaseLost", err)
		}
		if c := tb.counter(t); c != 2 {
			t.Errorf("fence counter = %d after release, want 2 (kept)", c)
		}
		g3 := tb.acquire(t, tb.mgr, 9)
		if g3.Fence != 3 || g3.Token == g.Token {
			t.Errorf("next grant = fence %d, want 3 with a new token", g3.Fence)
		}
		tb.assertRegistered(t, tb.syncID, 3)
	})
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		g := tb.acquire(t, tb.mgr, 1)
		// Expire it now, by Redis's clock.
		tb.expireLease(t)
		if _, err := tb.mgr.Get(tb.ctx, tb.syncID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of an expired lease = %v, want ErrNotFound", err)
		}
		_, err := tb.mgr.Renew(tb.ctx, g, ttl)
		if !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "expired or released") {
			t.Errorf("Renew of an expired lease = %v, want ErrLost (expired or released)", err)
		}
		other := tb.manager(lease.Process{})
		g2 := tb.acquire(t, other, 2)
		if g2.Fence != g.Fence+1 {
			t.Errorf("grant after expiry has fence %d, want %d", g2.Fence, g.Fence+1)
		}
		tb.assertRegistered(t, tb.syncID, g2.Fence)
		_, err = tb.mgr.Renew(tb.ctx, g, ttl)
		if !errors.Is(err, lease.ErrLost) || !strings.Contains(err.Error(), "taken by") {
			t.Errorf("Renew of a taken lease = %v, want ErrLost (taken by ...)", err)
		}
		if err := tb.mgr.Release(tb.ctx, g); err != nil || !tb.leaseExists(t) {
			t.Errorf("Release with the old grant: err %v, lease still there %v; want nil, true", err, tb.leaseExists(t))
		}
		if _, err := other.Renew(tb.ctx, g2, ttl); err != nil {
			t.Errorf("new holder's Renew: %v", err)
		}
		// The store refuses the old holder's writes.
		if err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "p9", Fence: g.Fence, RunID: 1}); !isFenced(err) {
			t.Errorf("old holder's SaveCursor = %v, want ErrFenced", err)
		}
	})
}

// TestExpiryRealTTL checks that the TTL really is set on the key, with a
// short one and polling (no fixed sleep).
func TestExpiryRealTTL(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		// 2s, not less: under -race on a loaded CI machine the Get below
		// once came more than 200ms after the Acquire (2026-12-07).
		const short = 2 * time.Second
		g, err := tb.mgr.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: short})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.mgr.Get(tb.ctx, tb.syncID); err != nil {
			t.Fatalf("Get right after Acquire: %v", err)
		}
		deadline := time.Now().Add(short + 10*time.Second)
		for {
			_, err := tb.mgr.Get(tb.ctx, tb.syncID)
			if errors.Is(err, store.ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("lease with a %s TTL still held %s later", short, short+10*time.Second)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := tb.mgr.Renew(tb.ctx, g, ttl); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Renew after the TTL = %v, want ErrLost", err)
		}
	})
}

func TestTokenCompare(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		g := tb.acquire(t, tb.mgr, 1)
		if err := tb.client.PExpire(tb.ctx, tb.keys.Lease(tb.syncID), 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		forged := g
		forged.Token = lease.NewToken()
		if _, err := tb.mgr.Renew(tb.ctx, forged, time.Minute); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Renew with a wrong token = %v, want ErrLost", err)
		}
		if pttl := tb.client.PTTL(tb.ctx, tb.keys.Lease(tb.syncID)).Val(); pttl > 5*time.Second {
			t.Errorf("a wrong-token Renew extended the lease to %s", pttl)
		}
		if err := tb.mgr.Release(tb.ctx, forged); err != nil {
			t.Errorf("Release with a wrong token: %v", err)
		}
		if !tb.leaseExists(t) {
			t.Fatal("a wrong-token Release deleted the lease")
		}
		if _, err := tb.mgr.Renew(tb.ctx, g, ttl); err != nil {
			t.Errorf("holder's Renew: %v", err)
		}
	})
}

func TestFenceGrowsAndIsRegistered(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		var prev lease.Grant
		for i := range 5 {
			g := tb.acquire(t, tb.mgr, int64(i))
			if want := int64(i + 2); g.Fence != want {
				t.Errorf("grant %d fence = %d, want %d", i, g.Fence, want)
			}
			tb.assertRegistered(t, tb.syncID, g.Fence)
			if c := tb.counter(t); c != g.Fence {
				t.Errorf("fence counter = %d, want %d", c, g.Fence)
			}
			if prev.Fence != 0 {
				err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "old", Fence: prev.Fence, RunID: int64(i)})
				if !isFenced(err) {
					t.Errorf("SaveCursor under the previous fence %d = %v, want ErrFenced", prev.Fence, err)
				}
			}
			if err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "new", Fence: g.Fence, RunID: int64(i)}); err != nil {
				t.Errorf("SaveCursor under the granted fence: %v", err)
			}
			if err := tb.mgr.Release(tb.ctx, g); err != nil {
				t.Fatal(err)
			}
			prev = g
		}
	})
}

// TestFenceCounterLost: Redis forgets (part of) its state while a holder is
// still running; the next grant (after the quarantine) must still end above
// every fence the store has registered, so the old holder's writes are
// refused and two runs never share a fence.
func TestFenceCounterLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// lose mutates Redis (and maybe the store) after the old holder got
		// fence old; it returns the store fence the next grant must exceed.
		lose func(t *testing.T, tb *bundle, old lease.Grant) int64
	}{
		{"counter and lease deleted (flush, restart)", func(t *testing.T, tb *bundle, old lease.Grant) int64 {
			tb.client.Del(tb.ctx, tb.keys.Lease(tb.syncID), tb.keys.Fence(tb.syncID))
			return old.Fence
		}},
		{"counter one behind, lease lost (failover to a lagging replica)", func(t *testing.T, tb *bundle, old lease.Grant) int64 {
			tb.expireLease(t)
			tb.client.Set(tb.ctx, tb.keys.Fence(tb.syncID), old.Fence-1, 0)
			return old.Fence
		}},
		{"counter reset to 1", func(t *testing.T, tb *bundle, old lease.Grant) int64 {
			tb.expireLease(t)
			tb.client.Set(tb.ctx, tb.keys.Fence(tb.syncID), 1, 0)
			return old.Fence
		}},
		{"store far ahead of Redis", func(t *testing.T, tb *bundle, old lease.Grant) int64 {
			tb.expireLease(t)
			if err := tb.store.RaiseFence(tb.ctx, tb.syncID, 100000); err != nil {
				t.Fatal(err)
			}
			return 100000
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, tb *bundle) {
				for range 3 { // fences 2, 3, 4; the old holder gets 5
					if err := tb.mgr.Release(tb.ctx, tb.acquire(t, tb.mgr, 1)); err != nil {
						t.Fatal(err)
					}
				}
				old := tb.acquire(t, tb.mgr, 2)
				if err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "a", Fence: old.Fence, RunID: 2}); err != nil {
					t.Fatal(err)
				}
				floor := tt.lose(t, tb, old)

				// The first Acquire notices the loss and grants nothing for
				// a TTL (TestQuarantine); once that has run out:
				m := tb.manager(lease.Process{})
				if _, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 3, TTL: ttl}); !errors.Is(err, lease.ErrQuarantined) {
					t.Fatalf("Acquire after losing Redis state = %v, want ErrQuarantined", err)
				}
				tb.endQuarantine(t)
				g := tb.acquire(t, m, 3)
				if g.Fence <= floor {
					t.Fatalf("grant after losing Redis state has fence %d, want > %d", g.Fence, floor)
				}
				tb.assertRegistered(t, tb.syncID, g.Fence)
				if c := tb.counter(t); c != g.Fence {
					t.Errorf("fence counter = %d, want the grant's %d", c, g.Fence)
				}
				if h := hgetall(t, tb, tb.keys.Lease(tb.syncID)); h["fence"] != strconv.FormatInt(g.Fence, 10) || h["token"] != g.Token {
					t.Errorf("lease hash = %v, want token and fence %d of the grant", h, g.Fence)
				}
				err := tb.store.SaveCursor(tb.ctx, store.SaveCursorParams{SyncID: tb.syncID, Value: "zombie", Fence: old.Fence, RunID: 2})
				if !isFenced(err) {
					t.Errorf("old holder's SaveCursor = %v, want ErrFenced", err)
				}
				if _, err := tb.mgr.Renew(tb.ctx, old, ttl); !errors.Is(err, lease.ErrLost) {
					t.Errorf("old holder's Renew = %v, want ErrLost", err)
				}
				// The next grant continues from the raised counter.
				if err := tb.mgr.Release(tb.ctx, g); err != nil {
					t.Fatal(err)
				}
				if g2 := tb.acquire(t, tb.mgr, 4); g2.Fence != g.Fence+1 {
					t.Errorf("following grant fence = %d, want %d", g2.Fence, g.Fence+1)
				}
			})
		})
	}
}

func TestNoScriptFallback(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		flush := func() {
			t.Helper()
			err := testenv.ForEachServer(tb.ctx, tb.client, func(ctx context.Context, c *redis.Client) error {
				return c.ScriptFlush(ctx).Err()
			})
			if err != nil {
				t.Fatalf("SCRIPT FLUSH: %v", err)
			}
		}
		flush()
		g := tb.acquire(t, tb.mgr, 1)
		flush()
		if _, err := tb.mgr.Renew(tb.ctx, g, ttl); err != nil {
			t.Errorf("Renew after SCRIPT FLUSH: %v", err)
		}
		flush()
		if l, err := tb.mgr.Get(tb.ctx, tb.syncID); err != nil || l.Token != g.Token {
			t.Errorf("Get after SCRIPT FLUSH = %+v, %v", l, err)
		}
		flush()
		if err := tb.mgr.Release(tb.ctx, g); err != nil {
			t.Errorf("Release after SCRIPT FLUSH: %v", err)
		}
		if tb.leaseExists(t) {
			t.Error("lease still there after Release")
		}
		flush()
		if g2 := tb.acquire(t, tb.mgr, 2); g2.Fence != g.Fence+1 {
			t.Errorf("fence after flushes = %d, want %d", g2.Fence, g.Fence+1)
		}
	})
}

func TestConcurrentAcquire(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		const n = 16
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			grants []lease.Grant
			held   int
			others []error
		)
		start := make(chan struct{})
		for i := range n {
			m := tb.manager(lease.Process{})
			wg.Go(func() {
				<-start
				g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: int64(i), TTL: ttl})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					grants = append(grants, g)
				case errors.Is(err, lease.ErrHeld):
					held++
				default:
					others = append(others, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(grants) != 1 || held != n-1 || len(others) != 0 {
			t.Fatalf("%d grants, %d held, other errors %v; want exactly 1 grant and %d held", len(grants), held, others, n-1)
		}
		tb.assertRegistered(t, tb.syncID, grants[0].Fence)
		if c := tb.counter(t); c != grants[0].Fence {
			t.Errorf("fence counter = %d, want %d (refused acquires take no fence)", c, grants[0].Fence)
		}
	})
}

func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.Process.Pid
}

func TestTakeOver(t *testing.T) {
	t.Parallel()
	here := lease.ThisProcess()
	if here.Boot == "" || here.PIDNS == "" {
		t.Skip("no /proc boot id or pid namespace: no local takeover here")
	}
	tests := []struct {
		name     string
		holder   func(t *testing.T) lease.Process
		takeOver bool
	}{
		{"dead process on this machine", func(t *testing.T) lease.Process {
			p := here
			p.PID = deadPID(t)
			return p
		}, true},
		{"live process on this machine", func(t *testing.T) lease.Process { return here }, false},
		{"dead pid on another host", func(t *testing.T) lease.Process {
			p := here
			p.Host, p.PID = "elsewhere", deadPID(t)
			return p
		}, false},
		{"dead pid in another boot", func(t *testing.T) lease.Process {
			p := here
			p.Boot, p.PID = "another-boot", deadPID(t)
			return p
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, tb *bundle) {
				holder := tt.holder(t)
				first := tb.acquire(t, tb.manager(holder), 1)
				g, err := tb.mgr.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 2, TTL: ttl})
				if !tt.takeOver {
					var held *lease.HeldError
					if !errors.As(err, &held) || held.Holder != holder.String() {
						t.Fatalf("Acquire = %+v, %v; want HeldError naming %q", g, err, holder)
					}
					return
				}
				if err != nil {
					t.Fatalf("Acquire over a dead holder: %v", err)
				}
				if g.Fence != first.Fence+1 {
					t.Errorf("takeover fence = %d, want %d", g.Fence, first.Fence+1)
				}
				tb.assertRegistered(t, tb.syncID, g.Fence)
				if _, err := tb.mgr.Renew(tb.ctx, first, ttl); !errors.Is(err, lease.ErrLost) {
					t.Errorf("dead holder's Renew = %v, want ErrLost", err)
				}
				if h := hgetall(t, tb, tb.keys.Lease(tb.syncID)); h["holder"] != here.String() {
					t.Errorf("holder after takeover = %q, want %q", h["holder"], here)
				}
			})
		})
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		if _, err := tb.mgr.Get(tb.ctx, tb.syncID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of a free lease = %v, want ErrNotFound", err)
		}
		g := tb.acquire(t, tb.mgr, 42)
		before := redisNow(t, tb)
		l, err := tb.mgr.Get(tb.ctx, tb.syncID)
		after := redisNow(t, tb)
		if err != nil {
			t.Fatal(err)
		}
		if l.SyncID != tb.syncID || l.Token != g.Token || l.Fence != g.Fence || l.RunID != 42 || l.Holder != lease.ThisProcess().String() {
			t.Errorf("Get = %+v, want the grant %+v of run 42", l, g)
		}
		// ExpiresAt is Redis time + remaining TTL: the grant's expiry, to the ms.
		if d := l.ExpiresAt.Sub(g.ExpiresAt); d < -50*time.Millisecond || d > 50*time.Millisecond {
			t.Errorf("Get ExpiresAt = %s, grant's = %s", l.ExpiresAt, g.ExpiresAt)
		}
		if l.ExpiresAt.After(after.Add(ttl)) || l.ExpiresAt.Before(before) {
			t.Errorf("Get ExpiresAt = %s outside [%s, %s]", l.ExpiresAt, before, after.Add(ttl))
		}
	})
}

// hookStore is the real SQLite store with a callback before each RaiseFence,
// to interleave another worker's moves with a registration.
type hookStore struct {
	store.Store
	mu     sync.Mutex
	calls  int
	before func(call int)
}

func (h *hookStore) RaiseFence(ctx context.Context, syncID string, fence int64) error {
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	h.before(n)
	return h.Store.RaiseFence(ctx, syncID, fence)
}

func TestLostWhileRegistering(t *testing.T) {
	t.Parallel()
	t.Run("another run takes over and registers first", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, tb *bundle) {
			var other lease.Grant
			hs := &hookStore{Store: tb.store}
			hs.before = func(call int) {
				if call != 1 {
					return
				}
				// Our lease vanishes (expired while we stalled) and another
				// worker takes and registers the next fence.
				tb.expireLease(t)
				other = tb.acquire(t, tb.mgr, 99)
			}
			m := redislease.New(redislease.Params{Client: tb.client, Store: hs, Keys: tb.keys})
			g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: ttl})
			var held *lease.HeldError
			if !errors.As(err, &held) {
				t.Fatalf("Acquire = %+v, %v; want HeldError (the other run holds it)", g, err)
			}
			if other.Fence != 3 {
				t.Errorf("other run's fence = %d, want 3", other.Fence)
			}
			tb.assertRegistered(t, tb.syncID, other.Fence)
			if _, err := tb.mgr.Renew(tb.ctx, other, ttl); err != nil {
				t.Errorf("other run's Renew: %v", err)
			}
		})
	})
	t.Run("lease vanishes between registration and confirm", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, func(t *testing.T, tb *bundle) {
			hs := &hookStore{Store: tb.store}
			hs.before = func(call int) {
				if call == 2 { // just before RaiseFence(f): Redis drops the lease
					tb.expireLease(t)
				}
			}
			m := redislease.New(redislease.Params{Client: tb.client, Store: hs, Keys: tb.keys})
			g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: ttl})
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if g.Fence != 3 {
				t.Errorf("fence = %d, want 3 (the unconfirmed fence 2 is never handed out)", g.Fence)
			}
			if hs.calls != 4 {
				t.Errorf("%d RaiseFence calls, want 4 (two per attempt)", hs.calls)
			}
			tb.assertRegistered(t, tb.syncID, g.Fence)
			if h := hgetall(t, tb, tb.keys.Lease(tb.syncID)); h["token"] != g.Token || h["fence"] != "3" {
				t.Errorf("lease hash = %v, want the grant's token and fence 3", h)
			}
		})
	})
}

func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		if err := tb.store.Close(); err != nil {
			t.Fatal(err)
		}
		g, err := tb.mgr.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: ttl})
		if !errors.Is(err, store.ErrUnavailable) || g.Token != "" {
			t.Fatalf("Acquire with the store closed = %+v, %v; want no grant and ErrUnavailable", g, err)
		}
		if tb.leaseExists(t) {
			t.Error("the unregistered grant was not released")
		}
	})
}

func TestRedisUnavailable(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, m *redislease.Manager, syncID string) {
		t.Helper()
		ctx := t.Context()
		g, err := m.Acquire(ctx, lease.AcquireParams{SyncID: syncID, RunID: 1, TTL: ttl})
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, lease.ErrHeld) || g.Token != "" {
			t.Errorf("Acquire = %+v, %v; want no grant and ErrUnavailable", g, err)
		}
		g = lease.Grant{SyncID: syncID, Token: lease.NewToken(), Fence: 5}
		if _, err := m.Renew(ctx, g, ttl); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, lease.ErrLost) {
			t.Errorf("Renew = %v; want ErrUnavailable, not ErrLost", err)
		}
		if err := m.Release(ctx, g); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Release = %v; want ErrUnavailable", err)
		}
		if _, err := m.Get(ctx, syncID); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Get = %v; want ErrUnavailable", err)
		}
	}
	newStore := func(t *testing.T) store.Store {
		st, err := sqliteStore(t)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	t.Run("client on a closed port", func(t *testing.T) {
		t.Parallel()
		c := redis.NewClient(&redis.Options{Addr: freeAddr(t), MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
		defer c.Close()
		check(t, redislease.New(redislease.Params{Client: c, Store: newStore(t)}), "s")
	})
	t.Run("ring on closed ports", func(t *testing.T) {
		t.Parallel()
		c := redis.NewRing(&redis.RingOptions{
			Addrs:      map[string]string{"a": freeAddr(t), "b": freeAddr(t)},
			MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1,
		})
		defer c.Close()
		check(t, redislease.New(redislease.Params{Client: c, Store: newStore(t)}), "s")
	})
	t.Run("server stops while the lease is held", func(t *testing.T) {
		t.Parallel()
		addr, stop := startServer(t)
		defer stop()
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
		defer c.Close()
		m := redislease.New(redislease.Params{Client: c, Store: newStore(t)})
		g, err := m.Acquire(t.Context(), lease.AcquireParams{SyncID: "s", RunID: 1, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if _, err := m.Renew(t.Context(), g, ttl); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, lease.ErrLost) {
			t.Errorf("Renew with Redis gone = %v; want ErrUnavailable, not ErrLost", err)
		}
		if err := m.Release(t.Context(), g); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Release with Redis gone = %v; want ErrUnavailable", err)
		}
	})
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	st, err := sqliteStore(t)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: freeAddr(t), MaxRetries: -1})
	defer c.Close()
	ok := redislease.New(redislease.Params{Client: c, Store: st})
	g := lease.Grant{SyncID: "s", Token: "t", Fence: 2}
	tests := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"empty sync id", func(ctx context.Context) error {
			_, err := ok.Acquire(ctx, lease.AcquireParams{TTL: ttl})
			return err
		}},
		{"zero ttl", func(ctx context.Context) error {
			_, err := ok.Acquire(ctx, lease.AcquireParams{SyncID: "s"})
			return err
		}},
		{"sub-millisecond ttl", func(ctx context.Context) error {
			_, err := ok.Acquire(ctx, lease.AcquireParams{SyncID: "s", TTL: 500 * time.Microsecond})
			return err
		}},
		{"renew zero ttl", func(ctx context.Context) error {
			_, err := ok.Renew(ctx, g, 0)
			return err
		}},
		{"release empty sync id", func(ctx context.Context) error { return ok.Release(ctx, lease.Grant{Token: "t"}) }},
		{"get empty sync id", func(ctx context.Context) error {
			_, err := ok.Get(ctx, "")
			return err
		}},
		{"no client", func(ctx context.Context) error {
			_, err := redislease.New(redislease.Params{Store: st}).Acquire(ctx, lease.AcquireParams{SyncID: "s", TTL: ttl})
			return err
		}},
		{"no store", func(ctx context.Context) error {
			_, err := redislease.New(redislease.Params{Client: c}).Acquire(ctx, lease.AcquireParams{SyncID: "s", TTL: ttl})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.call(t.Context())
			if !errors.Is(err, redislease.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("error = %v, want ErrInvalid (checked before any Redis call)", err)
			}
		})
	}
}

// TestRingKeepsSyncKeysTogether: through a Ring, each sync's lease and fence
// keys live on one shard (the scripts touch both), whatever the id, while the
// syncs spread over both shards.
func TestRingKeepsSyncKeysTogether(t *testing.T) {
	t.Parallel()
	tb := setup(t, backends()[1])
	ids := []string{"a}b", "{x}", "acme:contacts", "a b", "", "kontakt-ü"}
	for i := range 30 {
		ids = append(ids, "sync-"+strconv.Itoa(i))
	}
	perShard := map[string]int{}
	for _, id := range ids {
		if id == "" {
			continue // rejected by the manager (see TestInvalid)
		}
		g, err := tb.mgr.Acquire(tb.ctx, lease.AcquireParams{SyncID: id, RunID: 1, TTL: ttl})
		if err != nil {
			t.Fatalf("Acquire(%q): %v", id, err)
		}
		tb.assertRegistered(t, id, g.Fence)
		var leaseOn, fenceOn []string
		err = tb.client.(*redis.Ring).ForEachShard(tb.ctx, func(ctx context.Context, c *redis.Client) error {
			if c.Exists(ctx, tb.keys.Lease(id)).Val() == 1 {
				leaseOn = append(leaseOn, c.Options().Addr)
			}
			if c.Exists(ctx, tb.keys.Fence(id)).Val() == 1 {
				fenceOn = append(fenceOn, c.Options().Addr)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(leaseOn) != 1 || len(fenceOn) != 1 || leaseOn[0] != fenceOn[0] {
			t.Errorf("sync %q: lease on %v, fence on %v; want both on one shard", id, leaseOn, fenceOn)
			continue
		}
		perShard[leaseOn[0]]++
		if _, err := tb.mgr.Renew(tb.ctx, g, ttl); err != nil {
			t.Errorf("Renew(%q): %v", id, err)
		}
	}
	if len(perShard) != 2 {
		t.Errorf("leases per shard = %v, want syncs on both shards", perShard)
	}
}
