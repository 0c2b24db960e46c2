package redislease_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

// switchTTL is the lease TTL of the server-switch tests: short, since a
// switch is judged on Redis's own clock and uptime, which no test can fake.
const switchTTL = 2 * time.Second

// switchWorld is one sync's lease through a server switch: the manager of
// the server before, and the store every server registers fences in.
type switchWorld struct {
	ctx   context.Context
	store redislease.Fences
}

func newSwitchWorld(t *testing.T) *switchWorld {
	t.Helper()
	st, err := sqliteStore(t)
	if err != nil {
		t.Fatal(err)
	}
	return &switchWorld{ctx: t.Context(), store: st}
}

func (w *switchWorld) manager(c redis.UniversalClient) *redislease.Manager {
	return redislease.New(redislease.Params{Client: c, Store: w.store, TTL: switchTTL})
}

func (w *switchWorld) acquire(t *testing.T, m *redislease.Manager, syncID string) lease.Grant {
	t.Helper()
	g, err := m.Acquire(w.ctx, lease.AcquireParams{SyncID: syncID, RunID: 1, TTL: switchTTL})
	if err != nil {
		t.Fatalf("Acquire of %s: %v", syncID, err)
	}
	return g
}

// hold acquires syncID's lease and returns it with its holder's local expiry
// (lease.LocalExpiry): the moment of asking plus the TTL, which is what the
// holder's writes stop by and what a quarantine must outlast. The grant's
// own ExpiresAt counts from the reply, a round trip later than Redis's end.
func (w *switchWorld) hold(t *testing.T, m *redislease.Manager, syncID string) (lease.Grant, time.Time) {
	t.Helper()
	asked := time.Now()
	g := w.acquire(t, m, syncID)
	return g, lease.LocalExpiry(asked, switchTTL, g.ExpiresAt)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// renew renews g, and returns it with its holder's local expiry (hold).
func (w *switchWorld) renew(t *testing.T, m *redislease.Manager, g lease.Grant) (lease.Grant, time.Time) {
	t.Helper()
	asked := time.Now()
	renewed, err := m.Renew(w.ctx, g, switchTTL)
	if err != nil {
		t.Fatal(err)
	}
	return renewed, lease.LocalExpiry(asked, switchTTL, renewed.ExpiresAt)
}

// wantSwitch checks that err is a server switch's quarantine lasting at
// least until notBefore (the holder's last renewal's end) and ending by
// notAfter.
func wantSwitch(t *testing.T, what string, err error, notBefore, notAfter time.Time) *lease.QuarantineError {
	t.Helper()
	return wantQuarantine(t, what, err, lease.CauseSwitch, notBefore, notAfter)
}

// wantQuarantine checks that err is a quarantine of cause lasting at least
// until notBefore and ending by notAfter.
func wantQuarantine(t *testing.T, what string, err error, cause lease.QuarantineCause, notBefore, notAfter time.Time) *lease.QuarantineError {
	t.Helper()
	var qe *lease.QuarantineError
	if !errors.As(err, &qe) || !errors.Is(err, lease.ErrQuarantined) {
		t.Fatalf("%s = %v, want a *lease.QuarantineError", what, err)
	}
	words := map[lease.QuarantineCause]string{lease.CauseSwitch: "restarted or failed over", lease.CauseVanished: "vanished"}[cause]
	if qe.Cause != cause || !strings.Contains(qe.Error(), words) {
		t.Errorf("%s: %q (cause %q), want cause %q", what, qe.Error(), qe.Cause, cause)
	}
	const slack = 20 * time.Millisecond
	if qe.Until.Before(notBefore.Add(-slack)) || qe.Until.After(notAfter) {
		t.Errorf("%s: quarantine until %s, want within [%s, %s]", what, qe.Until.Format(time.StampMilli),
			notBefore.Format(time.StampMilli), notAfter.Format(time.StampMilli))
	}
	return qe
}

// TestServerSwitch: Redis comes back with the lease's data but without its
// holder's last renewals: restarted from a snapshot taken before them, or a
// replica that missed them promoted. The lease then reads as expired while
// its holder, which renewed it on the server before, still writes until its
// TTL runs out: no lease is granted, and recovery does not read it as free,
// before then. A lease released before the switch is granted at once.
func TestServerSwitch(t *testing.T) {
	t.Parallel()

	t.Run("restart from a snapshot", func(t *testing.T) {
		t.Parallel()
		w := newSwitchWorld(t)
		dir := t.TempDir()
		addr, stop, err := servers.Start(dir)
		if errors.Is(err, testenv.ErrNoRedisServer) {
			unavailable(t, "%v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		client := redis.NewClient(&redis.Options{Addr: addr})
		defer client.Close()
		m := w.manager(client)

		g, _ := w.hold(t, m, "busy")
		idle, idleEnd := w.hold(t, m, "idle")
		if err := m.Release(w.ctx, w.acquire(t, m, "released")); err != nil {
			t.Fatal(err)
		}
		if err := client.Save(w.ctx).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(switchTTL * 3 / 5)
		renewed, renewedEnd := w.renew(t, m, g) // after the snapshot: lost with the restart
		stop()                                  // SIGKILL: nothing saved since the snapshot
		restart, err := servers.StartAt(addr, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer restart()
		restarted := time.Now()
		// The snapshot's copies of both leases have expired (idle's was
		// granted after busy's: later on a loaded machine); the holder's
		// renewed one has not.
		time.Sleep(time.Until(later(g.ExpiresAt, idle.ExpiresAt).Add(100 * time.Millisecond)))
		if !time.Now().Before(renewed.ExpiresAt) {
			t.Fatalf("the test took too long: the renewed lease ended at %s", renewed.ExpiresAt)
		}
		notAfter := restarted.Add(switchTTL + 2*time.Second) // uptime is counted in whole seconds

		_, err = m.Get(w.ctx, "busy")
		qe := wantSwitch(t, "Get of the renewed lease", err, renewedEnd, notAfter)
		_, err = m.Acquire(w.ctx, lease.AcquireParams{SyncID: "busy", RunID: 2, TTL: switchTTL})
		wantSwitch(t, "Acquire of the renewed lease", err, renewedEnd, notAfter)
		_, err = m.Acquire(w.ctx, lease.AcquireParams{SyncID: "idle", RunID: 2, TTL: switchTTL})
		wantSwitch(t, "Acquire of a lease held at the snapshot", err, idleEnd, notAfter)
		if got := w.acquire(t, m, "released"); got.FreeFor <= 0 {
			t.Errorf("lease released before the snapshot: FreeFor %s, want > 0", got.FreeFor)
		}
		if _, err := m.Renew(w.ctx, renewed, switchTTL); !errors.Is(err, lease.ErrLost) {
			t.Errorf("the holder's Renew after the restart = %v, want ErrLost", err)
		}

		time.Sleep(time.Until(qe.Until.Add(50 * time.Millisecond)))
		after := w.acquire(t, m, "busy")
		if after.Fence <= g.Fence {
			t.Errorf("grant after the quarantine: fence %d, want > %d", after.Fence, g.Fence)
		}
		if limit := time.Since(qe.Until); after.FreeFor > limit {
			t.Errorf("grant after the quarantine: FreeFor %s, want at most %s (the lease may have run until %s)",
				after.FreeFor, limit, qe.Until.Format(time.StampMilli))
		}
	})

	t.Run("a promoted replica", func(t *testing.T) {
		t.Parallel()
		w := newSwitchWorld(t)
		addr, stop, err := servers.Start(t.TempDir(), "--repl-diskless-sync-delay", "0")
		if errors.Is(err, testenv.ErrNoRedisServer) {
			unavailable(t, "%v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		host, port, _ := strings.Cut(addr, ":")
		raddr, rstop, err := servers.Start(t.TempDir(), "--replicaof", host, port)
		if err != nil {
			t.Fatal(err)
		}
		defer rstop()
		primary := redis.NewClient(&redis.Options{Addr: addr})
		defer primary.Close()
		replica := redis.NewClient(&redis.Options{Addr: raddr})
		defer replica.Close()
		m := w.manager(primary)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			info, err := replica.Info(w.ctx, "replication").Result()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the replica did not connect within 10 s")
			}
		}

		g := w.acquire(t, m, "busy")
		if err := m.Release(w.ctx, w.acquire(t, m, "released")); err != nil {
			t.Fatal(err)
		}
		if n, err := primary.Wait(w.ctx, 1, 2000).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT for the replica = %d, %v", n, err)
		}
		if err := replica.SlaveOf(w.ctx, "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		_, renewedEnd := w.renew(t, m, g) // on the old primary only
		time.Sleep(time.Until(g.ExpiresAt.Add(100 * time.Millisecond)))
		promoted := w.manager(replica)
		_, err = promoted.Get(w.ctx, "busy")
		qe := wantSwitch(t, "Get on the promoted replica", err, renewedEnd, time.Now().Add(switchTTL+100*time.Millisecond))
		// A quarantine started again by Acquire would end this much later
		// than Get's; one quarantine ends when Get's does, give or take the
		// rounding of its milliseconds and a loaded machine.
		const apart, slack = 200 * time.Millisecond, 50 * time.Millisecond
		time.Sleep(apart)
		_, err = promoted.Acquire(w.ctx, lease.AcquireParams{SyncID: "busy", RunID: 2, TTL: switchTTL})
		if got := wantSwitch(t, "Acquire on the promoted replica", err, renewedEnd, qe.Until.Add(slack)); got.Until.Before(qe.Until.Add(-slack)) {
			t.Errorf("Acquire's quarantine ends %s, Get's %s: want one quarantine", got.Until, qe.Until)
		}
		if _, err := promoted.Acquire(w.ctx, lease.AcquireParams{SyncID: "released", RunID: 2, TTL: switchTTL}); err != nil {
			t.Errorf("Acquire of a lease released before the promotion: %v, want a grant", err)
		}
		if _, err := promoted.Get(w.ctx, "never-used"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of a sync never leased = %v, want ErrNotFound", err)
		}
	})
}

// TestVanishedLease: a held lease's key is gone before its end (a DEL, or
// Redis evicting it under maxmemory, which allow_evicting_redis permits):
// its holder still writes until the end its last renewal gave, so nothing
// is granted, and recovery reads no dead holder, before then.
func TestVanishedLease(t *testing.T) {
	t.Parallel()
	w := newSwitchWorld(t)
	// volatile-ttl evicts the keys nearest their expiry first: the lease
	// (2 s) before the filler (1 h).
	addr, stop, err := servers.Start(t.TempDir(), "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	if errors.Is(err, testenv.ErrNoRedisServer) {
		unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	m := w.manager(client)
	keys := rediskey.Default()

	g, gEnd := w.hold(t, m, "evicted")
	filler := strings.Repeat("x", 16<<10)
	for i := 0; ; i++ {
		n, err := client.Exists(w.ctx, keys.Lease("evicted")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if i == 2000 {
			t.Fatal("the lease key was not evicted after 32 MiB of filler")
		}
		if err := client.Set(w.ctx, "filler:"+strconv.Itoa(i), filler, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, err = m.Get(w.ctx, "evicted")
	qe := wantQuarantine(t, "Get of the evicted lease", err, lease.CauseVanished, gEnd, g.ExpiresAt.Add(5*time.Millisecond))
	_, err = m.Acquire(w.ctx, lease.AcquireParams{SyncID: "evicted", RunID: 2, TTL: switchTTL})
	wantQuarantine(t, "Acquire of the evicted lease", err, lease.CauseVanished, gEnd, g.ExpiresAt.Add(5*time.Millisecond))
	if err := client.FlushAll(w.ctx).Err(); err != nil { // this test's own server
		t.Fatal(err)
	}

	// A DEL of the key alone reads the same; once the end has passed, the
	// lease is granted.
	g, gEnd = w.hold(t, m, "deleted")
	if err := client.Del(w.ctx, keys.Lease("deleted")).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = m.Acquire(w.ctx, lease.AcquireParams{SyncID: "deleted", RunID: 2, TTL: switchTTL})
	qe = wantQuarantine(t, "Acquire of the deleted lease", err, lease.CauseVanished, gEnd, g.ExpiresAt.Add(5*time.Millisecond))
	time.Sleep(time.Until(qe.Until.Add(20 * time.Millisecond)))
	if after := w.acquire(t, m, "deleted"); after.Fence != g.Fence+1 {
		t.Errorf("grant after the lease's end: fence %d, want %d", after.Fence, g.Fence+1)
	}
}
