package redislease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
)

// TestLeaseKeysGoneWithTheirEnd: another application on the same Redis
// deletes keys by pattern (`redis-cli --scan --pattern '*lease*' | xargs
// redis-cli del`), or allkeys-lru evicts the lease with its lease-end, the
// fence counter staying. The lease then reads as free and its end as
// unknown, while its holder writes until its TTL runs out: no lease is
// granted, nor read as free by recovery, for one TTL. A quarantine whose
// lease-loss key goes the same way (volatile-ttl evicts it first) still
// lasts until its end. Without these, a second run wrote the same records
// while the first still did.
func TestLeaseKeysGoneWithTheirEnd(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		m := tb.managerTTL(ttl)
		acquire := func(runID int64) (lease.Grant, error) {
			return m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: runID, TTL: ttl})
		}
		asked := time.Now()
		g, err := acquire(1)
		if err != nil {
			t.Fatal(err)
		}
		// What the holder's writes stop by; g.ExpiresAt counts from the reply.
		heldUntil := lease.LocalExpiry(asked, ttl, g.ExpiresAt)
		del := func(keys ...string) {
			t.Helper()
			for _, k := range keys {
				if err := tb.client.Del(tb.ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		del(tb.keys.Lease(tb.syncID), tb.keys.LeaseEnd(tb.syncID))
		if _, err := m.Get(tb.ctx, tb.syncID); err == nil || !isQuarantine(err) {
			t.Fatalf("Get with the lease and its end deleted = %v, want a quarantine", err)
		}
		_, err = acquire(2)
		qe := wantQuarantine(t, "Acquire with the lease and its end deleted", err, lease.CauseVanished, heldUntil, time.Now().Add(ttl+time.Second))

		// The quarantine's own key deleted too: it still lasts until its end.
		del(tb.keys.LeaseLoss(tb.syncID))
		_, err = acquire(3)
		wantQuarantine(t, "Acquire with the quarantine's key deleted", err, lease.CauseVanished, qe.Until, qe.Until.Add(time.Second))

		tb.endQuarantine(t)
		after, err := acquire(4)
		if err != nil {
			t.Fatalf("Acquire after the quarantine: %v", err)
		}
		if after.Fence <= g.Fence {
			t.Errorf("grant after the quarantine: fence %d, want above %d", after.Fence, g.Fence)
		}
		if err := m.Release(tb.ctx, after); err != nil {
			t.Fatal(err)
		}

		// A loss of the fence counter (a flush) starts a quarantine; its
		// lease-loss key deleted alone (volatile-ttl evicts it first: it
		// has the shortest TTL) does not end it early.
		g, err = acquire(5)
		if err != nil {
			t.Fatal(err)
		}
		tb.lose(t)
		_, err = acquire(6)
		var lq *lease.QuarantineError
		if !errorsAs(err, &lq) {
			t.Fatalf("Acquire after a loss = %v, want a quarantine", err)
		}
		del(tb.keys.LeaseLoss(tb.syncID))
		if _, err := acquire(7); !isQuarantine(err) {
			t.Fatalf("Acquire with the loss's quarantine key deleted = %v, want a quarantine until %s", err, lq.Until.Format(time.StampMilli))
		}
		if _, err := m.Get(tb.ctx, tb.syncID); !isQuarantine(err) {
			t.Fatalf("Get with the loss's quarantine key deleted = %v, want a quarantine", err)
		}
	})
}

func isQuarantine(err error) bool { return errors.Is(err, lease.ErrQuarantined) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestRenewSaysTheLeaseWasGone: a renewal that finds neither the lease nor
// the record of its end (Redis restarted empty, flushed, or evicted them)
// says so on the run's lease_lost line; one whose lease merely expired does
// not (an independent check, 2026-12-06: lease_lost named nothing).
func TestRenewSaysTheLeaseWasGone(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		m := tb.managerTTL(time.Minute)
		g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{tb.keys.Lease(tb.syncID), tb.keys.LeaseEnd(tb.syncID)} {
			if err := tb.client.Del(tb.ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, err = m.Renew(tb.ctx, g, time.Minute)
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Renew of a lease gone = %v, want ErrLost", err)
		}
		if d := failure.Wrap(failure.LeaseLost, err, "lost").Detail; !strings.Contains(d, "Redis lost its data") {
			t.Fatalf("detail %q; want it to say Redis lost its data", d)
		}
		// The next grant notices the loss and waits one TTL; skip it.
		if _, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 2, TTL: time.Minute}); !isQuarantine(err) {
			t.Fatalf("Acquire after the loss = %v, want a quarantine", err)
		}
		tb.endQuarantine(t)
		g, err = m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 3, TTL: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		_, err = m.Renew(tb.ctx, g, time.Minute)
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Renew of an expired lease = %v, want ErrLost", err)
		}
		if d := failure.Wrap(failure.LeaseLost, err, "lost").Detail; strings.Contains(d, "Redis lost") {
			t.Fatalf("an expiry told as a loss: %q", d)
		}
	})
}

// TestRenewStartsTheQuarantine: Redis loses everything of a held lease
// (FLUSHDB: the lease, its end and the fence counter) while its run
// writes. The holder's renewal notices it: the quarantine starts then, as
// a lease.QuarantineError the queue snoozes the job by, and the counter
// moves above the holder's fence. Once the quarantine ends the next grant
// is at once, above that fence. The quarantine used to start only when a
// later grant found the counter behind the store (a job's retry backoff
// later), and last one TTL more (an independent check: 100 s to resume
// under a 30 s TTL).
func TestRenewStartsTheQuarantine(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		m := tb.managerTTL(time.Minute)
		g, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		tb.lose(t)
		before := time.Now()
		_, err = m.Renew(tb.ctx, g, time.Minute)
		var qe *lease.QuarantineError
		if !errors.Is(err, lease.ErrLost) || !errors.As(err, &qe) {
			t.Fatalf("Renew of a lease Redis lost = %v, want ErrLost and a quarantine", err)
		}
		if qe.NoticedAt.Before(before.Add(-time.Second)) || qe.Until.Before(before.Add(50*time.Second)) || qe.Until.After(time.Now().Add(61*time.Second)) {
			t.Fatalf("quarantine noticed at %v until %v; want from the renewal for one TTL (a minute)", qe.NoticedAt, qe.Until)
		}
		if _, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 2, TTL: time.Minute}); !isQuarantine(err) {
			t.Fatalf("Acquire during the quarantine = %v, want a quarantine", err)
		}
		tb.endQuarantine(t)
		g2, err := m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 3, TTL: time.Minute})
		if err != nil || g2.Fence <= g.Fence {
			t.Fatalf("Acquire once the quarantine ended = %+v, %v; want a grant above fence %d", g2, err, g.Fence)
		}

		// Lost again, and another process notices it first (a recovery
		// sweep's Get), which records the lease's end: the holder's
		// renewal still tells the quarantine.
		tb.lose(t)
		if _, err := m.Get(tb.ctx, tb.syncID); !isQuarantine(err) {
			t.Fatalf("Get after the second loss = %v, want a quarantine", err)
		}
		_, err = m.Renew(tb.ctx, g2, time.Minute)
		if !errors.Is(err, lease.ErrLost) || !errors.As(err, &qe) {
			t.Fatalf("Renew after another process noticed the loss = %v, want ErrLost and a quarantine", err)
		}
	})
}
